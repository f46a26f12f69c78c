"""The `jax_plugins` entry point: JAX calls `initialize()` when its backends start, so it must
be cheap and never raise; it registers the lowering rules without importing Triton.
"""

from __future__ import annotations

import logging
import sys

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.routes import _primitive

logger = logging.getLogger("jax_triton_rocm")


def initialize() -> None:
    """JAX's plugin hook: registers rules for both GPU platforms; never raises, never slow."""
    try:
        if not sys.platform.startswith("linux"):
            logger.debug("jax_triton_rocm: %s is not Linux; no GPU lowering registered.",
                         sys.platform)
            return
        registered = _primitive.ensure_registered()
        if logger.isEnabledFor(logging.DEBUG):  # the plugins are looked up for this line only
            logger.debug("jax_triton_rocm: lowering rules registered for %s (jaxlib GPU "
                         "plugins installed: %s).", ", ".join(registered),
                         ", ".join(_vendors.installed_gpu_platforms()) or "none")
    except Exception as err:  # JAX's start-up must go on whatever happens here
        logger.warning("jax_triton_rocm: plugin initialization failed: %s", err, exc_info=True)
