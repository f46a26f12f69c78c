"""Kernels that compute on bfloat16 and fp8 values, the inputs that exercise their rounding,
and one way to run them on a device: shared by the CPU tests (against ml_dtypes) and the GPU
tests (against Triton's interpreter, bit for bit)."""

from __future__ import annotations

import numpy as np

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr

N = 256


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.load(x_ptr + o) + tl.load(y_ptr + o))


@triton.jit
def mul_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.load(x_ptr + o) * tl.load(y_ptr + o))


@triton.jit
def maximum_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.maximum(tl.load(x_ptr + o), tl.load(y_ptr + o)))


@triton.jit
def less_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, (tl.load(x_ptr + o) < tl.load(y_ptr + o)).to(tl.int8))


@triton.jit
def negate_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, -tl.load(x_ptr + o))


@triton.jit
def sum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.sum(tl.load(x_ptr + tl.arange(0, BLOCK))))


@triton.jit
def max_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.max(tl.load(x_ptr + tl.arange(0, BLOCK))))


@triton.jit
def cumsum_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.cumsum(tl.load(x_ptr + o)))


@triton.jit
def store_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Stores each value into the output's dtype: the store converts it."""
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.load(x_ptr + o))


@triton.jit
def toward_zero_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(out_ptr + o, x.to(out_ptr.dtype.element_ty, fp_downcast_rounding="rtz"))


@triton.jit
def add_through_float32_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    total = tl.load(x_ptr + o).to(tl.float32) + tl.load(y_ptr + o).to(tl.float32)
    tl.store(out_ptr + o, total.to(out_ptr.dtype.element_ty))


@triton.jit
def select_abs_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(out_ptr + o, tl.where(o % 2 == 0, tl.abs(x), x))


@triton.jit
def atomic_add_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Every program adds the same BLOCK values into the output."""
    o = tl.arange(0, BLOCK)
    tl.atomic_add(out_ptr + o, tl.load(x_ptr + o))


@triton.jit
def dot_kernel(a_ptr, b_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr):
    m, n, k = tl.arange(0, M), tl.arange(0, N), tl.arange(0, K)
    a = tl.load(a_ptr + m[:, None] * K + k[None, :])
    b = tl.load(b_ptr + k[:, None] * N + n[None, :])
    tl.store(out_ptr + m[:, None] * N + n[None, :], tl.dot(a, b))


def call(kernel, *args, out_dtype, out_size=N, grid=(1,), **constexprs):
    """`triton_call` of `kernel` with a zeroed 1-D output of `out_size` elements of
    `out_dtype`; BLOCK is the first argument's size unless `constexprs` are given."""
    return jtr.triton_call(
        *args, kernel=kernel, out_shape=jax.ShapeDtypeStruct((out_size,), out_dtype),
        grid=grid, zeroed_outputs=(0,), **(constexprs or {"BLOCK": args[0].size}))


def run(kernel, *args, device, **options) -> np.ndarray:
    """`call` run on `device` (the CPU's: Triton's interpreter) under `jax.jit`, as a NumPy
    array."""
    args = [jax.device_put(np.asarray(a), device) for a in args]
    with jax.default_device(device):  # where a kernel takes no input
        out = jax.jit(lambda *xs: call(kernel, *xs, **options))(*args)
    return np.asarray(out)


def bits(values) -> np.ndarray:
    """The raw bits of `values` (a 16- or 8-bit float array), to compare bit for bit."""
    values = np.asarray(values)
    return values.view(f"uint{values.dtype.itemsize * 8}")


def normal_values(seed: int, dtype, size: int = N, scale: float = 3.0) -> np.ndarray:
    """Normal values of both signs and many exponents, none subnormal (AMD GPUs flush
    those), rounded to `dtype` with ml_dtypes."""
    values = np.random.default_rng(seed).normal(0, scale, size).astype(np.float32)
    values = np.where(np.abs(values) < 2.0**-6, np.float32(0.5), values)
    return values.astype(jnp.dtype(dtype))


def unit_steps(seed: int, size: int = N) -> np.ndarray:
    """-1, 0 and 1 in bfloat16: every partial sum of up to 256 of them is a bfloat16 value, so
    any order of adding them gives the same bits."""
    return np.random.default_rng(seed).integers(-1, 2, size).astype(jnp.bfloat16)


def ties(dtype, size: int = N) -> np.ndarray:
    """float32 values halfway between two neighbours of `dtype` (both signs), and values
    just off the midpoints: round to nearest even sends each tie to the even neighbour."""
    finfo = jnp.finfo(dtype)
    mantissa_bits = int(finfo.nmant)
    steps = np.arange(size // 4, dtype=np.float32)
    ulp = np.float32(2.0 ** -mantissa_bits)
    midpoints = 1 + (steps % (2 ** mantissa_bits)) * ulp + ulp / 2
    nudge = np.float32(2.0 ** -20)
    values = np.concatenate([midpoints, -midpoints, midpoints + nudge, -(midpoints - nudge)])
    return values.astype(np.float32)


@triton.jit
def argmax_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.store(out_ptr, tl.argmax(tl.load(x_ptr + tl.arange(0, BLOCK)), 0))


@triton.jit
def fma_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x, y = tl.load(x_ptr + o), tl.load(y_ptr + o)
    tl.store(out_ptr + o, tl.fma(x, y, x))


@triton.jit
def clamp_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    """Clamps x to [-|y|, |y|], NaN kept (the interpreter's three-operand clamp)."""
    o = tl.arange(0, BLOCK)
    x, y = tl.load(x_ptr + o), tl.abs(tl.load(y_ptr + o))
    tl.store(out_ptr + o, tl.clamp(x, -y, y, propagate_nan=tl.PropagateNan.ALL))


@triton.jit
def print_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.device_print("x", x)
    tl.store(out_ptr + o, x)
