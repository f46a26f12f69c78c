"""The demo's kernels, written once: `python -m jax_triton_rocm` runs the add and the softmax,
`info` lowers the add on each route (with its length a constexpr, and passed at launch).

Made at first use, not at import: the command line imports this module before it knows whether
Triton imports (`info` reports a Triton that does not).
"""

from __future__ import annotations

import functools
from typing import Any


@functools.cache
def kernels() -> dict[str, Any]:
    """{"add", "sized_add", "softmax"}: `@triton.jit` kernels, made once per process."""
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)

    @triton.jit
    def sized_add_kernel(x_ptr, y_ptr, n: tl.constexpr, out_ptr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)

    @triton.jit
    def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)

    return {"add": add_kernel, "sized_add": sized_add_kernel, "softmax": softmax_kernel}
