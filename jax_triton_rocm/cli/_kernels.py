"""The demo's kernels, written once: `python -m jax_triton_rocm` runs the add and the softmax
(on a machine without a GPU, in Triton's interpreter on the CPU: `run_on_cpu`), `info` lowers the
add on each route (with its length a constexpr, and passed at launch).

Made at first use, not at import: the command line imports this module before it knows whether
Triton imports (`info` reports a Triton that does not).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
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


def run_on_cpu(add: Callable, softmax: Callable) -> int:
    """Runs `add(x, y)` and `softmax(m)` under `jax.jit` on the CPU device and checks them.

    The kernels run in Triton's interpreter (the lowering for platform `cpu`), so the sizes are
    smaller than on the GPU. Returns 0 when both match jax.numpy; raises AssertionError if not.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np

    cpu = jax.devices("cpu")[0]
    print("Triton's interpreter runs the kernels on the CPU:")
    x = jax.device_put(jax.random.normal(jax.random.key(0), (1 << 16,), jnp.float32), cpu)
    y = jax.device_put(jax.random.normal(jax.random.key(1), (1 << 16,), jnp.float32), cpu)
    start = time.perf_counter()
    out = jax.jit(add)(x, y).block_until_ready()
    seconds = time.perf_counter() - start
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    print(f"  vector add of 2^16 floats: matches jnp ({seconds:.3f} s in the interpreter)")
    m = jax.device_put(jax.random.normal(jax.random.key(2), (64, 1000), jnp.float32), cpu)
    np.testing.assert_allclose(jax.jit(softmax)(m), jax.nn.softmax(m, axis=-1), rtol=1e-5,
                               atol=1e-6)
    print("  fused softmax 64x1000: matches jax.nn.softmax")
    return 0
