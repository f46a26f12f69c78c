"""Loops in Triton's interpreter, the CPU route, step as in a compiled kernel: a `range` or
`tl.range` loop's variable is a scalar tensor of the type its bounds promote to (int32 for
constants and int32 arguments, int64 where a bound is int64), not a Python int; a
`tl.static_range` loop's stays a Python int, as compiled it is a constexpr."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support import kernels

CPU = jax.devices("cpu")[0]


def _on_cpu(values, dtype=jnp.float32):
    return jax.device_put(jnp.asarray(values, dtype), CPU)


@triton.jit
def _chunks_kernel(x_ptr, NT, out_ptr, BLOCK: tl.constexpr):
    # As rwkv-ops' chunk kernels: the chunk's index widened before it scales an offset.
    for i_t in range(NT):
        offsets = i_t.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * (i_t + 1))


def test_a_range_loop_variable_converts_as_in_a_compiled_kernel():
    x = _on_cpu(np.arange(32))
    out = jtr.triton_call(x, 4, kernel=_chunks_kernel, out_shape=x, grid=(1,), BLOCK=8)
    np.testing.assert_array_equal(out, np.arange(32) * (np.arange(32) // 8 + 1))


@triton.jit
def _scaled_steps_kernel(start, out_ptr, STRIDE: tl.constexpr):
    for i in range(start, start + 4):
        step = i - start  # masked: a variable of the wrong type would point anywhere
        tl.store(out_ptr + step, (i * STRIDE // STRIDE).to(tl.int32), mask=(step >= 0) & (step < 4))


@pytest.mark.parametrize("start,steps", [
    (3, np.arange(3, 7, dtype=np.int32)),  # an int32 argument: the product wraps at 2**31
    (2**33, np.arange(2**33, 2**33 + 4, dtype=np.int64)),  # an int64 one: it does not
], ids=["int32", "int64"])
def test_a_loop_variable_has_its_bounds_integer_type(start, steps):
    stride = steps.dtype.type(2**30)
    out = jtr.triton_call(start, kernel=_scaled_steps_kernel, grid=(1,), STRIDE=2**30,
                          out_shape=jax.ShapeDtypeStruct((4,), jnp.int32))
    np.testing.assert_array_equal(out, (steps * stride // stride).astype(np.int32))


@triton.jit
def _static_steps_kernel(x_ptr, out_ptr):
    for s in tl.static_range(1, 3):
        offsets = tl.arange(0, 4 * s)  # a block's size: a constexpr, as compiled
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + s)


def test_a_static_range_loop_variable_stays_a_python_int():
    x = _on_cpu(np.arange(8))
    out = jtr.triton_call(x, kernel=_static_steps_kernel, out_shape=x, grid=(1,))
    np.testing.assert_array_equal(out, np.arange(8) + 2)


@triton.jit
def _sum_of_row(row_ptr, n):
    total = tl.load(row_ptr) * 0
    for i in tl.range(0, n, num_stages=2):
        if i % 2 == 0:  # a tensor's truth, as compiled
            total += tl.load(row_ptr + i.to(tl.int64))
    return total


@triton.jit
def _even_sums_kernel(x_ptr, n, out_ptr):
    row = tl.program_id(0)
    tl.store(out_ptr + row, _sum_of_row(x_ptr + row * n, n))


def test_a_helpers_tl_range_loop_steps_as_the_kernels_do():
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    out = jtr.triton_call(_on_cpu(x), 8, kernel=_even_sums_kernel, grid=(3,),
                          out_shape=jax.ShapeDtypeStruct((3,), jnp.float32))
    np.testing.assert_array_equal(out, x[:, ::2].sum(axis=1))


def test_a_kernel_decorated_under_triton_interpret_steps_as_compiled(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the kernel and its helper: InterpretedFunctions
    kernel = kernels.kernel_from_source("""
@triton.jit
def offset_of(i_t, BLOCK: tl.constexpr):
    offset = i_t.to(tl.int64) * 0
    for j in range(0, i_t):
        offset += j.to(tl.int64) * 0 + BLOCK
    return offset


@triton.jit
def k(x_ptr, NT, out_ptr, BLOCK: tl.constexpr):
    for i_t in range(NT):
        offsets = offset_of(i_t, BLOCK) + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * (i_t + 1))
""")
    assert type(kernel).__name__ == "InterpretedFunction"
    x = _on_cpu(np.arange(32))
    out = jtr.triton_call(x, 4, kernel=kernel, out_shape=x, grid=(1,), BLOCK=8)
    np.testing.assert_array_equal(out, np.arange(32) * (np.arange(32) // 8 + 1))
