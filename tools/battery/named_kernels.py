"""Kernels whose constexpr shares its name with an argument of `triton_call` itself."""

import triton
import triton.language as tl


@triton.jit
def name_kernel(x_ptr, out_ptr, name: tl.constexpr):
    offsets = tl.program_id(0) * 256 + tl.arange(0, 256)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * name)


@triton.jit
def grid_kernel(x_ptr, out_ptr, grid: tl.constexpr):
    offsets = tl.program_id(0) * 256 + tl.arange(0, 256)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * grid)


@triton.jit
def debug_kernel(x_ptr, out_ptr, debug: tl.constexpr):
    offsets = tl.program_id(0) * 256 + tl.arange(0, 256)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * debug)


@triton.jit
def kernel_kernel(x_ptr, out_ptr, kernel: tl.constexpr):
    offsets = tl.program_id(0) * 256 + tl.arange(0, 256)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * kernel)


BY_NAME = {"name": name_kernel, "grid": grid_kernel, "debug": debug_kernel,
           "kernel": kernel_kernel}
