"""jax_triton_rocm: call Triton and Gluon GPU kernels from JAX, on AMD ROCm and NVIDIA CUDA.

    import jax_triton_rocm as jtr
    out = jtr.triton_call(x, y, kernel=add_kernel, out_shape=x, grid=(n // 256,), BLOCK=256)

Importing the package does not import Triton. Only the names in `__all__` are public, and
`compat` (jax-triton's API); the layers are in [How it works](design.md#layout).
"""

import sys as _sys

if _sys.argv[:1] == ["-m"]:  # Python may be starting `python -m jax_triton_rocm`
    # Its command line reports a JAX that does not import as a message, not a traceback; the
    # imports below import JAX.
    from jax_triton_rocm.cli import _startup

    _startup.exit_unless_jax_imports()

from jax_triton_rocm._plugin import initialize
from jax_triton_rocm._version import __version__
from jax_triton_rocm.api._call import triton_call
from jax_triton_rocm.api._inspect import (CUSTOM_CALL_TARGET_NAME, EmittedCall, disabled_checks,
                                          kernel_calls)
from jax_triton_rocm.api._library import triton_call_lowering
from jax_triton_rocm.api._partition import partitioned
from jax_triton_rocm.api._target_arch import target_arch
from jax_triton_rocm.api._tuning import autotune
from jax_triton_rocm.base._state import clear_caches
from jax_triton_rocm.routes._primitive import (loop_batching_rule, register, registered_platforms,
                                               triton_kernel_p)
from jax_triton_rocm.kernel._tensordesc import TensorDescriptor, strides_from_shape

__all__ = [
    "CUSTOM_CALL_TARGET_NAME",
    "EmittedCall",
    "TensorDescriptor",
    "__version__",
    "autotune",
    "clear_caches",
    "disabled_checks",
    "initialize",
    "kernel_calls",
    "loop_batching_rule",
    "partitioned",
    "register",
    "registered_platforms",
    "strides_from_shape",
    "target_arch",
    "triton_call",
    "triton_call_lowering",
    "triton_kernel_p",
]
