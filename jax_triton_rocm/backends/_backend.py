"""What the shared lowering asks a vendor: the interface every backend module implements.

The lowering (`routes.jaxlib._jaxlib_call`, `routes.xla._xla_native`) drives; a backend
(`_cuda.BACKEND`, `hip._hip.BACKEND`) only answers:
which Triton target and compiler backend, which of the call's options it compiles with, how the
compiled binary reaches its jaxlib plugin, and what a block may use. A backend never calls into
the lowering, and the lowering never asks which vendor it talks to.

Launch limits per target (`LaunchLimits`), checked at lowering instead of failing at launch.

jaxlib launches what it is given: a block of more threads than the GPU allows, or more shared
memory (LDS on AMD) than a block may have, fails only when the kernel first runs, far from the
call. The lowering checks both against the target's limits. A plain call that breaks one gets a
ValueError naming the setting, the target and the limit; an autotuned call drops the configs that
break one (as Triton's autotuner drops configs that fail to compile) and fails only when none is
left.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.base import _compat, _vendors
from jax_triton_rocm.compile._compile import CompiledKernel
from jax_triton_rocm.spec._spec import MAX_GRID_SIZE, KernelCallSpec

if TYPE_CHECKING:  # the plan asks the backend, and hands it its launches
    from jax._src.interpreters.mlir import LoweringRuleContext
    from jax_triton_rocm.plan._plan import Launch


MAX_THREADS_PER_BLOCK = 1024  # every NVIDIA GPU since sm_20 and every AMD GPU Triton targets


@dataclasses.dataclass(frozen=True)
class LaunchLimits:
    """What one block may use on a target.

    Attributes:
      arch: the target ("sm_90", "gfx942"), for messages.
      warp_size: threads per warp (wavefront) the kernel is compiled for.
      max_threads: threads per block.
      max_shared_bytes: dynamic shared memory (LDS) per block, or None where the target is not
        in the vendor's table (then only the launch checks it).
      max_grid: programs along each grid axis (x, y, z).
      max_threads_x: threads along the grid's x axis (programs times the block's threads), or
        None where only `max_grid` bounds it. HIP counts them in 32 bits and refuses more at
        launch.
    """

    arch: str
    warp_size: int
    max_threads: int = MAX_THREADS_PER_BLOCK
    max_shared_bytes: int | None = None
    max_grid: tuple[int, int, int] = (MAX_GRID_SIZE,) * 3
    max_threads_x: int | None = None

    def grid_problem(self, grid: tuple[int, int, int], num_warps: int) -> str | None:
        """Why a launch of `grid` programs of `num_warps` warps each cannot run here, or None."""
        for axis, (size, limit) in enumerate(zip(grid, self.max_grid)):
            if size > limit:
                return (f"dimension {axis} has {size} programs and {self.arch} launches at most "
                        f"{limit} along it; put the large size on dimension 0 (up to "
                        f"{self.max_grid[0]}) or give each program more work")
        threads = num_warps * self.warp_size
        if self.max_threads_x is not None and grid[0] * threads > self.max_threads_x:
            return (f"dimension 0 has {grid[0]} programs of {threads} threads ({num_warps} warps "
                    f"of {self.warp_size}), {grid[0] * threads} threads in all, and {self.arch} "
                    f"launches at most {self.max_threads_x} threads along it; give each program "
                    f"more work (at most {self.max_threads_x // threads} programs of this size), "
                    f"or move programs to dimension 1 (up to {self.max_grid[1]})")
        return None

    def warps_problem(self, num_warps: int) -> str | None:
        """Why a block of `num_warps` warps cannot launch here, or None."""
        threads = num_warps * self.warp_size
        if threads <= self.max_threads:
            return None
        return (f"num_warps={num_warps} makes blocks of {threads} threads ({num_warps} warps of "
                f"{self.warp_size}) on {self.arch}, whose limit is {self.max_threads}; use "
                f"num_warps={self.max_threads // self.warp_size} or fewer")

    def shared_problem(self, shared_bytes: int) -> str | None:
        """Why a block needing `shared_bytes` of shared memory cannot launch here, or None."""
        if self.max_shared_bytes is None or shared_bytes <= self.max_shared_bytes:
            return None
        return (f"the kernel needs {shared_bytes} bytes of shared memory per block, and "
                f"{self.arch} allows {self.max_shared_bytes}; use smaller blocks or fewer "
                f"num_stages")


@dataclasses.dataclass(frozen=True)
class Target:
    """A compile target: platform ("cuda"/"rocm"), arch ("sm_90", "gfx942") and its source."""

    platform: str
    arch: str
    source: str


class Backend(abc.ABC):
    """One vendor's answers. The abstract methods are the ones each vendor defines.

    Attributes:
      platform: JAX's platform name ("cuda", "rocm").
      binary_key, asm_key: Triton's names for the compiled binary and its assembly.
      compile_options: the `triton_call` compile options this vendor passes to Triton.
      xla_call_unproven: why the automatic route keeps jaxlib's Triton call on this vendor's
        GPUs where a call fits XLA's; None where XLA's is the default (`routes._primitive`).
    """

    platform: str = ""
    binary_key: str = ""
    asm_key: str = ""
    compile_options: tuple[str, ...] = ()
    xla_call_unproven: str | None = None
    _option_names: frozenset[str] | None = None

    @abc.abstractmethod
    def triton_target(self, target: Target) -> Any:
        """Triton's `GPUTarget` for `target` (architecture and warp size)."""

    @abc.abstractmethod
    def triton_backend(self) -> type:
        """Triton's compiler backend class (it parses specialisation attributes)."""

    @abc.abstractmethod
    def capability(self, target: Target) -> int:
        """The kernel's `compute_capability` field for `target`, as jaxlib reads it."""

    @abc.abstractmethod
    def launch_limits(self, target: Target) -> LaunchLimits:
        """What one block may use on `target` (threads, shared memory)."""

    @abc.abstractmethod
    def embeds_binary(self, features: _compat.PluginFeatures) -> bool:
        """Whether the binary travels in `module_image` (else the `ptx` field carries it)."""

    @abc.abstractmethod
    def ptx_field(self, compiled: CompiledKernel) -> str:
        """The `ptx` field of a kernel whose binary is not embedded (PTX text, a file path)."""

    @abc.abstractmethod
    def knows_arch(self, arch: str) -> bool:
        """Whether the installed Triton can compile for `arch` (canonical name)."""

    @abc.abstractmethod
    def known_archs(self) -> tuple[str, ...]:
        """The architectures the installed Triton can compile for, for messages."""

    @functools.lru_cache(maxsize=None)  # one entry per backend and target compiled for
    def fp8_types(self, target: Target) -> tuple[str, ...]:
        """Triton's fp8 types ("fp8e4nv", ...) its compiler takes for `target`: the
        `supported_fp8_dtypes` Triton's backend fills in."""
        from triton.compiler import make_backend

        return tuple(make_backend(self.triton_target(target))
                     .parse_options(dict(_READ_ONLY_OPTIONS)).supported_fp8_dtypes)

    def code_for_devices(self, compiled: CompiledKernel, target: Target,
                         devices: Target) -> tuple[str, int]:
        """The `ptx` field and compute capability that load `compiled` (built for `target`) on
        devices of another architecture, `devices`.

        Raises:
          ValueError: no form of the kernel loads there (a binary runs on its own architecture
            only), naming both architectures and the fix.
        """
        raise ValueError(
            f"Kernel {compiled.name} is compiled for {target.arch} (from {target.source}), but "
            f"the computation runs on {devices.arch} devices (from {devices.source}), where a "
            f"binary for {target.arch} cannot load. Compile for {devices.arch}.")

    def call_target(self, spec: KernelCallSpec) -> Target | None:
        """A target the call names through a vendor keyword (None: the usual rules decide)."""
        del spec
        return None

    def check_launch(self, target: Target, num_ctas: int) -> None:
        """Raises if the target cannot launch clusters of `num_ctas` CTAs."""
        del target, num_ctas

    def triton_options(self, launch: Launch, spec: KernelCallSpec) -> dict[str, Any]:
        """Options for `triton.compile`: the common ones and this vendor's own where set.

        Other vendors' options are left out, as Triton's backends do.
        """
        config = launch.config
        options: dict[str, Any] = {
            "num_warps": launch.num_warps,
            "num_ctas": config.num_ctas,
            "enable_fp_fusion": spec.enable_fp_fusion,
            "debug": spec.debug,
        }
        if config.num_stages is not None:
            options["num_stages"] = config.num_stages
        options.update({name: config.options[name] for name in self.compile_options
                        if config.options.get(name) is not None})
        names = self.triton_option_names() if spec.backend_options else ()
        options.update({name: value for name, value in spec.backend_options if name in names})
        return options

    def triton_option_names(self) -> frozenset[str]:
        """The fields of this vendor's Triton options class (`CUDAOptions`, `HIPOptions`): what
        `triton_call(backend_options=...)` may set for this vendor."""
        if self._option_names is None:
            example = Target(self.platform, _vendors.vendor(self.platform).example_arch, "")
            options = self.triton_backend()(self.triton_target(example)).parse_options(
                dict(_READ_ONLY_OPTIONS))
            self._option_names = frozenset(field.name for field in dataclasses.fields(options))
        return self._option_names

    def launch_warps(self, compiled: CompiledKernel) -> int:
        """The `num_warps` jaxlib needs to launch the block `compiled` was built for."""
        return compiled.num_warps

    def lowering_settings(self) -> tuple:
        """What this vendor reads from the environment when lowering (part of the memo's key)."""
        return ()

    def after_encode(self, lowered: Any, ctx: LoweringRuleContext,
                     emit: Callable[..., Any]) -> None:
        """Runs once a call is encoded, before it is emitted (ROCm's prewarm); `emit(ctx,
        operands, lowered)` emits an encoded call, so a backend never imports the lowering."""
        del lowered, ctx, emit


# Options for a `parse_options` call that only reads what the backend fills in: Triton 3.9 warns
# (TRITON_DEFAULT_FP_FUSION) when not told whether to fuse, and every compile says so itself.
_READ_ONLY_OPTIONS = (("enable_fp_fusion", True),)
