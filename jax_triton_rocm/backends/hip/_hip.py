"""AMD: Triton to HSACO, delivered as the installed jaxlib ROCm plugin loads it: embedded in the
call, or by path (`_hip_files`), per `delivery_mode`; on wave32 `num_warps` scaled to jaxlib's
launch (`HipBackend.loaded_form`) ([ROCm](rocm.md)). Importing this module imports Triton's AMD
backend, so a broken one fails here.
"""

from __future__ import annotations

import dataclasses
import mmap
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.backends._backend import ArchAnswers, Backend, LoadedForm
from jax_triton_rocm.backends.hip import _hip_files
from jax_triton_rocm.base import _env
from jax_triton_rocm.compile._compile import CompiledKernel

_triton_amd = _vendors.triton_compiler("rocm")  # a broken backend fails here

from triton.backends.compiler import GPUTarget  # noqa: E402  (after the checked import)

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext
    from jax_triton_rocm.backends._vendors import GpuArch

JAXLIB_WARP = 64

# LDS a workgroup may use, by gfx name; every other AMD target has 64 KiB (Triton's AMD backend,
# TargetInfo::getSharedMemorySize).
MAX_SHARED_BYTES = {"gfx950": 160 * 1024, "gfx1250": 320 * 1024}
DEFAULT_MAX_SHARED_BYTES = 64 * 1024


def warp_size(arch: str) -> int:
    """64 for CDNA/GCN (gfx9xx and older), 32 for RDNA (gfx10 and newer)."""
    return 64 if int(arch[3:-2]) < 10 else 32


def _llvm_amdgpu_processors(arch: str | None = None) -> tuple[str, ...] | bool:
    """The gfx names in LLVM's AMDGPU processor table inside Triton's library; with `arch`, only
    whether that one is there (a byte search, fast where the full scan is not)."""
    import triton._C.libtriton as libtriton

    with open(libtriton.__file__, "rb") as file, \
            mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if arch is not None:
            return data.find(b"\x00" + arch.encode() + b"\x00") >= 0
        found = re.findall(rb"\x00(gfx[0-9]{2,3}[0-9a-f])(?=\x00)", data)
    return tuple(sorted({name.decode() for name in found} - {"gfx000"}))


def delivery_mode(features: _vendors.PluginFeatures) -> str:
    """The HSACO delivery for this lowering: the environment's choice, else the best supported.
    Raises ValueError for an unknown mode, or "embedded" forced for a plugin known not to read it.
    """
    forced = _env.hsaco_delivery()
    if forced is None:
        return "embedded" if features.module_image else "path"
    if forced == "embedded" and not features.module_image and features.plugin is not None:
        raise ValueError(
            f"{_env.ENV_HSACO_DELIVERY}=embedded, but the ROCm plugin "
            f"({features.detected_from}) does not read TritonKernel.module_image (it needs jax "
            f"0.11.1+). Upgrade jax and its plugin, or use {_env.ENV_HSACO_DELIVERY}=path.")
    return forced


class HipBackend(Backend):
    platform = "rocm"
    binary_key = "hsaco"
    asm_key = "amdgcn"
    compile_options = _vendors.VENDORS["rocm"].compile_options
    lowering_variables = (_env.ENV_HSACO_DELIVERY,)
    triton_backend = _triton_amd.HIPBackend
    option_names = frozenset([field.name
                              for field in dataclasses.fields(_triton_amd.HIPOptions)])

    # hipModuleLaunchKernel refuses a grid whose x size times the block's threads exceeds 32
    # bits (hipErrorInvalidConfiguration): HIP counts global work items, not blocks.
    max_threads_x = 2**32 - 1

    def target(self, arch: GpuArch) -> tuple[GPUTarget, int, int | None]:
        name = arch.arch
        # jaxlib's HIP `get_compute_capability`: major*10+minor (94 for gfx942).
        capability = int(name[3:-2]) * 10 + int(name[-2], 16)
        return (GPUTarget("hip", name, warp_size(name)), capability,
                MAX_SHARED_BYTES.get(name, DEFAULT_MAX_SHARED_BYTES))

    def knows_arch(self, arch: str) -> bool:
        return _llvm_amdgpu_processors(arch)

    def known_archs(self) -> tuple[str, ...]:
        return _llvm_amdgpu_processors()

    def loaded_form(self, compiled: CompiledKernel, answers: ArchAnswers,
                    features: _vendors.PluginFeatures,
                    devices: GpuArch | None = None, keep_ptx_text: bool = False) -> LoadedForm:
        if devices is not None:  # raises: an HSACO loads on its own architecture only
            self.code_for_devices(compiled, answers.arch, devices)
        # The HSACO as compiled, where it is delivered embedded (`delivery_mode`), else the path
        # of this process's file for it (one per kernel key); jaxlib launches num_warps * 64
        # threads: the `num_warps` giving the block the kernel was built for.
        embedded = delivery_mode(features) == "embedded"
        threads = compiled.num_warps * compiled.warp_size
        if threads % JAXLIB_WARP:
            raise ValueError(
                f"Kernel {compiled.name} was compiled for wave{compiled.warp_size} with "
                f"num_warps={compiled.num_warps} ({threads} threads), but jaxlib launches HIP "
                f"blocks in multiples of {JAXLIB_WARP} threads. Use an even num_warps on wave32 "
                f"GPUs.")
        path = (None if embedded else
                _hip_files.HSACO_FOLDER.file_for(compiled.key, compiled.binary, compiled.name))
        return LoadedForm(path, answers.capability, compiled.binary if embedded else None,
                          threads // JAXLIB_WARP)

    def check_export(self, features: _vendors.PluginFeatures) -> None:
        """Path delivery names a file of this process, deleted at its exit: an exported program
        would carry that path to another machine or process, so an export is refused with it."""
        if delivery_mode(features) == "embedded":
            return
        if _env.hsaco_delivery() == "path":
            raise ValueError(
                f"jax.export of a ROCm kernel call with {_env.ENV_HSACO_DELIVERY}=path: path "
                f"delivery writes each HSACO to a temporary file of this process, deleted at its "
                f"exit, and the exported program would carry only that file's path. Unset "
                f"{_env.ENV_HSACO_DELIVERY}, or set {_env.ENV_HSACO_DELIVERY}=embedded, to "
                f"export the HSACO inside the program.")
        raise ValueError(
            f"jax.export of a ROCm kernel call: the ROCm plugin ({features.detected_from}) "
            f"does not read TritonKernel.module_image, so the HSACO could travel only as the "
            f"path of a temporary file of this process, which an exported program cannot "
            f"carry. Upgrade jax and its plugin to 0.11.1 or newer to export.")

    def check_launch(self, arch: GpuArch, num_ctas: int) -> None:
        if num_ctas != 1:
            raise ValueError(
                f"num_ctas={num_ctas}: jaxlib launches ROCm kernels without thread-block "
                f"clusters, so the target {arch.arch} (from {arch.source}) takes num_ctas=1 "
                f"only. Use num_ctas=1 (or leave it out).")

    def after_encode(self, lowered: Any, ctx: LoweringRuleContext,
                     emit: Callable[..., Any]) -> None:
        if any(call.kernel.object_file is None for call in lowered.calls):
            _hip_files.prewarm_once(lowered, tuple(ctx.avals_in), tuple(ctx.avals_out), emit)


BACKEND = HipBackend()
