"""A Gluon vector add, written once, that runs on AMD CDNA (wave64) and NVIDIA (warp 32) GPUs.

Gluon kernels choose their layouts themselves, so the layout must fit the launch: its
threads_per_warp must multiply to the GPU's warp size and its warps_per_cta to `num_warps`.
Both come in as constexpr parameters (`WARP_SIZE`, `NUM_WARPS`), and the wrapper passes the
same `num_warps` to the launch.

    python examples/gluon_add.py

On a machine with a GPU it runs the kernel and checks it against `x + y`. Without one it
lowers the kernel for sm_90, gfx942 and gfx950 (cross-compiling with
`jax_triton_rocm.target_arch`) and prints what would be launched.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

import jax_triton_rocm as jtr

CROSS_TARGETS = (("cuda", "sm_90"), ("rocm", "gfx942"), ("rocm", "gfx950"))


@gluon.jit
def add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: gl.constexpr, WARP_SIZE: gl.constexpr,
               NUM_WARPS: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout(size_per_thread=[BLOCK // (WARP_SIZE * NUM_WARPS)],
                                            threads_per_warp=[WARP_SIZE],
                                            warps_per_cta=[NUM_WARPS], order=[0])
    offsets = gl.program_id(0) * BLOCK + gl.arange(0, BLOCK, layout=layout)
    mask = offsets < n
    x = gl.load(x_ptr + offsets, mask=mask)
    y = gl.load(y_ptr + offsets, mask=mask)
    gl.store(out_ptr + offsets, x + y, mask=mask)


def warp_size(platform: str, arch: str) -> int:
    """64 on AMD CDNA/GCN (gfx9xx and older), 32 on AMD RDNA (gfx10+) and NVIDIA."""
    if platform == "rocm" and int(arch.removeprefix("gfx")[:-2]) < 10:
        return 64
    return 32


def gluon_add(x: jax.Array, y: jax.Array, *, warp_size: int, num_warps: int = 4,
              block: int = 1024) -> jax.Array:
    """x + y with the Gluon kernel; `warp_size` is the target GPU's."""
    return jtr.triton_call(
        x, y, x.size, kernel=add_kernel, out_shape=x, grid=(triton.cdiv(x.size, block),),
        num_warps=num_warps, BLOCK=block, WARP_SIZE=warp_size, NUM_WARPS=num_warps)


def describe_launch(platform: str, arch: str, n: int = 1 << 20) -> str:
    """Lowers `gluon_add` for `arch` without a GPU and says what jaxlib would launch.

    `jtr.kernel_calls` reads the Triton calls back from the lowered module; each call's
    `summary()` gives the launch as plain values (kernel, grid, warps, parameters, binary).
    """
    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    width = warp_size(platform, arch)
    with jtr.target_arch(**{platform: arch}):
        lowered = jax.jit(lambda x, y: gluon_add(x, y, warp_size=width)).trace(
            spec, spec).lower(lowering_platforms=(platform,))
    (call,) = jtr.kernel_calls(lowered)
    summary = call.summary()
    (launch,) = summary["launches"]
    kind = "HSACO" if platform == "rocm" else "CUBIN"
    size = launch["embedded_binary_bytes"]
    carried = f"{kind} of {size} bytes in the call" if size else f"binary at {launch['ptx_field']}"
    return (f"{arch:7s} {launch['kernel']}: grid={launch['grid']}, num_warps="
            f"{launch['num_warps']} x warp {width}, parameters {launch['parameters']}, "
            f"{carried} ({summary['target']})")


def run_on_device(device: jax.Device) -> None:
    """Runs the kernel on `device` and checks it against jnp."""
    arch = str(device.compute_capability)
    if device.platform == "rocm":
        arch = arch.split(":")[0]
    width = warp_size(device.platform, arch)
    x = jax.device_put(jax.random.normal(jax.random.key(0), (1_000_003,)), device)
    y = jax.device_put(jax.random.normal(jax.random.key(1), (1_000_003,)), device)
    out = jax.jit(lambda x, y: gluon_add(x, y, warp_size=width))(x, y)
    np.testing.assert_allclose(np.asarray(out), np.asarray(x + y), rtol=1e-6)
    print(f"{device} ({arch}, warp {width}): gluon_add matches x + y on {x.size} floats")


def main() -> None:
    gpus = [d for d in jax.devices() if d.platform in ("cuda", "rocm")]
    if gpus:
        run_on_device(gpus[0])
        return
    print("No GPU here: lowering for other targets instead.")
    for platform, arch in CROSS_TARGETS:
        print(describe_launch(platform, arch))


if __name__ == "__main__":
    main()
