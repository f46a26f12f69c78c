"""Helpers that `tests/support/callee_kernels.py` reaches through a module attribute, one calling the
next (`middle` calls `leaf`)."""

import triton
import triton.language as tl  # noqa: F401  (Triton's interpreter needs it in scope)


@triton.jit
def leaf(x):
    return x + 100


@triton.jit
def other_leaf(x):
    return x + 200


@triton.jit
def middle(x):
    return leaf(x)
