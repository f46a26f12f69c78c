"""What the shared lowering asks a vendor: the interface every backend module (`_cuda`,
`hip._hip`) implements. A backend only answers (target, options, how the binary reaches jaxlib,
launch limits); it never calls into the lowering, and the lowering never asks which vendor it
talks to.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.compile._compile import CompiledKernel
from jax_triton_rocm.plan._plan import LaunchLimits, LaunchSite
from jax_triton_rocm.kernel._spec import MAX_GRID_SIZE

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext
    from jax_triton_rocm.backends._vendors import GpuArch


@dataclasses.dataclass(frozen=True)
class ArchAnswers:
    """What the backend answers for one architecture, once per plan (`Backend.answers`)."""

    arch: GpuArch
    triton_gpu_target: Any
    capability: int
    launch_site: LaunchSite


@dataclasses.dataclass(frozen=True)
class LoadedForm:
    """How the installed jaxlib loads one compiled kernel (`Backend.loaded_form`): jaxlib's `ptx`
    field (PTX text, a file path), or None where `object_file`, the binary, travels in
    `module_image`; the compute capability and `num_warps` jaxlib loads and launches it with."""

    ptx: str | None
    capability: int
    object_file: bytes | None
    num_warps: int


class Backend(abc.ABC):
    """One vendor's answers.

    Attributes:
      platform: JAX's platform name ("cuda", "rocm").
      binary_key, asm_key: Triton's names for the compiled binary and its assembly.
      compile_options: the `triton_call` compile options this vendor passes to Triton.
      triton_backend: Triton's compiler backend class (it parses specialisation attributes).
      option_names: the fields of the vendor's Triton options class (`CUDAOptions`,
        `HIPOptions`): what `backend_options=` may set.
      arch_field, arch_keyword: the `KernelCallSpec` field through which a call names its own
        compile target, and the `triton_call` keyword that sets it, for messages (CUDA:
        `cuda_arch`, from `compute_capability=`); None where a call cannot name one.
      lowering_variables: the environment variables this vendor reads when lowering (their
        values are part of the lowered-call memo's key: `routes._arch.Where`).
      after_encode: where a vendor has one (ROCm's prewarm), `after_encode(lowered, ctx, emit)`
        runs once a call is encoded, before it is emitted; `emit(ctx, operands, lowered)` emits
        an encoded call, so a backend never imports the lowering.
      max_grid, max_threads_x: the target's grid limits (`LaunchLimits`).
    """

    platform: str = ""
    binary_key: str = ""
    asm_key: str = ""
    compile_options: tuple[str, ...] = ()
    triton_backend: type | None = None
    option_names: frozenset[str] = frozenset()
    arch_field: str | None = None
    arch_keyword: str = ""
    lowering_variables: tuple[str, ...] = ()
    after_encode: Callable[[Any, LoweringRuleContext, Callable[..., Any]], None] | None = None
    max_grid: tuple[int, int, int] = (MAX_GRID_SIZE,) * 3
    max_threads_x: int | None = None

    def answers(self, arch: GpuArch) -> ArchAnswers:
        """Every per-architecture answer at once, the vendor's (`target`) with what the plan
        needs of where the launches run, so that the lowering asks the backend once per plan."""
        triton_gpu_target, capability, max_shared_bytes = self.target(arch)
        limits = LaunchLimits(arch.arch, triton_gpu_target.warp_size,
                              max_shared_bytes=max_shared_bytes, max_grid=self.max_grid,
                              max_threads_x=self.max_threads_x)
        fp8_types = _FP8_TYPES.get(triton_gpu_target)
        if fp8_types is None:  # what Triton's backend fills in, once per target
            from triton.compiler import make_backend

            fp8_types = _FP8_TYPES[triton_gpu_target] = tuple(
                make_backend(triton_gpu_target).parse_options(dict(_READ_ONLY_OPTIONS))
                .supported_fp8_dtypes)
        site = LaunchSite(self.triton_backend, limits, _vendors.COMPILE_OPTIONS,
                          functools.partial(self.check_launch, arch), name=arch.arch,
                          fp8_types=fp8_types)
        return ArchAnswers(arch, triton_gpu_target, capability, site)

    @abc.abstractmethod
    def target(self, arch: GpuArch) -> tuple[Any, int, int | None]:
        """Triton's `GPUTarget` for `arch`, jaxlib's `compute_capability` field, and the shared
        memory one block may use there (None: not in the vendor's table)."""

    @abc.abstractmethod
    def loaded_form(self, compiled: CompiledKernel, answers: ArchAnswers,
                    features: _vendors.PluginFeatures,
                    devices: GpuArch | None = None, keep_ptx_text: bool = False) -> LoadedForm:
        """How the installed jaxlib loads `compiled` on `devices` (None: on devices of the
        architecture it was compiled for, `answers.arch`): `code_for_devices` where they differ,
        else the binary as it travels in `module_image` or the `ptx` field, with the warps
        jaxlib launches.

        Raises:
          ValueError: no form of the kernel loads on `devices`, or a block jaxlib cannot launch.
        """

    def check_export(self, features: _vendors.PluginFeatures) -> None:
        """Raises ValueError, naming the setting and the fix, where a lowering for `jax.export`
        would carry what only this process can load (a path into its temporary folder)."""
        del features

    @abc.abstractmethod
    def knows_arch(self, arch: str) -> bool:
        """Whether the installed Triton can compile for `arch` (canonical name)."""

    @abc.abstractmethod
    def known_archs(self) -> tuple[str, ...]:
        """The architectures the installed Triton can compile for, for messages."""

    def code_for_devices(self, compiled: CompiledKernel, arch: GpuArch,
                         devices: GpuArch) -> tuple[str, int]:
        """The `ptx` field and compute capability that load `compiled` (built for `arch`) on
        devices of another architecture, `devices`.

        Raises:
          ValueError: no form of the kernel loads there (a binary runs on its own architecture
            only), naming both architectures and the fix.
        """
        raise ValueError(
            f"Kernel {compiled.name} is compiled for {arch.arch} (from {arch.source}), but "
            f"the computation runs on {devices.arch} devices (from {devices.source}), where a "
            f"binary for {arch.arch} cannot load. Compile for {devices.arch}.")

    def check_launch(self, arch: GpuArch, num_ctas: int) -> None:
        """Raises if the target cannot launch clusters of `num_ctas` CTAs."""
        del arch, num_ctas


# Triton's fp8 types ("fp8e4nv", ...) its compiler takes, by `GPUTarget` (`Backend.answers`).
_FP8_TYPES: dict[Any, tuple[str, ...]] = {}
# Options for a `parse_options` call that only reads what the backend fills in: Triton 3.9 warns
# (TRITON_DEFAULT_FP_FUSION) when not told whether to fuse, and every compile says so itself.
_READ_ONLY_OPTIONS = (("enable_fp_fusion", True),)
