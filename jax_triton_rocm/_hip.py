"""AMD: Triton to HSACO, delivered the way the installed jaxlib ROCm plugin loads it.

Delivery (`JAX_TRITON_ROCM_HSACO_DELIVERY`, read at each lowering; unset means the best the
plugin supports):
  - "embedded": the HSACO travels inside the opaque, in `TritonKernel.module_image` (plugins
    0.11.1+). No file, nothing to race, and the same kernel gives the same bytes in every process,
    so JAX's persistent compilation cache and `jax.export` work. `ptx` then holds a digest of the
    HSACO: jaxlib keys loaded modules by name and `ptx`, not by the binary, so the digest is what
    keeps two same-named kernels apart (`_proto.module_image_ptx`).
  - "path": the HSACO is written to a file in this process's temporary folder and `ptx` holds
    the path; the plugin reads the file, then deletes it. One file per kernel call per process:
    lowering the same kernel again gives the same opaque, which jaxlib has already loaded.

Prewarm (path delivery, more than one local device): the plugin reads and deletes the file
outside its lock, so two devices loading a new kernel at once race and the loser fails for good.
Before the lowering returns, the new kernel is launched once on one device with zero-filled
operands, so its image sits in jaxlib's cache before any multi-device run.
`JAX_TRITON_ROCM_PREWARM=0` turns it off.

wave32 (RDNA, gfx10-12): jaxlib launches `num_warps * 64` threads on HIP. The kernel call's
`num_warps` is scaled so that the block has `num_warps * 32` threads; an odd count cannot be
expressed and is refused.

Importing this module imports Triton's AMD backend, and registers the HIP fork rules (`_state`).
"""

from __future__ import annotations

import hashlib
import logging
import os
import warnings
from typing import Any

from jax_triton_rocm import _checks, _compat, _kernel, _primitive, _state, _target
from jax_triton_rocm._compile import CompiledKernel
from jax_triton_rocm._limits import LaunchLimits
from jax_triton_rocm._lowering import EncodedCall, LoweredCall, VendorLowering

_backend = _compat.import_triton_backend("rocm")

from triton.backends.compiler import GPUTarget  # noqa: E402  (after the checked import)

logger = logging.getLogger("jax_triton_rocm")

ENV_DELIVERY = "JAX_TRITON_ROCM_HSACO_DELIVERY"
ENV_PREWARM = "JAX_TRITON_ROCM_PREWARM"
DELIVERY_MODES = ("embedded", "path")
JAXLIB_WARP = 64

_state.install_hip_fork_rules()


# LDS a workgroup may use, by gfx name; every other AMD target has 64 KiB (Triton's AMD backend,
# TargetInfo::getSharedMemorySize).
MAX_SHARED_BYTES = {"gfx950": 160 * 1024, "gfx1250": 320 * 1024}
DEFAULT_MAX_SHARED_BYTES = 64 * 1024


def warp_size(arch: str) -> int:
    """64 for CDNA/GCN (gfx9xx and older), 32 for RDNA (gfx10 and newer)."""
    major = int(arch[3:-2])
    return 64 if major < 10 else 32


def delivery_mode(features: _compat.PluginFeatures) -> str:
    """The HSACO delivery for this lowering: the environment's choice, else the best supported.

    Raises:
      ValueError: an unknown mode, or "embedded" forced for a plugin known not to read it.
    """
    forced = os.environ.get(ENV_DELIVERY, "").strip().lower()
    if not forced:
        return "embedded" if features.module_image else "path"
    if forced not in DELIVERY_MODES:
        raise ValueError(f"{ENV_DELIVERY}={forced!r} is not a delivery mode; use one of "
                         f"{', '.join(DELIVERY_MODES)} (or unset it for the best supported).")
    if forced == "embedded" and not features.module_image and features.plugin is not None:
        raise ValueError(
            f"{ENV_DELIVERY}=embedded, but the ROCm plugin ({features.detected_from}) does not "
            f"read TritonKernel.module_image (it needs jax 0.11.1+). Upgrade jax and its plugin, "
            f"or use {ENV_DELIVERY}=path.")
    return forced


def prewarm_enabled() -> bool:
    return _checks.env_flag(ENV_PREWARM, default=True)


def local_device_count() -> int:
    """How many ROCm devices this process drives (prewarm matters only for more than one)."""
    import jax

    try:
        return len(jax.local_devices(backend="rocm"))
    except RuntimeError:
        return 0


