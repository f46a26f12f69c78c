"""A kernel whose constexprs are given as NumPy scalars or as the Python scalars they equal,
through `triton_call`, `triton_call_lowering` and positionally (tests/cpu and tests/process)."""

import numpy as np
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support import library_kernels

N = 4096


@triton.jit
def affine_kernel(x_ptr, n, out_ptr, SCALE: tl.constexpr, FLIP: tl.constexpr,
                  BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    y = tl.load(x_ptr + offsets, mask=mask) * SCALE
    if FLIP:
        y = -y
    tl.store(out_ptr + offsets, y, mask=mask)


@triton.jit
def block_copy_kernel(x_ptr, BLOCK: tl.constexpr, out_ptr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


def positional_call(x, values):
    """The block size given positionally, to a tl.constexpr parameter."""
    return jtr.triton_call(x, values["BLOCK"], kernel=block_copy_kernel, out_shape=x,
                           grid=(triton.cdiv(N, int(values["BLOCK"])),))


NUMPY_VALUES = {"SCALE": np.float32(2.5), "FLIP": np.bool_(True), "BLOCK": np.int64(256)}
PYTHON_VALUES = {"SCALE": 2.5, "FLIP": True, "BLOCK": 256}


def affine_call(x, values):
    return jtr.triton_call(x, N, kernel=affine_kernel, out_shape=x,
                           grid=(triton.cdiv(N, int(values["BLOCK"])),), **values)


def _affine_lowering(ctx, x, *, values):
    values = dict(values)
    n = np.int32(N) if isinstance(values["BLOCK"], np.generic) else N
    return jtr.triton_call_lowering(ctx, affine_kernel, x,
                                    grid=(triton.cdiv(N, int(values["BLOCK"])),),
                                    constexprs={"n": n, **values})


affine_p = library_kernels.define("test_numpy_affine", lambda x, *, values: x, _affine_lowering,
                                  multiple_results=False)


def affine_primitive(x, values):
    return affine_p.bind(x, values=tuple(values.items()))
