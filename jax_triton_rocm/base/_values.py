"""Checks of user-given values (compile options, launch settings, grids, output indices), each
raised where the value is read, so a mistake never reaches Triton or jaxlib, where it would fail
far from its cause or pass silently; and frozen copies (`replaced`), which every layer makes.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np


def launch_settings(num_warps: Any, num_stages: Any, num_ctas: Any, *, caller: str = "",
                    where: str = "") -> None:
    """ValueError unless each launch setting is None or a positive int, `num_warps` a power of
    two; `caller` starts the message, `where` tells where the value came from."""
    at = f" {where}" if where else ""
    for what, value in (("num_warps", num_warps), ("num_stages", num_stages),
                        ("num_ctas", num_ctas)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{caller}{what}={value!r}{at} must be a positive int or None (the "
                             f"target's Triton default).")
        if what == "num_warps" and value & (value - 1):
            raise ValueError(f"{caller}{what}={value!r}{at} must be a power of two (1, 2, 4, 8, "
                             f"...), as Triton requires.")


def replaced(instance: Any, **fields: Any) -> Any:
    """`dataclasses.replace` without `__init__`/`__post_init__` (a caller recomputes what those
    derive), in a fifth of the time, for copies made at every trace."""
    copy = object.__new__(type(instance))
    copy.__dict__.update(instance.__dict__)
    copy.__dict__.update(fields)
    return copy


def is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


# Each vendor compile option's values, as Triton's backends accept them (HIPOptions,
# CUDAOptions): (allowed values or an int range, what they mean).
_OPTION_VALUES: dict[str, tuple[tuple[int, ...] | range, str]] = {
    # amdgpu-waves-per-eu: 0 gives no hint; otherwise waves per SIMD, at most 20 on any AMD GPU.
    "waves_per_eu": (range(0, 21), "an int from 0 (no hint) to 20"),
    # The MFMA/WMMA shape Triton's AMD backend may force (0 lets it choose).
    "matrix_instr_nonkdim": ((0, 4, 16, 32), "one of 0 (chosen by Triton), 4, 16, 32"),
    # K elements packed per MFMA operand load.
    "kpack": ((1, 2), "one of 1, 2"),
    # PTX .maxnreg: registers per thread, at most 255 on every NVIDIA GPU.
    "maxnreg": (range(1, 256), "an int from 1 to 255 (registers per thread), or None"),
}


def compile_options(options: Mapping[str, Any], *, where: str = "",
                    caller: str = "") -> dict[str, Any]:
    """Vendor compile options checked against what Triton's backend accepts, as ints or None."""
    at, checked = f" {where}" if where else "", {}
    for name, value in options.items():
        allowed, text = _OPTION_VALUES[name]
        if value is not None and not is_int(value):
            raise TypeError(f"{caller}{name}={value!r}{at} must be {text}; got "
                            f"{type(value).__name__}.")
        if value is not None and int(value) not in allowed:
            raise ValueError(f"{caller}{name}={value!r}{at} must be {text}, as Triton's backend "
                             f"accepts.")
        checked[name] = None if value is None else int(value)
    return checked


def output_indices(indices: Any, n_outs: int, *, what: str,
                   an_output: str = "an output") -> tuple[int, ...]:
    """Output indices (`zeroed_outputs`, or what a callable one returned), checked and sorted;
    `an_output`: what an output is called where the user is ("a result" of a primitive)."""
    if isinstance(indices, (str, bytes)) or not isinstance(indices, (Sequence, set, frozenset)):
        raise TypeError(f"{what}={indices!r} must be a sequence of {an_output.split()[-1]} "
                        f"indices (e.g. (0,)), or a callable of the metaparameters returning one.")
    for idx in indices:
        if not is_int(idx) or not 0 <= idx < n_outs:
            raise ValueError(f"{what}={indices!r}: {idx!r} is not {an_output} index "
                             f"(0..{n_outs - 1}).")
    return tuple(sorted({int(i) for i in indices}))


def cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


# No GPU launches more programs than this along one grid axis (CUDA's x limit; HIP's on every
# axis); jaxlib's kernel call would take up to 2**32 - 1 and launch nothing sensible.
MAX_GRID_SIZE = 2**31 - 1


def normalize_grid(grid: Any, *, what: str = "grid") -> tuple[int, int, int]:
    """A grid as three ints, each from 0 to `MAX_GRID_SIZE`; a 0 launches no program (the
    launch is skipped, as Triton's launcher skips it: `plan._plan.skipped`)."""
    if isinstance(grid, (int, np.integer)) and not isinstance(grid, bool):
        dims = (int(grid),)
    elif isinstance(grid, Sequence) and not isinstance(grid, str):
        dims = tuple(grid)
    else:
        raise TypeError(f"{what}={grid!r} must be an int, a tuple of 1-3 ints, or a callable "
                        f"taking the metaparameters and returning one of those.")
    if not dims:
        raise ValueError(f"{what}={grid!r} is empty; give 1-3 sizes, e.g. grid=(n_blocks,).")
    if len(dims) > 3:
        raise ValueError(f"{what}={grid!r} has {len(dims)} dimensions; GPUs launch at most 3.")
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{what}={grid!r}: every size must be a Python int, got "
                            f"{type(d).__name__} {d!r}. Compute the grid from static shapes "
                            f"(x.shape), not from traced values.")
        if d < 0:
            raise ValueError(f"{what}={grid!r}: a size is negative ({d}); give each size as "
                             f"a number of programs, 0 or more (e.g. triton.cdiv(n, BLOCK)).")
        if d > MAX_GRID_SIZE:
            raise ValueError(f"{what}={grid!r}: {d} programs along one axis is more than any GPU "
                             f"launches ({MAX_GRID_SIZE}); give each program more work (a "
                             f"larger block), or spread the grid over more axes.")
    return tuple(map(int, dims)) + (1,) * (3 - len(dims))


# A grid as users give it: an int, a tuple of 1-3 ints, or a callable of the metaparameters.
Grid = int | tuple[int, ...] | Callable[[dict[str, Any]], Any]


@dataclasses.dataclass(frozen=True)
class MetaGrid:
    """A grid function of the metaparameters, called per launch config; equal as its function."""

    fn: Callable[[dict[str, Any]], Any]

    def __call__(self, meta: dict[str, Any]) -> Any:
        return self.fn(meta)


def grid_value(grid: Any) -> tuple[int, int, int] | MetaGrid:
    """A grid as given: a callable as a `MetaGrid`, anything else as three ints."""
    if callable(grid):  # a MetaGrid is
        return grid if isinstance(grid, MetaGrid) else MetaGrid(grid)
    return normalize_grid(grid)
