"""The demo's run on a machine without a GPU: its kernels in Triton's interpreter, on the CPU.

`python -m jax_triton_rocm` calls `run_on_cpu(add, softmax)` with its own two functions (each a
`triton_call`) where there is no GPU, beside or instead of cross-compiling.
"""

from __future__ import annotations

import time
from collections.abc import Callable


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
