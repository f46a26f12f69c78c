"""The GPU the GPU tests run on: whichever JAX sees, NVIDIA or AMD."""

from __future__ import annotations

import functools

GPU_PLATFORMS = ("cuda", "rocm")


@functools.cache
def gpu_platform() -> str | None:
    """"cuda" or "rocm": the platform of the GPUs JAX sees; None without one."""
    import jax

    for platform in GPU_PLATFORMS:
        try:
            if jax.devices(platform):
                return platform
        except RuntimeError:
            continue
    return None


def gpu_devices() -> list:
    """The GPU devices JAX sees (all of one platform); empty without a GPU."""
    import jax

    platform = gpu_platform()
    return jax.devices(platform) if platform is not None else []


def on_gpu(x):
    """`x` put on the first GPU JAX sees."""
    import jax

    return jax.device_put(x, gpu_devices()[0])
