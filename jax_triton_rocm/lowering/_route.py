"""The route a call takes on a GPU, and why: XLA's own Triton call or jaxlib's.

XLA's Triton call (`_xla_native`) launches the kernel as one of XLA's own kernels, at what
XLA's kernels cost; jaxlib's (`_jaxlib_call`) costs more per launch, and more the larger the
binary and the more its parameters (docs/BENCHMARKS.md). So the rule, per call:

1. Asked: `triton_call(..., xla_native=True)` takes XLA's call, and raises, naming `xla_native`
   and the reason, where the call cannot take it; `JAX_TRITON_ROCM_XLA_NATIVE=1` takes it for
   every call that does not say, wherever it fits. `xla_native=False`, else
   `JAX_TRITON_ROCM_XLA_NATIVE=0`, takes jaxlib's.
2. Otherwise (automatic), XLA's call wherever it fits and the platform takes it by default, and
   jaxlib's where it must be:
   - the call does not fit (`_xla_native.why_not`: Gluon, clusters, tuples, host-side
     descriptors, vendor options, ...; after planning: an autotuned call without a remembered
     choice);
   - the lowering is for `jax.export`: XLA's call carries Triton IR, which no jaxlib promises to
     read in another release; jaxlib's carries a binary in a versioned proto;
   - this jaxlib has no Triton dialect to read the IR with (`_compat.xla_triton_dialect`);
   - the platform's backend keeps jaxlib's call as its default (`Backend.xla_call_unproven`:
     ROCm, where XLA's call has not yet launched the package's kernels on a GPU).
A kernel XLA's call cannot take after all (IR this jaxlib's Triton cannot read, global scratch
memory) goes to jaxlib's, unless the call asked for XLA's. Each lowering logs its route and the
reason at DEBUG on the "jax_triton_rocm" logger (`note`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from jax_triton_rocm.base import _compat, _values
from jax_triton_rocm.launch._spec import KernelCallSpec
from jax_triton_rocm.lowering import _xla_native

logger = logging.getLogger("jax_triton_rocm")

ENV_XLA_NATIVE = _xla_native.ENV_XLA_NATIVE
# The routes as `note` names them (what a lowering emitted).
XLA, JAXLIB, JAXLIB_LEGACY, INTERPRETER = "xla", "jaxlib", "jaxlib legacy", "interpreter"


@dataclasses.dataclass(frozen=True)
class Route:
    """The route chosen for a call before its compile: XLA's Triton call (`xla`) or jaxlib's,
    and why."""

    xla: bool
    reason: str


def env_choice() -> bool | None:
    """`JAX_TRITON_ROCM_XLA_NATIVE`: True (1), False (0), or None (unset: the automatic rule).

    Raises:
      ValueError: a value that is neither on nor off, naming it.
    """
    return _values.env_flag(ENV_XLA_NATIVE, default=None)


def choose(spec: KernelCallSpec, backend: Any, *, exporting: bool) -> Route:
    """The route for `spec` lowered by `backend` (see the module docstring).

    Raises:
      ValueError: `JAX_TRITON_ROCM_XLA_NATIVE` is malformed, or the call asked for XLA's call
        (`xla_native=True`) and does not fit it.
    """
    asked = spec.xla_native
    by = "xla_native" if asked is not None else ENV_XLA_NATIVE
    if asked is None:
        asked = env_choice()
    if asked is False:
        return Route(False, f"{by}={'False' if by == 'xla_native' else '0'} asks for it")
    unfit = _xla_native.why_not(spec)
    if unfit is not None:
        refuse_if_asked(spec, unfit)
        return Route(False, unfit)
    if asked:
        return Route(True, f"{by}={'True' if by == 'xla_native' else '1'} asks for it")
    if exporting:
        return Route(False, "the lowering is for jax.export (XLA's call carries Triton IR, "
                            "which another jaxlib may not read)")
    if not _compat.xla_triton_dialect():
        return Route(False, "this jaxlib has no Triton dialect (jaxlib.triton) to read the "
                            "kernel's IR with, as XLA's call must")
    if backend.xla_call_unproven is not None:
        return Route(False, backend.xla_call_unproven)
    return Route(True, "the call fits it")


def refuse_if_asked(spec: KernelCallSpec, reason: str) -> None:
    """Raises where the call itself asked for XLA's Triton call, which cannot take it.

    Raises:
      ValueError: naming `xla_native`, the kernel and `reason`.
    """
    if spec.xla_native:
        raise ValueError(
            f"triton_call(xla_native=True) cannot be honoured for kernel {spec.kernel_name}: "
            f"{reason}. Leave xla_native unset to let the package take the route that fits, or "
            f"pass xla_native=False for jaxlib's Triton call.")


def note(route: str, spec: KernelCallSpec, reason: str) -> None:
    """Logs the route a lowering took, and why, at DEBUG; the route, the kernel's name and the
    reason are also the record's `jax_triton_rocm_route`, `jax_triton_rocm_kernel` and
    `jax_triton_rocm_reason` (for counting and for `info`)."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("jax_triton_rocm: kernel %s takes the %s route: %s", spec.kernel_name,
                     route, reason, extra={"jax_triton_rocm_route": route,
                                           "jax_triton_rocm_kernel": spec.kernel_name,
                                           "jax_triton_rocm_reason": reason})
