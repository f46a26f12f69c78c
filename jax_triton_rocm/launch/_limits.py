"""Launch limits per target, checked at lowering instead of failing at launch.

jaxlib launches what it is given: a block of more threads than the GPU allows, or more shared
memory (LDS on AMD) than a block may have, fails only when the kernel first runs, far from the
call. The lowering checks both against the target's limits. A plain call that breaks one gets a
ValueError naming the setting, the target and the limit; an autotuned call drops the configs that
break one (as Triton's autotuner drops configs that fail to compile) and fails only when none is
left.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from jax_triton_rocm.launch._grid import MAX_GRID_SIZE

logger = logging.getLogger("jax_triton_rocm")

T = TypeVar("T")

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


def check_launch_features(compiled: Any) -> None:
    """Raises if a compiled kernel (`compile._compile.CompiledKernel`) needs a launch feature
    that neither jaxlib's Triton call nor XLA's provides."""
    if compiled.profile_scratch_size:
        raise NotImplementedError(
            f"Kernel {compiled.name} was compiled with Triton's profiling instrumentation "
            f"(profile scratch of {compiled.profile_scratch_size} bytes), which jaxlib does "
            f"not allocate. Unset TRITON's instrumentation mode (TRITON_INSTRUMENTATION_MODE).")
    for flag in ("launch_cooperative_grid", "launch_pdl"):
        if compiled.metadata.get(flag):
            raise NotImplementedError(
                f"Kernel {compiled.name} needs a {flag.removeprefix('launch_')} launch, which "
                f"jaxlib's Triton launcher does not do. Compile without it.")


def keep_launchable(items: Sequence[T], problem_of: Callable[[T], str | None],
                    describe: Callable[[T], str], *, kernel: str) -> list[T]:
    """The items (one per launch config) whose `problem_of` is None.

    Raises:
      ValueError: a single item with a problem, or every item of several; names each problem.
    """
    problems = [(item, problem_of(item)) for item in items]
    kept = [item for item, problem in problems if problem is None]
    if len(items) == 1 and not kept:
        raise ValueError(f"Kernel {kernel} cannot launch: {problems[0][1]}.")
    if not kept:
        listed = "; ".join(f"config ({describe(item)}): {problem}" for item, problem in problems)
        raise ValueError(f"Kernel {kernel}: no autotune config can launch. {listed}.")
    for item, problem in problems:
        if problem is not None:
            logger.debug("jax_triton_rocm: autotune config (%s) of kernel %s dropped: %s",
                         describe(item), kernel, problem)
    return kept


def config_description(item: Any) -> str:
    """The autotune description of a config, or of the first element of a (config, ...) tuple."""
    config = item[0] if isinstance(item, tuple) else item
    return config.description
