"""Activation: the `jax_plugins` entry point and `register()`.

JAX imports this module when its backends start and calls `initialize()`. That must be cheap and
must never raise into JAX's start-up: it registers the lowering rules of `triton_kernel_p` for
both GPU platforms, without importing Triton (the vendor module is imported at the first
lowering, or by `register()`).

The rules are registered for "cuda" and "rocm" whether or not their jaxlib plugin is installed.
A rule for a platform that has no backend here is inert until something lowers for that platform,
and then it is what makes cross-compilation under `JAX_TRITON_ROCM_TARGET_ARCH` work, or, with
no architecture named, raises the package's error saying how to name one (instead of JAX's
generic "MLIR translation rule ... not found").

`register()` does the same explicitly (notebooks, tests, cross-compilation) and also imports the
vendor modules of the platforms in use, so a Triton whose backend is broken fails there with a
clear ImportError.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Iterable
from typing import Any

from jax.interpreters import mlir

from jax_triton_rocm import _checks, _compat, _state, _vendors
from jax_triton_rocm._primitive import triton_kernel_p

logger = logging.getLogger("jax_triton_rocm")

_registered: set[str] = set()


@functools.cache
def _vendor(platform: str) -> Any:
    """The lowering rule's object for `platform` (imports Triton and its backend on first use,
    together with what a lowering needs, so that no fork splits those imports: `_state.IMPORTS`)."""
    from jax_triton_rocm import _routes

    module = _state.IMPORTS.import_for_lowering(_vendors.vendor(platform).backend_module)
    return _routes.Lowering(module.BACKEND)


def _rule_for(platform: str):
    def lower_triton_kernel(ctx, *operands, **params):
        return _vendor(platform).lower(ctx, *operands, **params)

    lower_triton_kernel.__qualname__ = f"lower_triton_kernel_{platform}"
    return lower_triton_kernel


def _register_rules(platforms: Iterable[str]) -> None:
    with _state.LOCKS.lock_for("register"):
        for platform in platforms:
            if platform not in _registered:
                mlir.register_lowering(triton_kernel_p, _rule_for(platform), platform=platform)
                _registered.add(platform)


def registered_platforms() -> tuple[str, ...]:
    """The platforms whose lowering rules are registered, sorted."""
    return tuple(sorted(_registered))


def platforms_in_use() -> tuple[str, ...]:
    """The GPU platforms whose jaxlib plugin is installed or whose architecture is named.

    Named means by `target_arch(...)` on this thread or by `JAX_TRITON_ROCM_TARGET_ARCH`.

    Raises:
      ValueError: `JAX_TRITON_ROCM_TARGET_ARCH` is malformed (names the value and the form).
    """
    from jax_triton_rocm import _target

    installed = set(_compat.installed_gpu_platforms())
    named = {p for p in _compat.GPU_PLATFORMS if _target.named_arch(p) is not None}
    return tuple(p for p in _compat.GPU_PLATFORMS if p in installed | named)


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
    _checks.not_a_string(platforms, "platforms", caller="register: ",
                         wanted="a sequence of platform names, e.g. ('cuda',) or ('cuda', 'rocm')")
    chosen = None if platforms is None else tuple(platforms)
    for platform in chosen or ():
        if platform not in _vendors.VENDORS:
            raise ValueError(f"platforms={chosen!r}: {platform!r} is not a GPU platform "
                             f"this package lowers for; use 'cuda' and/or 'rocm'.")
    _register_rules(_compat.GPU_PLATFORMS)
    if explicit:
        for platform in platforms_in_use() if chosen is None else chosen:
            _vendor(platform)
    return registered_platforms()


_installed_registered = False


def ensure_registered() -> None:
    """`register()` for the platforms in use, once per process (`triton_call` calls this)."""
    global _installed_registered
    if not _installed_registered:
        register()
        _installed_registered = True


def initialize() -> None:
    """JAX's plugin hook: registers rules for both GPU platforms; never raises, never slow."""
    try:
        if not sys.platform.startswith("linux"):
            logger.debug("jax_triton_rocm: %s is not Linux; no GPU lowering registered.",
                         sys.platform)
            return
        registered = register(explicit=False)
        logger.debug("jax_triton_rocm: lowering rules registered for %s (jaxlib GPU plugins "
                     "installed: %s).", ", ".join(registered),
                     ", ".join(_compat.installed_gpu_platforms()) or "none")
    except Exception as err:  # JAX's start-up must go on whatever happens here
        logger.warning("jax_triton_rocm: plugin initialization failed: %s", err, exc_info=True)
