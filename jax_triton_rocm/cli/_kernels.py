"""The demo's kernels, run by `python -m jax_triton_rocm` and lowered by its `info`; made at first
use, as Triton may not import.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any


@functools.cache
def kernels() -> dict[str, Any]:
    """{"add", "softmax"}: `@triton.jit` kernels, made once per process."""
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
    def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)

    return {"add": add_kernel, "softmax": softmax_kernel}


def add(sized: bool = False, **options: Any) -> Callable:
    """`add(x, y)`: the add kernel called on two vectors, with `triton_call` keywords
    `options`; its length `n` a constexpr where `sized`, else passed at launch."""
    import triton

    from jax_triton_rocm.api._call import triton_call

    length = "constexprs" if sized else "operands"
    return lambda x, y: triton_call(x, y, kernel=kernels()["add"], out_shape=x,
                                    grid=(triton.cdiv(x.size, 1024),), BLOCK=1024,
                                    **{length: {"n": x.size}}, **options)


def softmax(x: Any) -> Any:
    """The row-wise softmax of the matrix `x`, by the softmax kernel."""
    import jax
    import triton

    from jax_triton_rocm.api._call import triton_call

    rows, cols = x.shape
    return triton_call(x, kernel=kernels()["softmax"],
                       out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(rows,), n_cols=cols,
                       BLOCK=triton.next_power_of_2(cols))


def run_checked(platform: str) -> int:
    """Runs `add()` and `softmax` under `jax.jit` on `platform`'s first device (smaller on the
    CPU's interpreter); returns 0 when both match jax.numpy, else raises AssertionError."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    device = jax.devices(platform)[0]
    on_cpu = platform == "cpu"
    print("Triton's interpreter runs the kernels on the CPU:" if on_cpu else
          f"Running on {device.device_kind} ({platform}, {device.compute_capability}).")
    power, rows = (16, 64) if on_cpu else (20, 512)

    def normal(seed, shape):
        return jax.device_put(jax.random.normal(jax.random.key(seed), shape, jnp.float32), device)

    x, y = normal(0, (1 << power,)), normal(1, (1 << power,))
    start = time.perf_counter()
    out = jax.jit(add())(x, y).block_until_ready()
    seconds = time.perf_counter() - start
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    print(f"  vector add of 2^{power} floats: matches jnp ("
          + (f"{seconds:.3f} s in the interpreter)" if on_cpu else
             f"first call, with compile: {seconds:.3f} s)"))
    m = normal(2, (rows, 1000))
    np.testing.assert_allclose(jax.jit(softmax)(m), jax.nn.softmax(m, axis=-1), rtol=1e-5,
                               atol=1e-6)
    print(f"  fused softmax {rows}x1000: matches jax.nn.softmax")
    return 0
