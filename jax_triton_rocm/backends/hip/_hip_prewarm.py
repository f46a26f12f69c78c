"""The ROCm prewarm: a new path-delivered kernel call is launched once before any real run.

jaxlib's ROCm plugin reads and deletes an HSACO file outside the lock of its module cache, so two
devices loading a new kernel at once race, and the loser fails for good (docs/rocm.md). The
launch emits the very call the lowering encoded, with the `emit` it hands over (a backend never
imports the lowering). Nothing here is AMD-specific: the machinery is tested on NVIDIA GPUs too.
"""

from __future__ import annotations

import functools
import hashlib
import warnings
from collections.abc import Callable
from typing import Any

from jax._src import dispatch
from jax._src.core import Primitive
from jax.interpreters import mlir

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env, _state

# Digests of the calls launched once in this process, as jaxlib's module cache keeps them for
# the life of the process; empty again after a fork (that cache does not cross one) and after
# `clear_caches()` (a call lowered again is then prewarmed again).
LOADED_KERNELS: set[str] = set()
_state.on_fork(LOADED_KERNELS.clear)
_state.on_clear(LOADED_KERNELS.clear)

# A call already encoded by a lowering, emitted as is, aliases included: its `emit` parameter
# (hashed by identity) emits it.
encoded_call_p = Primitive("triton_encoded_call")
encoded_call_p.multiple_results = True
encoded_call_p.def_impl(functools.partial(dispatch.apply_primitive, encoded_call_p))
encoded_call_p.def_abstract_eval(lambda *avals, emit, out_avals: list(out_avals))
for _platform in _vendors.GPU_PLATFORMS:
    mlir.register_lowering(encoded_call_p, lambda ctx, *operands, emit, out_avals:
                           emit(ctx, operands), platform=_platform)


def local_device_count() -> int:
    """How many ROCm devices this process drives (prewarm matters only for more than one)."""
    import jax

    try:
        return len(jax.local_devices(backend="rocm"))
    except RuntimeError:
        return 0


def prewarm_once(lowered: Any, in_avals: tuple, out_avals: tuple, emit: Callable[..., Any],
                 platform: str = "rocm") -> bool:
    """Launches a newly lowered path-delivered call once on one device; True if it launched.

    Keyed on a digest of the serialized call, whose lock is held across the launch: a second
    lowering of the same call waits instead of racing; different calls do not wait for each
    other. A launch that fails warns once, not at every lowering (the key is kept all the same).
    """
    if not _env.prewarm() or local_device_count() < 2:
        return False
    key = hashlib.sha256(lowered.serialized).hexdigest()
    with _state.LOCKS.item_lock(("prewarm", key)):
        if key in LOADED_KERNELS:
            return False
        try:
            launch_for_prewarm(lowered, in_avals, out_avals, emit, platform=platform)
        except Exception as err:  # the real run will report the real error
            warnings.warn(
                f"jax_triton_rocm: prewarming kernel call {key[:12]} on one device failed "
                f"({type(err).__name__}: {err}); multi-device runs of it may race in the ROCm "
                f"plugin. Set {_env.ENV_HSACO_DELIVERY}=embedded on jax 0.11.1+ to avoid files "
                f"altogether.",
                RuntimeWarning, stacklevel=2)
        finally:
            LOADED_KERNELS.add(key)
        return True


def prewarm_program(lowered: Any, in_avals: tuple, out_avals: tuple,
                    emit: Callable[..., Any]):
    """A function of no arguments that launches `lowered` on zero-filled operands, made inside
    it (`jax.jit` of it needs no host data), through the real lowering's `emit`: the same bytes,
    so the same file path, and the same aliases. An output aliased to an input starts as that
    input's zeros, so an in-place kernel that reads its output (a counter, an index map) sees
    zeros, not whatever the allocator left there."""
    import jax.numpy as jnp

    def launch_on_zeros():
        operands = [jnp.zeros(a.shape, a.dtype) for a in in_avals]
        return encoded_call_p.bind(*operands, out_avals=tuple(out_avals),
                                   emit=lambda ctx, operands: emit(ctx, operands, lowered))

    return launch_on_zeros


def launch_for_prewarm(lowered: Any, in_avals: tuple, out_avals: tuple,
                       emit: Callable[..., Any], platform: str = "rocm") -> list:
    """Runs `prewarm_program` on the first device of `platform`; returns its outputs."""
    import jax

    device = jax.local_devices(backend=platform)[0]
    with jax.default_device(device):
        program = prewarm_program(lowered, in_avals, out_avals, emit)
        return jax.block_until_ready(jax.jit(program)())
