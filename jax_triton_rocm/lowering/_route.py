"""The route a call takes on a GPU, and why: XLA's own Triton call or jaxlib's.

XLA's Triton call (`_xla_native`) launches the kernel as one of XLA's own kernels, at what
XLA's kernels cost; jaxlib's (`_jaxlib_call`) costs about twice that per launch with command
buffers on, and grows with the binary and the parameters (docs/BENCHMARKS.md, launch cost).
So the rule, per call:

1. Asked: `triton_call(..., xla_native=True)`, else `JAX_TRITON_ROCM_XLA_NATIVE=1`, takes XLA's
   call wherever the call fits it; `xla_native=False`, else `JAX_TRITON_ROCM_XLA_NATIVE=0`,
   takes jaxlib's.
2. Otherwise (automatic), XLA's call where it fits and is proven, jaxlib's where it must be:
   - the call does not fit (`_xla_native.why_not`: autotuned, Gluon, zeroed outputs, clusters,
     vendor options, ...);
   - the lowering is for `jax.export`: XLA's call carries Triton IR, which no jaxlib promises to
     read in another release; jaxlib's carries a binary in a versioned proto;
   - the kernel receives runtime (non-constexpr) scalars: XLA's call passes pointers only, so
     every value of a scalar is compiled into a kernel of its own, a Triton and an XLA compile
     per new value, about six times what a new value costs jaxlib's route, where the kernel
     compiles once (`benchmarks/scalar_compile.py`, docs/BENCHMARKS.md). The launch it saves (about
     1.7 µs) repays one such compile only after some 60,000 launches, and a length or a scale
     usually changes more often than that;
   - this jaxlib's XLA Triton call has not run the package's kernels on this platform's GPUs
     (`_compat.XLA_TRITON_CALL_RUN`).
A kernel XLA's call cannot take after all (IR this jaxlib's Triton cannot read, global scratch
memory) goes to jaxlib's, whichever way the route was chosen. Each lowering logs its route and
the reason at DEBUG on the "jax_triton_rocm" logger (`note`).
"""

from __future__ import annotations

import dataclasses
import logging

from jax_triton_rocm.base import _compat, _values
from jax_triton_rocm.launch import _types
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


def runtime_scalars(spec: KernelCallSpec) -> list[str]:
    """The kernel parameters the call fills with runtime (non-constexpr) scalars."""
    params = spec.unwrapped.jit_fn.params
    names = []
    for i, (kind, value) in enumerate(spec.positional):
        if kind == "scalar" and i < len(params):
            role, *_ = _types.scalar_role(params[i], value, what=f"argument {i}")
            if role == "runtime":
                names.append(params[i].name)
    return names


def choose(spec: KernelCallSpec, platform: str, *, exporting: bool) -> Route:
    """The route for `spec` lowered for `platform` (see the module docstring).

    Raises:
      ValueError: `JAX_TRITON_ROCM_XLA_NATIVE` is malformed.
    """
    asked = spec.xla_native
    by = "xla_native" if asked is not None else ENV_XLA_NATIVE
    if asked is None:
        asked = env_choice()
    if asked is False:
        return Route(False, f"{by}={'False' if by == 'xla_native' else '0'} asks for it")
    unfit = _xla_native.why_not(spec.unwrapped, spec)
    if unfit is not None:
        return Route(False, unfit)
    if asked:
        return Route(True, f"{by}={'True' if by == 'xla_native' else '1'} asks for it")
    if exporting:
        return Route(False, "the lowering is for jax.export (XLA's call carries Triton IR, "
                            "which another jaxlib may not read)")
    scalars = runtime_scalars(spec)
    if scalars:
        return Route(False, f"the kernel receives runtime scalar(s) {', '.join(scalars)}, which "
                            f"XLA's call would compile in, a kernel per value (make them "
                            f"tl.constexpr to take it)")
    unproven = xla_call_unproven(platform)
    if unproven is not None:
        return Route(False, unproven)
    return Route(True, f"the call fits it, and it has run the package's kernels on {platform} "
                       f"GPUs with this jaxlib ({_compat.jaxlib_version()})")


def xla_call_unproven(platform: str) -> str | None:
    """Why XLA's Triton call is not known to run the package's kernels on `platform` with the
    installed jaxlib (`_compat.XLA_TRITON_CALL_RUN`), or None where it is."""
    version, proven = _compat.jaxlib_version(), _compat.XLA_TRITON_CALL_RUN[platform]
    if version in proven:
        return None
    if not proven:
        return (f"XLA's Triton call has never run the package's kernels on a {platform} GPU (none "
                f"was available): it is lowered and checked, not launched")
    return (f"XLA's Triton call has run the package's kernels on a {platform} GPU with jaxlib "
            f"{', '.join(proven)}, not yet with this jaxlib {version}")


def note(route: str, spec: KernelCallSpec, reason: str) -> None:
    """Logs the route a lowering took, and why, at DEBUG; the route, the kernel's name and the
    reason are also the record's `jax_triton_rocm_route`, `jax_triton_rocm_kernel` and
    `jax_triton_rocm_reason` (for counting and for `info`)."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("jax_triton_rocm: kernel %s takes the %s route: %s", spec.kernel_name,
                     route, reason, extra={"jax_triton_rocm_route": route,
                                           "jax_triton_rocm_kernel": spec.kernel_name,
                                           "jax_triton_rocm_reason": reason})
