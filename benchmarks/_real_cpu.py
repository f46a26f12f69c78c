"""`real_kernels.py --check-on-cpu`: every kernel checked without a GPU, so that the GPU run
measures kernels known to be right and calls known to lower.

- `interpreted`: each kernel at its small sizes in Triton's interpreter, one call and a chain of
  2, through the package (JAX on the CPU runs `triton_call` there) or through PyTorch's
  launches on CPU tensors (under TRITON_INTERPRET=1), against the jax.numpy references;
- `lowered_for_sm90`: each chain lowered at the measured sizes for CUDA sm_90 under
  `target_arch`: the route each call takes, and the shared memory of each Triton binary against
  the H200's limit (a call on XLA's route is also lowered on jaxlib's, to compile the binary).

Not a script: `real_kernels.py` imports it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

import jax_triton_rocm as jtr

from _common import DRY_RUN_ARCH, chain, triton_add
from _real_cases import BY_NAME
from _real_measure import ADD, RouteLog, attempt, chain_of, forced_route, max_error, to_torch

SM90_SHARED_MEMORY = 232448  # bytes a block may use on sm_90 (227 KiB), the launch's limit
SMALL_ADD = 1000


def _leaves(tree) -> list[np.ndarray]:
    return [np.asarray(leaf, np.float32) for leaf in jax.tree.leaves(tree)]


def _check_kernel(name: str, torch_side: bool) -> str | None:
    """Checks one kernel in the interpreter; prints its line; returns why it failed, or None."""
    case = BY_NAME[name]
    sizes = case.small
    state, consts = case.inputs(sizes, jax.random.key(0))
    reference = jax.jit(functools.partial(case.reference, sizes, 0))(*state, *consts)
    chain_reference = jax.jit(chain_of(case.reference, sizes, 2))(state, consts)
    if torch_side:
        state = tuple(to_torch(a, "cpu") for a in state)
        consts = tuple(to_torch(a, "cpu") for a in consts)
        single = case.torch(sizes, 0, *state, *consts)
        chained = chain_of(case.torch, sizes, 2)(state, consts)
    else:
        single = jax.jit(functools.partial(case.package, sizes, 0))(*state, *consts)
        chained = jax.jit(chain_of(case.package, sizes, 2))(state, consts)
    error, correct = max_error(_leaves(single), _leaves(reference), case.tolerance)
    chain_error, chain_correct = max_error(_leaves(chained), _leaves(chain_reference),
                                           case.tolerance)
    ok = correct and chain_correct
    side = "PyTorch" if torch_side else "package"
    print(f"check {name} ({side}, Triton's interpreter): max error {error:.2e}, chain of 2 "
          f"{chain_error:.2e} (atol {case.tolerance[0]}, rtol {case.tolerance[1]}): "
          f"{'ok' if ok else 'FAILED'}", flush=True)
    return None if ok else f"{name} ({side}): wrong result, max error {error}, {chain_error}"


def _check_add() -> str | None:
    x = jnp.arange(SMALL_ADD, dtype=jnp.float32)
    ok = bool(jnp.array_equal(chain(functools.partial(triton_add, xla_native=None), 2)(x, x),
                              3 * x))
    print(f"check {ADD} (package, Triton's interpreter): {'ok' if ok else 'FAILED'}", flush=True)
    return None if ok else f"{ADD}: wrong result"


def interpreted(names: list[str], torch_side: bool) -> list[str]:
    """Checks `names` in Triton's interpreter on the CPU; returns what failed."""
    failures = []
    with jax.default_device(jax.devices("cpu")[0]):
        for name in names:
            if name == ADD and torch_side:
                continue  # overhead.py launches the add from PyTorch
            found = attempt(name, lambda: {"failed": (_check_add() if name == ADD
                                                      else _check_kernel(name, torch_side))})
            if found["failed"]:
                failures.append(found["failed"])
    return failures


def _lowered(name: str):
    """`name`'s chain of 2 at the measured sizes, lowered for CUDA sm_90."""
    if name == ADD:
        arg = jax.ShapeDtypeStruct((1024,), jnp.float32)
        fn, args = chain(functools.partial(triton_add, xla_native=None), 2), (arg, arg)
    else:
        case = BY_NAME[name]
        args = jax.eval_shape(functools.partial(case.inputs, case.full), jax.random.key(0))
        fn = jax.jit(chain_of(case.package, case.full, 2))
    with jtr.target_arch(cuda=DRY_RUN_ARCH):
        return fn.trace(*args).lower(lowering_platforms=("cuda",))


def _shared_memory(lowered) -> list[int]:
    return [launch["shared_mem_bytes"] for call in jtr.kernel_calls(lowered)
            for launch in call.summary()["launches"] if launch["shared_mem_bytes"] is not None]


def _lower_one(name: str) -> str | None:
    """Lowers one chain for sm_90; prints its line; returns why it failed, or None."""
    with RouteLog() as log:
        try:
            lowered = _lowered(name)
        except NotImplementedError as err:  # the package's error for what this jax cannot do
            print(f"lower {name} for {DRY_RUN_ARCH}: skipped: {err}", flush=True)
            return None
    shared = _shared_memory(lowered)
    if any(route == "xla" for _, route, _ in log.routes()):
        with forced_route("0"):  # jaxlib's lowering compiles the binary; XLA's does on the GPU
            shared = _shared_memory(_lowered(name))
    most = max(shared, default=0)
    ok = bool(shared) and most <= SM90_SHARED_MEMORY
    print(f"lower {name} for {DRY_RUN_ARCH}: route {log.summary()}; shared memory at most "
          f"{most} B (limit {SM90_SHARED_MEMORY}): {'ok' if ok else 'FAILED'}", flush=True)
    for kernel, route, reason in log.routes():
        print(f"  {kernel}: {route}: {reason}")
    return None if ok else f"{name} for {DRY_RUN_ARCH}: shared memory {shared}"


def lowered_for_sm90(names: list[str]) -> list[str]:
    """Lowers each of `names`' chains for CUDA sm_90; returns what failed."""
    failures = []
    for name in names:
        found = attempt(f"lower {name}", lambda: {"failed": _lower_one(name)})
        if found["failed"]:
            failures.append(found["failed"])
    return failures
