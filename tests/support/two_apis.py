"""One call of a kernel through either public API: `triton_call`, or a primitive whose lowering
rule calls `triton_call_lowering` (for tests that give both the same value and expect the same
verdict, worded for the API that was called)."""

import itertools

import jax.numpy as jnp
import triton

import jax_triton_rocm as jtr
from tests.support import kernels
from tests.support import library_kernels as lk
from tests.support.lowering_utils import lower_for, spec

APIS = ("triton_call", "triton_call_lowering")
X = spec((1024,), jnp.float32)
_names = itertools.count()


def call_through(api: str, kernel=kernels.add_outputs_first_kernel, operands=None, **options):
    """`fn(x, y)` calling `kernel` (two operands, one output; `add_outputs_first_kernel` unless
    given) through `api` ("triton_call" or "triton_call_lowering") with the constexpr n=1024.

    `options` go to the API as they are, apart from the grid ((4,) unless given) and BLOCK (a
    constexpr of the call: 256 unless given, and none for an autotuned kernel unless given).
    `operands(ctx)`, if given, is what the lowering rule passes as the operands instead of its
    own (`triton_call_lowering` only).
    """
    options.setdefault("grid", (4,))
    constexprs = {"n": 1024}
    if "BLOCK" in options or not isinstance(kernel, triton.runtime.Autotuner):
        constexprs["BLOCK"] = options.pop("BLOCK", 256)
    if api == "triton_call":
        return lambda x, y: jtr.triton_call(x, y, kernel=kernel, out_shape=x, **constexprs,
                                            **options)

    def lowering(ctx, x, y):
        args = operands(ctx) if operands is not None else (x, y)
        return jtr.triton_call_lowering(ctx, kernel, *args, constexprs=constexprs, **options)

    prim = lk.define(f"two_apis_{next(_names)}", lambda x, y: [x], lowering)
    return lambda x, y: prim.bind(x, y)[0]


def lower_through(api: str, platform: str = "cuda", arch=None, **options):
    """`call_through(api, **options)` lowered on `X, X` for `platform` (`lower_for`)."""
    return lower_for(call_through(api, **options), X, X, platform=platform, arch=arch)
