"""Gluon kernels shared by the Gluon tests (CPU lowering and GPU runs alike).

Written once for every vendor: the warp size and the number of warps are constexpr parameters
(`WARP_SIZE`, `NUM_WARPS`), so the same kernel builds 64-wide layouts for CDNA and 32-wide ones
for NVIDIA. The wrappers pass `NUM_WARPS` as `num_warps=` too, so the layout matches the launch.
"""

import jax
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

import jax_triton_rocm as jtr


@gluon.constexpr_function
def vector_layout(block, warp_size, num_warps):
    """A 1-D layout spreading `block` elements over `num_warps` warps of `warp_size` threads."""
    return gl.BlockedLayout(size_per_thread=[block // (warp_size * num_warps)],
                            threads_per_warp=[warp_size], warps_per_cta=[num_warps], order=[0])


@gluon.constexpr_function
def tile_layout(warp_size, num_warps):
    """A 2-D row-major layout: 16 threads along a row, 4 elements each, warps stacked by rows."""
    return gl.BlockedLayout(size_per_thread=[1, 4], threads_per_warp=[warp_size // 16, 16],
                            warps_per_cta=[num_warps, 1], order=[1, 0])


@gluon.jit
def copy_kernel(x_ptr, n, out_ptr, BLOCK: gl.constexpr, WARP_SIZE: gl.constexpr,
                NUM_WARPS: gl.constexpr):
    layout: gl.constexpr = vector_layout(BLOCK, WARP_SIZE, NUM_WARPS)
    offsets = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offsets < n
    gl.store(out_ptr + offsets, gl.load(x_ptr + offsets, mask=mask), mask=mask)


@gluon.jit
def axpy_kernel(x_ptr, y_ptr, alpha, n, out_ptr, BLOCK: gl.constexpr,
                WARP_SIZE: gl.constexpr, NUM_WARPS: gl.constexpr):
    """out = alpha * x + y (alpha a float scalar)."""
    layout: gl.constexpr = vector_layout(BLOCK, WARP_SIZE, NUM_WARPS)
    offsets = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offsets < n
    x = gl.load(x_ptr + offsets, mask=mask)
    y = gl.load(y_ptr + offsets, mask=mask)
    gl.store(out_ptr + offsets, alpha * x + y, mask=mask)


@gluon.jit
def row_sum_kernel(x_ptr, n_rows, n_cols, out_ptr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                   WARP_SIZE: gl.constexpr, NUM_WARPS: gl.constexpr):
    """out[r] = sum(x[r, :]) for BLOCK_M rows per program; one column tile (n_cols <= BLOCK_N)."""
    layout: gl.constexpr = tile_layout(WARP_SIZE, NUM_WARPS)
    rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = gl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask, other=0.0)
    gl.store(out_ptr + rows, gl.sum(x, axis=1), mask=rows < n_rows)


@gluon.jit
def transpose_kernel(x_ptr, n_rows, n_cols, out_ptr, BLOCK_M: gl.constexpr,
                     BLOCK_N: gl.constexpr, WARP_SIZE: gl.constexpr, NUM_WARPS: gl.constexpr):
    """out[c, r] = x[r, c], one BLOCK_M x BLOCK_N tile per program on a 2-D grid."""
    layout: gl.constexpr = tile_layout(WARP_SIZE, NUM_WARPS)
    rows = gl.program_id(0) * BLOCK_M + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, layout))
    cols = gl.program_id(1) * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, layout))
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    tile = gl.load(x_ptr + rows[:, None] * n_cols + cols[None, :], mask=mask)
    gl.store(out_ptr + cols[None, :] * n_rows + rows[:, None], tile, mask=mask)


def copy(x, *, warp_size, num_warps=4, block=1024):
    return jtr.triton_call(
        x, x.size, kernel=copy_kernel, out_shape=x, grid=(triton.cdiv(x.size, block),),
        num_warps=num_warps, BLOCK=block, WARP_SIZE=warp_size, NUM_WARPS=num_warps)


def axpy(alpha, x, y, *, warp_size, num_warps=4, block=1024):
    return jtr.triton_call(
        x, y, alpha, x.size, kernel=axpy_kernel, out_shape=x,
        grid=(triton.cdiv(x.size, block),), num_warps=num_warps,
        BLOCK=block, WARP_SIZE=warp_size, NUM_WARPS=num_warps)


def row_sum(x, *, warp_size, num_warps=4, block_m=16):
    rows, cols = x.shape
    return jtr.triton_call(
        x, rows, cols, kernel=row_sum_kernel, out_shape=jax.ShapeDtypeStruct((rows,), x.dtype),
        grid=(triton.cdiv(rows, block_m),), num_warps=num_warps,
        BLOCK_M=block_m, BLOCK_N=triton.next_power_of_2(cols), WARP_SIZE=warp_size,
        NUM_WARPS=num_warps)


def transpose(x, *, warp_size, num_warps=4, block_m=32, block_n=64):
    rows, cols = x.shape
    return jtr.triton_call(
        x, rows, cols, kernel=transpose_kernel,
        out_shape=jax.ShapeDtypeStruct((cols, rows), x.dtype),
        grid=(triton.cdiv(rows, block_m), triton.cdiv(cols, block_n)), num_warps=num_warps,
        BLOCK_M=block_m, BLOCK_N=block_n, WARP_SIZE=warp_size, NUM_WARPS=num_warps)
