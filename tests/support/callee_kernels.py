"""Kernels that call `@triton.jit` helpers, and other helpers to rebind in their place
(`tests/cpu/test_callee_changes.py`): the notebook workflow of redefining a helper, then lowering
the kernel again."""

import triton
import triton.language as tl

from tests.support import callee_helpers

OFFSET = tl.constexpr(3000)


@triton.jit
def helper(x):
    return x + 1000


@triton.jit
def other_helper(x):
    return x + 2000


@triton.jit
def global_helper(x):
    return x + OFFSET


@triton.jit
def program_offset(i):
    return i * 7


# The same function as `program_offset` (its source and first line), decorated otherwise.
program_offset_noinline = triton.jit(noinline=True)(program_offset.fn)


@triton.jit
def calls_helper_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, helper(tl.load(x_ptr + offsets)))


@triton.jit
def calls_scalar_helper_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + program_offset(tl.program_id(0)))


@triton.jit
def calls_through_module_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, callee_helpers.middle(tl.load(x_ptr + offsets)))


@triton.jit
def trampoline_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    calls_helper_kernel(x_ptr, out_ptr, BLOCK)
