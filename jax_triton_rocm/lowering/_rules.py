"""The route a GPU call takes: XLA's own Triton custom call where asked for and the kernel fits
(`_xla_native`), else jaxlib's Triton custom call (`_lowering`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jax_triton_rocm.lowering import _jaxlib_call, _xla_native
from jax_triton_rocm.backends._backend import Backend


@dataclasses.dataclass(frozen=True)
class Lowering:
    """The lowering rule of `triton_kernel_p` for one platform, with that platform's backend."""

    backend: Backend

    def lower(self, ctx: Any, *operands: Any, **params: Any) -> list:
        """Lowers one equation to a custom call; returns its results."""
        if _xla_native.requested(params.get("xla_native")):
            results = _xla_native.lower(self.backend, ctx, operands, params)
            if results is not None:
                return results
        lowered = _jaxlib_call.lower_call(self.backend, ctx, params)
        self.backend.after_encode(lowered, ctx)
        return _jaxlib_call.emit(ctx, operands, lowered)
