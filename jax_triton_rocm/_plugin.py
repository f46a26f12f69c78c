"""Activation: the `jax_plugins` entry point and `register()`.

JAX imports this module when its backends start and calls `initialize()`. That must be cheap and
must never raise into JAX's start-up: it looks at which jaxlib GPU plugins are installed and
registers the lowering rules of `triton_kernel_p` for their platforms, without importing Triton
(the vendor module is imported at the first lowering, or by `register()`).

`register()` does the same explicitly (notebooks, tests, cross-compilation) and also imports the
vendor modules, so a Triton whose backend is broken fails there with a clear ImportError.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterable
from typing import Any

from jax.interpreters import mlir

from jax_triton_rocm import _compat, _state
from jax_triton_rocm._primitive import triton_kernel_p

logger = logging.getLogger("jax_triton_rocm")

_VENDOR_MODULES = {"cuda": "jax_triton_rocm._cuda", "rocm": "jax_triton_rocm._hip"}
_registered: set[str] = set()


def _vendor(platform: str) -> Any:
    """The vendor lowering for `platform` (imports Triton and its backend on first use)."""
    return importlib.import_module(_VENDOR_MODULES[platform]).LOWERING


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


def register(platforms: Iterable[str] | None = None, *, explicit: bool = True) -> tuple[str, ...]:
    """Registers the lowering rules of `triton_kernel_p`; safe to call any number of times.

    Args:
      platforms: "cuda" and/or "rocm"; by default those whose jaxlib plugin is installed.
        Naming a platform without its plugin is allowed: it is how cross-compilation for it
        (under `target_arch`) is set up.
      explicit: import the vendor modules now, so a broken Triton fails here (True), or defer
        that to the first lowering (False, what JAX's `initialize()` does).

    Returns:
      All platforms registered so far, sorted.

    Raises:
      ValueError: an unknown platform name.
      ImportError: Triton, or its backend for a named platform, is missing or broken.
    """
    chosen = _compat.installed_gpu_platforms() if platforms is None else tuple(platforms)
    for platform in chosen:
        if platform not in _VENDOR_MODULES:
            raise ValueError(f"platforms={tuple(chosen)!r}: {platform!r} is not a GPU platform "
                             f"this package lowers for; use 'cuda' and/or 'rocm'.")
    _register_rules(chosen)
    if explicit:
        for platform in chosen:
            _vendor(platform)
    return registered_platforms()


_installed_registered = False


def ensure_registered() -> None:
    """`register()` for the installed plugins, once per process (`triton_call` calls this)."""
    global _installed_registered
    if not _installed_registered:
        register()
        _installed_registered = True


def initialize() -> None:
    """JAX's plugin hook: registers rules for installed GPU plugins; never raises, never slow."""
    try:
        if not sys.platform.startswith("linux"):
            logger.debug("jax_triton_rocm: %s is not Linux; no GPU lowering registered.",
                         sys.platform)
            return
        platforms = _compat.installed_gpu_platforms()
        if not platforms:
            logger.debug("jax_triton_rocm: no jaxlib GPU plugin installed; nothing registered.")
            return
        register(platforms, explicit=False)
        logger.debug("jax_triton_rocm: lowering rules registered for %s.", ", ".join(platforms))
    except Exception as err:  # JAX's start-up must go on whatever happens here
        logger.warning("jax_triton_rocm: plugin initialization failed: %s", err, exc_info=True)
