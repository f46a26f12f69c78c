"""The vendors: their table and plugins (`_vendors`), why JAX has no GPU here (`_no_gpu`), what
the lowering asks a vendor (`_backend`), one module per vendor (`_cuda`, `hip/`), and `backend`."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _state

if TYPE_CHECKING:
    from jax_triton_rocm.backends._backend import Backend


@functools.cache
def backend(platform: str) -> Backend:
    """The backend of a GPU platform. Its module imports Triton's compiler backend, so it is
    imported at first use, under the lock that keeps a fork from splitting the imports a lowering
    needs (`_state.IMPORTS`). Raises ValueError for another platform, ImportError where Triton
    or its backend for the platform is missing or broken."""
    _vendors.vendor(platform)
    with _state.IMPORTS.lowering():
        if platform == "cuda":
            from jax_triton_rocm.backends import _cuda as module
        else:
            from jax_triton_rocm.backends.hip import _hip as module
    return module.BACKEND
