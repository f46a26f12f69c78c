"""jaxlib's typed-FFI Triton handler under the package's own target, outside command buffers.

XLA records a custom call into its command buffers (CUDA or HIP graphs) when the handler of its
target is registered command-buffer compatible, as jaxlib's `triton_kernel_call_ffi` is; there
is no per-call way out. With `JAX_TRITON_ROCM_COMMAND_BUFFERS=0` the package emits its plain calls
under `UNBUFFERED_CALL_NAME` instead: the very handler jaxlib registers (its stages, from the
plugin's `_triton.registrations()`), registered again under that name with XLA's default traits,
so XLA launches each call by itself while the rest of the program stays in command buffers. The
opaque, the binary and the launch are jaxlib's, unchanged.

`register(platform)` registers it once per platform, where the plugin offers the handler; the
package calls it for each platform it lowers for (`routes._primitive`), so that a program lowered
or exported with that target compiles in any process that has registered the package.
"""

from __future__ import annotations

import logging

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _compat, _state

logger = logging.getLogger("jax_triton_rocm")

XLA_PLATFORM_NAMES = {"cuda": "CUDA", "rocm": "ROCM"}

_registered: set[str] = set()


def register(platform: str) -> bool:
    """Registers `UNBUFFERED_CALL_NAME` for `platform` ("cuda" or "rocm") with the stages of
    jaxlib's `triton_kernel_call_ffi`, once per process; returns whether it is registered (False
    where the plugin's `_triton` does not import or lists no such handler)."""
    with _state.LOCKS.lock_for("unbuffered-target"):
        if platform in _registered:
            return True
        stages = _jaxlib_handler(platform)
        if stages is None:
            return False
        from jax._src.lib import xla_client

        # Default traits: not command-buffer compatible, which is the point.
        xla_client.register_custom_call_target(
            _compat.UNBUFFERED_CALL_NAME, stages, platform=XLA_PLATFORM_NAMES[platform],
            api_version=1)
        _registered.add(platform)
        return True


def _jaxlib_handler(platform: str):
    """The stages of jaxlib's typed-FFI Triton handler for `platform`, as its plugin lists them
    for registration, or None."""
    module = _vendors.plugin_triton_module(platform)
    listing = getattr(module, "registrations", None)
    if listing is None:
        return None
    try:
        return listing().get(_compat.FFI_CALL_NAME)
    except Exception as err:  # a broken plugin must not break lowering for the default target
        logger.debug("jax_triton_rocm: %s plugin's registrations() failed: %s", platform, err)
        return None


def target(platform: str) -> str:
    """The target to emit a plain call under with command buffers turned off for the package's
    calls: `UNBUFFERED_CALL_NAME`, registered for `platform` where its plugin offers jaxlib's
    handler (elsewhere, a lowering for a machine where the package registers it). Every lowering
    with the setting asks: once registered, no lock is taken."""
    if platform not in _registered:
        register(platform)
    return _compat.UNBUFFERED_CALL_NAME