class HipLowering(VendorLowering):
    platform = "rocm"
    binary_key = "hsaco"
    asm_key = "amdgcn"
    vendor_options = _kernel.AMD_OPTIONS

    def triton_target(self, target: _target.Target) -> Any:
        return GPUTarget("hip", target.arch, warp_size(target.arch))

    def backend_class(self) -> Any:
        return _backend.HIPBackend

    def launch_warps(self, compiled: CompiledKernel) -> int:
        """The `num_warps` to give jaxlib so that it launches the block the kernel was built for."""
        threads = compiled.num_warps * compiled.warp_size
        if threads % JAXLIB_WARP:
            raise ValueError(
                f"Kernel {compiled.name} was compiled for wave{compiled.warp_size} with "
                f"num_warps={compiled.num_warps} ({threads} threads), but jaxlib launches HIP "
                f"blocks in multiples of {JAXLIB_WARP} threads. Use an even num_warps on wave32 "
                f"GPUs.")
        return threads // JAXLIB_WARP

    def hsaco_path(self, compiled: CompiledKernel) -> str:
        """The file the plugin reads this kernel from: one per kernel per process (`_state`)."""
        return _state.HSACO_FOLDER.file_for(compiled.key, compiled.binary, compiled.name)

    def embeds_binary(self, features: _compat.PluginFeatures) -> bool:
        return delivery_mode(features) == "embedded"

    def ptx_field(self, compiled: CompiledKernel) -> str:
        return self.hsaco_path(compiled)

    def capability(self, target: _target.Target) -> int:
        return target.gfx_capability

    def launch_limits(self, target: _target.Target) -> LaunchLimits:
        return LaunchLimits(target.arch, warp_size(target.arch),
                            max_shared_bytes=MAX_SHARED_BYTES.get(target.arch,
                                                                  DEFAULT_MAX_SHARED_BYTES))

    def after_encode(self, lowered: LoweredCall, ctx: Any, operands: tuple) -> None:
        if any(call.kernel.object_file is None for call in lowered.calls):
            prewarm_once(lowered, tuple(ctx.avals_in), tuple(ctx.avals_out))


def prewarm_key(lowered: LoweredCall) -> str:
    return hashlib.sha256(lowered.serialized).hexdigest()


def prewarm_once(lowered: LoweredCall, in_avals: tuple, out_avals: tuple,
                 platform: str = "rocm") -> bool:
    """Launches a newly lowered path-delivered call once on one device; True if it launched.

    Keyed on a digest of the serialized call. A per-key lock is held across the launch, so a
    second lowering of the same call waits instead of racing; different calls do not wait for
    each other. The key is recorded in a `finally`: a launch that fails warns once, not at every
    lowering.
    """
    if not prewarm_enabled() or local_device_count() < 2:
        return False
    key = prewarm_key(lowered)
    if key in _state.LOADED_KERNELS:
        return False
    with _state.LOCKS.lock_for(("prewarm", key)):
        if key in _state.LOADED_KERNELS:
            return False
        try:
            launch_for_prewarm(lowered, in_avals, out_avals, platform=platform)
        except Exception as err:  # the real run will report the real error
            warnings.warn(
                f"jax_triton_rocm: prewarming kernel call {key[:12]} on one device failed "
                f"({type(err).__name__}: {err}); multi-device runs of it may race in the ROCm "
                f"plugin. Set {ENV_DELIVERY}=embedded on jax 0.11.1+ to avoid files altogether.",
                RuntimeWarning, stacklevel=2)
        finally:
            _state.LOADED_KERNELS.add(key)
        return True


def prewarm_program(lowered: LoweredCall, in_avals: tuple, out_avals: tuple):
    """A function of no arguments that launches `lowered` on zero-filled operands.

    The operands are made inside the program, so `jax.jit` of it needs no host data. The same
    encoded call (the same bytes, so the same file path) is emitted through the same `emit` as the
    real lowering, with the same aliases: an output aliased to an input starts as that input's
    zeros, so an in-place kernel that reads its output (a counter, an index map) sees zeros, not
    whatever the allocator left there.
    """
    import jax.numpy as jnp

    def launch_on_zeros():
        operands = [jnp.zeros(a.shape, a.dtype) for a in in_avals]
        return _primitive.encoded_call_p.bind(*operands, lowered=EncodedCall(lowered),
                                              out_avals=tuple(out_avals))

    return launch_on_zeros


def launch_for_prewarm(lowered: LoweredCall, in_avals: tuple, out_avals: tuple,
                       platform: str = "rocm") -> list:
    """Runs `prewarm_program` on the first device of `platform`; returns its outputs."""
    import jax

    device = jax.local_devices(backend=platform)[0]
    with jax.default_device(device):
        return jax.block_until_ready(jax.jit(prewarm_program(lowered, in_avals, out_avals))())


LOWERING = HipLowering()
