"""The routes a call can take, for the tests that run one kernel on each: jaxlib's Triton custom
call and XLA's own (`xla_native`), on whichever GPU JAX sees, NVIDIA or AMD (marked `gpu`); and
Triton's interpreter, on the CPU (which runs there too: every array is placed on the CPU device,
so it runs on a GPU machine as well). "default" stands for the GPU route of a call that asks for
none, which is jaxlib's.

The `route` fixture (tests/conftest.py) gives a test its `Route`, and fails the test if its calls
did not all take that route, so that a silent fallback (XLA's call to jaxlib's, say) cannot pass
for the route. `every_route` (the `routes` mark) parametrises it with the routes that run in the
test's folder (`routes_of_the_folder`, from tests/conftest.py's `pytest_generate_tests`): the GPU
routes in tests/gpu, the interpreter in tests/cpu. "legacy" is jaxlib's route with plain calls
on jaxlib's legacy target; the fixture fails a test whose plain calls took another target. A
test on every route is written once, in tests/gpu, and tests/cpu's file of the same name
imports it.
"""

import jax
import jax.numpy as jnp
import pytest

from jax_triton_rocm.routes.xla import _xla_native
from tests.support.kernels import random_normal

# "legacy": jaxlib's route with plain calls on its legacy target (JAX_TRITON_ROCM_CALL_TARGET),
# as `auto` picks it where XLA_FLAGS keeps custom calls out of command buffers.
GPU_ROUTE_NAMES = ("jaxlib", "legacy", "xla")
CPU_ROUTE_NAMES = ("interpreter",)
GPU_ROUTES = [pytest.param(name, marks=pytest.mark.gpu) for name in GPU_ROUTE_NAMES]
# The target each route's plain calls take (None: not jaxlib's custom call), and each route's in
# an exported program.
PLAIN_TARGET = {"jaxlib": "triton_kernel_call_ffi", "legacy": "triton_kernel_call"}
# What `jax.export` emits per route: jaxlib's FFI target even where JAX_TRITON_ROCM_CALL_TARGET
# is legacy (the legacy target has no compatibility guarantee).
EXPORT_TARGET = {**PLAIN_TARGET, "legacy": PLAIN_TARGET["jaxlib"],
                 "xla": _xla_native.CUSTOM_CALL_NAME}
# The route whose emit each route's calls go through.
EMITTED_BY = {"default": "jaxlib", "legacy": "jaxlib"}

# Every route: in tests/gpu the GPU routes, in tests/cpu the interpreter (`routes_of_the_folder`).
every_route = pytest.mark.routes(*GPU_ROUTE_NAMES, *CPU_ROUTE_NAMES)
gpu_route = pytest.mark.parametrize("route", GPU_ROUTES, indirect=True)


def routes_of_the_folder(names, folder: str) -> list:
    """The `route` parameters of a test marked `routes(*names)` collected in tests/`folder`: the
    GPU routes (marked `gpu`) in tests/gpu, the others anywhere else; a test left with none is an
    error, rather than a test that silently never runs."""
    on_gpu = folder == "gpu"
    params = [pytest.param(name, marks=pytest.mark.gpu) if on_gpu else name
              for name in names if (name not in CPU_ROUTE_NAMES) == on_gpu]
    if not params:
        raise ValueError(f"none of the routes {names} runs in tests/{folder}")
    return params


class Route:
    """One route under test: where its arrays live, and what its calls took."""

    def __init__(self, name: str):
        self.name = name
        self.on_gpu = name != "interpreter"
        self.device = None if self.on_gpu else jax.devices("cpu")[0]
        self.emitted = {"jaxlib": 0, "xla": 0, "interpreter": 0}
        self.expected = EMITTED_BY.get(name, name)
        self.plain_targets: set[str] = set()  # the targets jaxlib's plain calls took

    def rand(self, key: int, shape, dtype=jnp.float32) -> jax.Array:
        return random_normal(key, shape, dtype, device=self.device)

    def put(self, x) -> jax.Array:
        return jax.device_put(x, self.device) if self.device is not None else jnp.asarray(x)

    def pick(self, gpu, cpu):
        """`gpu` on the GPU routes, `cpu` (smaller: the interpreter is slow) on the CPU."""
        return gpu if self.on_gpu else cpu

    def expect(self, name: str | None) -> None:
        """This test's calls take route `name` instead (a kernel that does not fit the route);
        None: the test checks `emitted` itself."""
        self.expected = None if name is None else EMITTED_BY.get(name, name)

    def problem(self) -> str | None:
        if self.expected is None:  # the test checked the routes itself
            return None
        others = {k: v for k, v in self.emitted.items() if k != self.expected}
        if self.emitted[self.expected] == 0 or any(others.values()):
            return f"calls were meant to take the {self.expected} route: {self.emitted}"
        wanted = PLAIN_TARGET.get(self.name)
        if wanted and self.plain_targets - {wanted}:
            return f"plain calls were meant to take {wanted}: {sorted(self.plain_targets)}"
        return None


def counting(route: Route, name: str, fn):
    """`fn`, counting its calls in `route.emitted[name]`; for jaxlib's `emit(ctx, operands,
    lowered)`, the target of each plain (one-kernel) call in `route.plain_targets`."""
    def counted(*args, **kwargs):
        route.emitted[name] += 1
        lowered = args[2] if name == "jaxlib" and len(args) > 2 else None
        if lowered is not None and len(lowered.calls) == 1:
            route.plain_targets.add(lowered.custom_call_name)
        return fn(*args, **kwargs)

    return counted
