"""The lowering rules of `triton_kernel_p`, one per platform, and the route each call takes.

On a GPU platform ("cuda", "rocm") a call takes XLA's own Triton custom call (`_xla_native`)
or jaxlib's (`_jaxlib_call`), as `_route.choose` rules (asked for, or where it fits and the
platform takes it by default, and not for `jax.export`); the platform's backend
(`backends.backend`) answers the vendor questions on both routes. On the CPU
the kernel runs in Triton's interpreter (`interpret`). `triton_call_lowering` enters here too,
through `lower`.

Registration must be cheap: JAX's start-up calls it (`_plugin.initialize`). The rules are
registered for "cuda" and "rocm" whether or not their jaxlib plugin is installed. A rule for a
platform that has no backend here is inert until something lowers for that platform, and then
it is what makes cross-compilation under `JAX_TRITON_ROCM_TARGET_ARCH` work, or, with no
architecture named, raises the package's error saying how to name one (instead of JAX's generic
"MLIR translation rule ... not found"). The routes and the vendor module are imported at the
first lowering (they import protobuf and Triton), or by `register()`, which imports the vendor
modules of the platforms in use so that a Triton whose backend is broken fails there with a
clear ImportError.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import Any

from jax.interpreters import mlir

from jax_triton_rocm import backends
from jax_triton_rocm.backends._backend import Backend
from jax_triton_rocm.base import _compat, _imports, _state, _values, _vendors
from jax_triton_rocm.launch._spec import KernelCallSpec
from jax_triton_rocm.lowering import _devices, _target
from jax_triton_rocm.lowering._primitive import triton_kernel_p

_registered: set[str] = set()


@dataclasses.dataclass(frozen=True)
class Lowering:
    """The lowering rule of `triton_kernel_p` for one GPU platform, with that platform's backend."""

    backend: Backend

    def lower(self, ctx: Any, operands: Sequence[Any], spec: KernelCallSpec) -> list:
        """Lowers one equation to a custom call on the route `_route.choose` picks; returns its
        results."""
        from jax_triton_rocm.lowering import _jaxlib_call, _route, _xla_native  # see `_lowering`

        route = _route.choose(spec, self.backend, exporting=_devices.for_export(ctx))
        reason = route.reason
        if route.xla:
            results = _xla_native.lower(self.backend, ctx, operands, spec)
            if not isinstance(results, _xla_native.Unfit):
                _route.note(_route.XLA, spec, reason)
                return results
            _route.refuse_if_asked(spec, results.reason)
            reason = results.reason
        lowered = _jaxlib_call.lower_call(self.backend, ctx, spec)
        _route.note(_route.JAXLIB_LEGACY if lowered.custom_call_target == _compat.LEGACY_TARGET
                    else _route.JAXLIB, spec, reason)
        self.backend.after_encode(lowered, ctx, _jaxlib_call.emit)
        return _jaxlib_call.emit(ctx, operands, lowered)


@functools.cache
def _lowering(platform: str) -> Lowering:
    """The rule's object for a GPU platform; imports the routes and the vendor module on first
    use, under the lock that keeps a fork from splitting those imports (`_imports.IMPORTS`)."""
    with _imports.IMPORTS.lowering():
        from jax_triton_rocm.lowering import _jaxlib_call, _route, _xla_native  # noqa: F401

        return Lowering(backends.backend(platform))


def lower(platform: str, ctx: Any, operands: Sequence[Any], spec: KernelCallSpec) -> list:
    """Lowers `spec` for `platform` ("cuda", "rocm" or "cpu"); returns the results."""
    if platform == "cpu":
        with _imports.IMPORTS.lowering():
            from jax_triton_rocm.interpret import _interpret
            from jax_triton_rocm.lowering import _route

        _route.note(_route.INTERPRETER, spec, "lowered for the CPU")
        return _interpret.lower(ctx, operands, spec)
    return _lowering(platform).lower(ctx, operands, spec)


def _rule_for(platform: str):
    def lower_triton_kernel(ctx, *operands, spec):
        return lower(platform, ctx, operands, spec)

    lower_triton_kernel.__qualname__ = f"lower_triton_kernel_{platform}"
    return lower_triton_kernel


def _register_rules(platforms: Iterable[str]) -> None:
    with _state.LOCKS.lock_for("register"):
        for platform in platforms:
            if platform not in _registered:
                mlir.register_lowering(triton_kernel_p, _rule_for(platform), platform=platform)
                _registered.add(platform)


# The CPU rule needs no plugin and imports nothing until it runs.
mlir.register_lowering(triton_kernel_p, _rule_for("cpu"), platform="cpu")


def registered_platforms() -> tuple[str, ...]:
    """The GPU platforms whose lowering rules are registered, sorted."""
    return tuple(sorted(_registered))


def platforms_in_use() -> tuple[str, ...]:
    """The GPU platforms whose jaxlib plugin is installed or whose architecture is named.

    Named means by `target_arch(...)` on this thread or by `JAX_TRITON_ROCM_TARGET_ARCH`.

    Raises:
      ValueError: `JAX_TRITON_ROCM_TARGET_ARCH` is malformed (names the value and the form).
    """
    installed = set(_compat.installed_gpu_platforms())
    named = {p for p in _vendors.GPU_PLATFORMS if _target.named_arch(p) is not None}
    return tuple(p for p in _vendors.GPU_PLATFORMS if p in installed | named)


def register(platforms: Iterable[str] | None = None, *, explicit: bool = True) -> tuple[str, ...]:
    """Registers the lowering rules of `triton_kernel_p`; safe to call any number of times.

    Rules are registered for both GPU platforms ("cuda", "rocm") whatever `platforms` says: a
    rule is harmless for a platform that nothing lowers for, and with it a lowering for a
    platform without a plugin or device gets the package's own error (or, with an architecture
    named, cross-compiles).

    Args:
      platforms: the platforms whose Triton backend `explicit` imports: "cuda" and/or "rocm";
        by default those whose jaxlib plugin is installed or whose architecture is named
        (`platforms_in_use()`).
      explicit: import the vendor modules now, so a broken Triton fails here (True), or defer
        that to the first lowering (False, what JAX's `initialize()` does).

    Returns:
      All platforms registered so far, sorted.

    Raises:
      TypeError: `platforms` is a string (one name) instead of a sequence of names.
      ValueError: an unknown platform name, or a malformed `JAX_TRITON_ROCM_TARGET_ARCH`.
      RuntimeError: `JAX_TRITON_ROCM_TARGET_ARCH` was changed after it was read.
      ImportError: Triton, or its backend for a platform in use, is missing or broken.
    """
    _values.not_a_string(platforms, "platforms", caller="register: ",
                         wanted="a sequence of platform names, e.g. ('cuda',) or ('cuda', 'rocm')")
    chosen = None if platforms is None else tuple(platforms)
    for platform in chosen or ():
        if platform not in _vendors.VENDORS:
            raise ValueError(f"platforms={chosen!r}: {platform!r} is not a GPU platform "
                             f"this package lowers for; use 'cuda' and/or 'rocm'.")
    _register_rules(_vendors.GPU_PLATFORMS)
    if explicit:
        for platform in platforms_in_use() if chosen is None else chosen:
            _lowering(platform)
    return registered_platforms()


_installed_registered = False


def ensure_registered() -> None:
    """`register()` for the platforms in use, once per process (`triton_call` calls this)."""
    global _installed_registered
    if not _installed_registered:
        register()
        _installed_registered = True
