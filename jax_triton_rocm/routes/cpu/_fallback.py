"""The one warning that kernels run in Triton's interpreter while a GPU could run them.

Where a jaxlib GPU plugin is installed, the first kernel lowered for the CPU logs one warning
(the package's logger, as JAX itself logs its fall-back to the CPU) saying why the computation is
on the CPU and how to put it on the GPU: a GPU user with `JAX_PLATFORMS=cpu` set somewhere, or
operands left on the CPU device, would otherwise see only slow runs. Without a GPU plugin the CPU
is the only choice, and nothing is logged.
"""

from __future__ import annotations

import logging

from jax_triton_rocm.backends import _no_gpu, _vendors
from jax_triton_rocm.base import _state

logger = logging.getLogger("jax_triton_rocm")
_explained = False  # one warning per process (a forked child inherits the flag)


def mark_explained() -> None:
    """Marks the CPU fall-back as explained (the demo prints why itself): no warning follows."""
    global _explained
    _explained = True


def explain_once(kernel_name: str) -> None:
    """Logs, once per process, why kernel `kernel_name` runs on the CPU where a GPU plugin is
    installed; nothing where none is."""
    global _explained
    with _state.LOCKS.lock_for("cpu-fallback-warning"):
        if _explained:
            return
        _explained = True
    if not _vendors.installed_gpu_platforms():
        return
    from jax._src import xla_bridge

    if any(p in xla_bridge.backends() for p in _vendors.GPU_PLATFORMS):
        why = ("A GPU is present, but this computation is placed on the CPU (operands on a CPU "
               "device, or jit(..., backend='cpu')): put its operands on the GPU "
               "(jax.device_put(x, jax.devices('gpu')[0])) to run the kernel there.")
    else:
        why = "JAX has no GPU device: " + _no_gpu.no_gpu_reason()
    logger.warning("jax_triton_rocm: kernel %s runs in Triton's interpreter on the CPU (slow: "
                   "NumPy, one program at a time). %s This warning is logged once per process.",
                   kernel_name, why)
