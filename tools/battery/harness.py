"""What the battery's cases are made of: the case record, the kernels, and the ways a case runs an
input (a CPU lowering for sm_90 or gfx942 under `target_arch`, a run in Triton's interpreter on
the CPU, a library primitive lowered with `triton_call_lowering`, a fresh process)."""

from __future__ import annotations

import dataclasses
import itertools
import os
import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl
from jax._src.core import Primitive  # jax.extend.core.Primitive; this keeps Pallas out
from jax.interpreters import mlir

import jax_triton_rocm as jtr
from tests.support.kernels import add_kernel  # noqa: F401  (the cases import it from here)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARCH = {"cuda": "sm_90", "rocm": "gfx942"}
N = 1024
X = jax.ShapeDtypeStruct((N,), jnp.float32)


@dataclasses.dataclass(frozen=True)
class Case:
    """One input and what a good package does with it.

    Attributes:
      name: unique; says the input and the route ("... [sm_90]").
      group: the API or area ("triton_call", "triton_call_lowering", "autotune", ...).
      run: performs the input; returns what `check` judges, or raises.
      expect: "refuse" (a bad input: must raise a clear error), "accept" (a good edge input: must
        work, and pass `check`), or "either" (a clear error, or a correct result).
      mentions: the hand-kept expectation for a clear error: texts its message must contain
        (the argument's name, the offending value; "a|b" accepts either), case-insensitive.
      check: for an accepted input, whether the result is right (None: working is enough).
      from_issue: listed in issue 21 ("silent" or "unclear"), else "".
    """

    name: str
    group: str
    run: Callable[[], Any]
    expect: str
    mentions: tuple[str, ...] = ()
    check: Callable[[Any], bool] | None = None
    from_issue: str = ""


def refuse(name, group, run, *mentions, from_issue=""):
    return Case(name, group, run, "refuse", tuple(mentions), None, from_issue)


def accept(name, group, run, check=None, from_issue=""):
    return Case(name, group, run, "accept", (), check, from_issue)


def either(name, group, run, *mentions, check=None, from_issue=""):
    return Case(name, group, run, "either", tuple(mentions), check, from_issue)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * SCALE, mask=mask)


@triton.jit
def accumulate_kernel(x_ptr, acc_ptr, out_ptr, BLOCK: tl.constexpr):
    """out = acc + x; called with acc aliased to out, it accumulates in place."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(acc_ptr + offsets) + tl.load(x_ptr + offsets))


@triton.jit
def copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


@triton.jit
def fill_kernel(value, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.zeros((BLOCK,), tl.float32) + value)


def add(x, y, **call):
    """`triton_call` of add_kernel, with the call's settings overridable."""
    settings = dict(kernel=add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                    grid=(triton.cdiv(x.size, 256),), BLOCK=256)
    settings.update(call)
    return jtr.triton_call(x, y, x.size, **settings)


def lower(platform: str, fn: Callable, *args: Any) -> list:
    """`fn(*args)` lowered on the CPU for sm_90 or gfx942; returns its `EmittedCall`s."""
    with jtr.target_arch(**{platform: ARCH[platform]}):
        lowered = jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,))
    return jtr.kernel_calls(lowered)


def lower_text(platform: str, fn: Callable, *args: Any) -> str:
    """The StableHLO text of `fn(*args)` lowered for `platform`'s named architecture."""
    with jtr.target_arch(**{platform: ARCH[platform]}):
        return jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,)).as_text()


def on_cpu(*arrays: Any) -> list:
    """`arrays` placed on the CPU device (where a triton_call runs in Triton's interpreter)."""
    return [jax.device_put(a, jax.devices("cpu")[0]) for a in arrays]


def interpret(fn: Callable, *arrays: Any) -> Any:
    """`jax.jit(fn)` run on the CPU (Triton's interpreter); returns NumPy results."""
    return jax.tree_util.tree_map(np.asarray, jax.jit(fn)(*on_cpu(*arrays)))


def ramp(n: int = N, dtype=jnp.float32) -> jax.Array:
    return jnp.arange(n, dtype=dtype)


_names = itertools.count()


def primitive(abstract_eval: Callable, rule: Callable, *, multiple_results: bool = False,
              platforms=("cuda", "rocm", "cpu")) -> Primitive:
    """A library primitive whose lowering `rule(ctx, *operands)` calls triton_call_lowering."""
    prim = Primitive(f"battery_{next(_names)}")
    prim.multiple_results = multiple_results
    prim.def_abstract_eval(abstract_eval)
    for platform in platforms:
        mlir.register_lowering(prim, rule, platform=platform)
    return prim


def library_route(route: str, rule: Callable, *, out=None, n_in: int = 1,
                  multiple_results: bool = False) -> Callable[[], Any]:
    """A run that binds a fresh primitive (operands like X, results `out`, default like X),
    whose lowering is `rule`, and lowers it for `route` ("sm_90", "gfx942") or runs it in the
    interpreter ("cpu"). Returns the EmittedCalls, or the NumPy results on the CPU."""
    results = out if out is not None else X

    def abstract_eval(*avals):
        if multiple_results:
            return [jax.core.ShapedArray(r.shape, r.dtype) for r in results]
        return jax.core.ShapedArray(results.shape, results.dtype)

    def run():
        prim = primitive(abstract_eval, rule, multiple_results=multiple_results)
        fn = lambda *xs: prim.bind(*xs)  # noqa: E731
        if route == "cpu":
            return interpret(fn, *[ramp()] * n_in)
        platform = {"sm_90": "cuda", "gfx942": "rocm"}[route]
        return lower(platform, fn, *[X] * n_in)

    return run


class ChildError(Exception):
    """What a fresh process printed as its error (the last line of its traceback)."""


def in_fresh_process(code: str, env: dict[str, str], prefix: tuple[str, ...] = ()) -> str:
    """Runs `code` in a new Python with `env` added, its command line after `prefix` (a shell
    that prepares the process); returns its stdout.

    Raises:
      ChildError: the process failed; its message is the last traceback line.
    """
    full_env = {**os.environ, **env, "PYTHONPATH": ROOT}
    result = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True,
                            text=True, env=full_env, timeout=240, cwd=ROOT)
    if result.returncode != 0:
        lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
        # The error line, not JAX's note on its filtered traceback printed after it.
        errors = [line for line in lines if re.match(r"[\w.]+(Error|Exception)\b", line)]
        raise ChildError(errors[-1] if errors else f"exit status {result.returncode}")
    return result.stdout


def first_launch(calls: list) -> dict:
    """The first launch of the only kernel call: kernel, grid, warps, parameters."""
    assert len(calls) == 1, f"{len(calls)} kernel calls"
    return calls[0].summary()["launches"][0]


def zeroed_bytes(calls: list) -> list[int]:
    """bytes_to_zero of each array parameter of the only kernel call."""
    message = calls[0].message
    return [p.array.bytes_to_zero for p in message.kernel_call.parameters
            if p.WhichOneof("value") == "array"]
