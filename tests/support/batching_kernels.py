"""Kernels that batch themselves under `jax.vmap` (`batch_grid_axis`), shared by the CPU and GPU
batching tests."""

import jax
import triton
import triton.language as tl

import jax_triton_rocm as jtr


@triton.jit
def batched_add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    """out = x + y over n elements per example; example tl.program_id(1) starts at example * n."""
    base = tl.program_id(1) * n
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + base + offsets, mask=mask)
    y = tl.load(y_ptr + base + offsets, mask=mask)
    tl.store(out_ptr + base + offsets, x + y, mask=mask)


def batched_add(x, y, block=128, grid=None, **kwargs):
    return jtr.triton_call(
        x, y, x.size, kernel=batched_add_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=grid or (triton.cdiv(x.size, block),), BLOCK=block, batch_grid_axis=1, **kwargs)


@triton.jit
def batched_add_inplace_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    """out += y, where out aliases x; example tl.program_id(1) starts at example * n."""
    base = tl.program_id(1) * n
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(out_ptr + base + offsets, mask=mask)
    tl.store(out_ptr + base + offsets, x + tl.load(y_ptr + base + offsets, mask=mask), mask=mask)


def batched_add_inplace(x, y, block=128):
    return jtr.triton_call(
        x, y, x.size, kernel=batched_add_inplace_kernel, out_shape=x,
        grid=(triton.cdiv(x.size, block),), BLOCK=block, batch_grid_axis=1,
        input_output_aliases={0: 0})
