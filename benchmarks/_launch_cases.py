"""What `launch_cost.py` measures: the kernel calls (a small add, the same add with a binary
about 20 times larger, an add with 30 parameters, autotuned versions of the first two), the rows
(a call and what its proto carries) and how each row is lowered.

Each `OPS[name](x, y, xla_native=...)` is one call on two float32[SIZE] arrays giving x + y,
fit for a chain.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
from collections.abc import Callable

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _compat, _env, _state
from jax_triton_rocm.routes.jaxlib import _proto

from _common import add_kernel, chain, forced_features, xla_add_unfused

SIZE = 1024
BLOCK = 1024
# Unrolled steps in the big kernel's dead branch: its sm_90 CUBIN is then about 20 times the
# small add's (`launch_cost.py --dry-run` prints the ratio).
UNROLL = 176
WIDE_INPUTS = 14
WIDE_SCALARS = 15


@triton.jit
def big_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr, UNROLL: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    # Taken only when y[0] is negative (never here): data the compiler cannot see, even on
    # XLA's route where n is compiled in, so the unrolled body stays in the binary.
    if tl.load(y_ptr) < 0:
        acc = x
        for i in tl.static_range(UNROLL):
            acc = acc * y + i
            tl.store(out_ptr + offsets + i * BLOCK, acc, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def wide_kernel(x_ptr, y_ptr, p2, p3, p4, p5, p6, p7, p8, p9, p10, p11, p12, p13,
                n, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14,
                out_ptr, BLOCK: tl.constexpr):
    # 30 parameters: 14 input pointers, 15 scalars, 1 output; only x, y and n are read.
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets,
                                                                                 mask=mask),
             mask=mask)


TUNED_CONFIGS = (triton.Config({"BLOCK": 1024}, num_warps=4),
                 triton.Config({"BLOCK": 512}, num_warps=4))
tuned_add_kernel = triton.autotune(configs=list(TUNED_CONFIGS), key=["n"])(add_kernel)
tuned_big_kernel = triton.autotune(configs=list(TUNED_CONFIGS), key=["n"])(big_kernel)


def _grid(meta):
    return (triton.cdiv(meta["n"], meta["BLOCK"]),)


def small(x, y, xla_native=False):
    return jtr.triton_call(x, y, x.size, kernel=add_kernel, out_shape=x, grid=_grid,
                           BLOCK=BLOCK, xla_native=xla_native)


def big(x, y, xla_native=False):
    return jtr.triton_call(x, y, x.size, kernel=big_kernel, out_shape=x, grid=_grid,
                           BLOCK=BLOCK, UNROLL=UNROLL, xla_native=xla_native)


def wide(x, y, xla_native=False):
    inputs = [x, y] + [y] * (WIDE_INPUTS - 2)
    scalars = [x.size] + list(range(2, WIDE_SCALARS + 1))  # none is 1 (that is a constexpr)
    return jtr.triton_call(*inputs, *scalars, kernel=wide_kernel, out_shape=x, grid=_grid,
                           BLOCK=BLOCK, xla_native=xla_native)


def tuned_small(x, y, xla_native=False):
    return jtr.triton_call(x, y, x.size, kernel=tuned_add_kernel, out_shape=x, grid=_grid,
                           xla_native=xla_native)


def tuned_big(x, y, xla_native=False):
    return jtr.triton_call(x, y, x.size, kernel=tuned_big_kernel, out_shape=x, grid=_grid,
                           UNROLL=UNROLL, xla_native=xla_native)


OPS = {"small": small, "big": big, "wide": wide, "tuned_small": tuned_small,
       "tuned_big": tuned_big}


BASELINE = "XLA add, unfused"
NATIVE_TARGET = "__gpu$xla.gpu.triton"


@dataclasses.dataclass(frozen=True)
class Row:
    """One measured chain: the kernel call (`OPS`) and what it carries."""

    op: str
    variant: str  # "default", "ttir", "ptx_only", "ptx_text", "native", "ffi", "xla"
    label: str

    @property
    def key(self) -> str:
        return f"{self.op}/{self.variant}"


ROWS = (
    Row("xla", "xla", BASELINE),
    Row("small", "default", "small (4 params): FFI, CUBIN (default)"),
    Row("small", "ttir", "small: FFI, CUBIN + TTIR"),
    Row("small", "ptx_only", "small: FFI, PTX only"),
    Row("small", "native", "small: XLA Triton call"),
    Row("big", "default", "big (~20x binary): FFI, CUBIN (default)"),
    Row("big", "ttir", "big: FFI, CUBIN + TTIR"),
    Row("big", "ptx_only", "big: FFI, PTX only"),
    Row("big", "native", "big: XLA Triton call"),
    Row("wide", "default", "30 params: FFI, CUBIN (default)"),
    Row("wide", "ttir", "30 params: FFI, CUBIN + TTIR"),
    Row("wide", "native", "30 params: XLA Triton call"),
    Row("tuned_small", "default", "autotuned small (2 configs): default target"),
    Row("tuned_small", "ffi", "autotuned small: FFI target (forced)"),
    Row("tuned_big", "default", "autotuned big (2 configs): default target"),
    Row("tuned_big", "ffi", "autotuned big: FFI target (forced)"),
    Row("small", "ptx_text", "small: FFI, CUBIN with its PTX text kept"),
    Row("big", "ptx_text", "big: FFI, CUBIN with its PTX text kept"),
)
BASELINE_KEY = ROWS[0].key

# (what, row key, row key it is divided by): the ratios the route rule weighs.
COMPARISONS = (
    ("binary 20x larger: big / small", "big/default", "small/default"),
    ("ttir empty / filled, small", "small/default", "small/ttir"),
    ("ttir empty / filled, big", "big/default", "big/ttir"),
    ("ttir empty / filled, 30 params", "wide/default", "wide/ttir"),
    ("PTX only / CUBIN, small", "small/ptx_only", "small/default"),
    ("PTX only / CUBIN, big", "big/ptx_only", "big/default"),
    ("PTX text left out / kept, small", "small/default", "small/ptx_text"),
    ("PTX text left out / kept, big", "big/default", "big/ptx_text"),
    ("30 params / 4 params", "wide/default", "small/default"),
    ("autotuned / single, small", "tuned_small/default", "small/default"),
    ("autotuned / single, big", "tuned_big/default", "big/default"),
    ("autotuned default / FFI target, small", "tuned_small/default", "tuned_small/ffi"),
    ("autotuned default / FFI target, big", "tuned_big/default", "tuned_big/ffi"),
    ("FFI / XLA Triton call, small", "small/default", "small/native"),
    ("FFI / XLA Triton call, big", "big/default", "big/native"),
    ("FFI / XLA Triton call, 30 params", "wide/default", "wide/native"),
)


@contextlib.contextmanager
def with_ttir():
    """Lowerings fill `TritonKernel.ttir` (the package's default leaves it empty: jaxlib reads
    it for nothing)."""
    original = _proto.kernel_image

    def image_with_ttir(*args, **kwargs):
        return original(*args, **{**kwargs, "with_ttir": True})

    _proto.kernel_image = image_with_ttir
    forget_lowerings()  # their keys do not see the patch
    try:
        yield
    finally:
        _proto.kernel_image = original
        forget_lowerings()


def forget_lowerings() -> None:
    """Empties the package's memos of lowered calls, plans and kernel images, and JAX's caches."""
    _state.LOWERED_CALLS.clear()
    _state.PLANS.clear()
    _state.KERNEL_IMAGES.clear()
    jax.clear_caches()


@contextlib.contextmanager
def environment(name: str, value: str):
    saved = os.environ.get(name)
    os.environ[name] = value
    jax.clear_caches()
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved
        jax.clear_caches()


def variant_context(variant: str, platform_name: str):
    """What the variant changes while its chain is built and run."""
    if variant == "ttir":
        return with_ttir()
    if variant == "ptx_only":
        return forced_features(platform_name, module_image=False)
    if variant == "ffi":
        return environment(_env.ENV_AUTOTUNE_TARGET, "ffi")
    if variant == "ptx_text":
        return environment(_env.ENV_KEEP_PTX_TEXT, "1")
    return contextlib.nullcontext()


def row_op(row: Row) -> Callable:
    if row.variant == "xla":
        return xla_add_unfused
    return functools.partial(OPS[row.op], xla_native=row.variant == "native")


def expected_target(row: Row) -> str:
    """The custom call the row's chain must emit."""
    if row.variant == "native":
        return NATIVE_TARGET
    if row.op.startswith("tuned") and row.variant != "ffi":
        return _compat.autotuned_call_name()
    return _compat.FFI_CALL_NAME


def lowered_chain(row: Row, platform_name: str, length: int):
    """The row's chain, lowered for `platform_name` (inside the row's variant context)."""
    x = jax.ShapeDtypeStruct((SIZE,), jnp.float32)
    return jax.jit(chain(row_op(row), length)).trace(x, x).lower(
        lowering_platforms=(platform_name,))


def check_route(row: Row, text: str) -> str | None:
    """Why the lowered text does not take the row's route, or None."""
    if row.variant == "xla":
        return None
    target = expected_target(row)
    if not re.search(rf'@"?{re.escape(target)}"?\(', text):
        return f"expected custom call {target}; the 'jax_triton_rocm' logger says why at DEBUG"
    return None


def plugin_features(platform_name: str):
    """What the plugin for `platform_name` loads (assumed from jaxlib's release without one)."""
    return (_vendors.plugin_features(platform_name)
            or _vendors.assumed_features(platform_name))
