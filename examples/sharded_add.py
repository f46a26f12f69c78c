"""One Triton kernel on arrays split across devices, with no gathering.

    python examples/sharded_add.py

`jtr.partitioned("b n, b n -> b n")` says how the kernel's call may be split: both operands and
the output share their dimensions, so each device adds its own rows. Under `jax.jit` with the
operands split by rows, every device runs the kernel on its rows (the grid computed from the
shard's size), the result stays split the same way, and the compiled program holds no
all-gather. The script runs it on a mesh of 4 CPU devices (the kernel in Triton's interpreter)
and, where there are GPUs, on a mesh of all of them.
"""

from __future__ import annotations

import os

if __name__ == "__main__":  # four CPU devices: JAX reads the flag when it starts
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "")
                               + " --xla_force_host_platform_device_count=4").strip()

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl
from jax.sharding import Mesh, NamedSharding, PartitionSpec

import jax_triton_rocm as jtr

BLOCK = 1024


@triton.jit
def add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@jtr.partitioned("b n, b n -> b n")
def add(x: jax.Array, y: jax.Array) -> jax.Array:
    """x + y: on each device, on that device's rows (x.size is the shard's)."""
    return jtr.triton_call(x, y, x.size, kernel=add_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, BLOCK),), BLOCK=BLOCK)


def run(devices: list) -> str:
    """Runs the split add on a mesh of `devices`, checks it, and says what it saw."""
    mesh = Mesh(np.array(devices), ("rows",))
    by_rows = NamedSharding(mesh, PartitionSpec("rows", None))
    shape = (64 * len(devices), 512)
    x = jax.device_put(jnp.arange(np.prod(shape), dtype=jnp.float32).reshape(shape), by_rows)
    y = jax.device_put(jnp.ones(shape, jnp.float32), by_rows)
    step = jax.jit(lambda x, y: add(2 * x, y))  # an operand computed in the same program
    out = step(x, y)
    np.testing.assert_array_equal(out, 2 * np.asarray(x) + 1)
    assert out.sharding.is_equivalent_to(by_rows, out.ndim), out.sharding
    assert "all-gather" not in step.lower(x, y).compile().as_text()
    shard = out.addressable_shards[0].data.shape
    return (f"{len(devices)} {devices[0].platform} devices: the result is split by rows, "
            f"{shard} on each device, no all-gather, values match")


def main() -> None:
    print(run(jax.devices("cpu")[:4]))
    gpus = [d for d in jax.devices() if d.platform in ("cuda", "rocm")]
    print(run(gpus) if gpus else "no GPU here: the GPU mesh is skipped")


if __name__ == "__main__":
    main()
