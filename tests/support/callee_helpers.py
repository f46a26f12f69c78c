"""Helpers that `tests/support/callee_kernels.py` reaches through a module attribute, one calling
the next (`middle` calls `leaf`)."""

import triton
import triton.language as tl

# Triton's interpreter needs `tl` among the module's names; exported, so that it counts as used.
__all__ = ["leaf", "middle", "other_leaf", "tl"]


@triton.jit
def leaf(x):
    return x + 100


@triton.jit
def other_leaf(x):
    return x + 200


@triton.jit
def middle(x):
    return leaf(x)
