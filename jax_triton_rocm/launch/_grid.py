"""Launch grids: a call's grid, given as an int or a tuple of 1-3 sizes, checked and padded to 3.

Per-target limits (CUDA's 65535 on y and z) are checked at lowering, where the target is known
(`_limits.LaunchLimits.grid_problem`); this module checks what holds on every GPU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

# No GPU launches more programs than this along one grid axis (CUDA's x limit; HIP's on every
# axis); jaxlib's kernel call would take up to 2**32 - 1 and launch nothing sensible.
MAX_GRID_SIZE = 2**31 - 1


def normalize_grid(grid: Any, *, what: str = "grid") -> tuple[int, int, int]:
    """A grid as three positive ints, each at most `MAX_GRID_SIZE`.

    Per-target limits (CUDA's 65535 on y and z) are checked at lowering, where the target is
    known (`_limits.LaunchLimits.grid_problem`).

    Raises:
      ValueError / TypeError: naming `what` and the value: empty, more than 3 dimensions, a
        non-integer, a non-positive or too large size.
    """
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
        if d <= 0:
            raise ValueError(f"{what}={grid!r}: every size must be positive (got {d}). "
                             f"An empty launch has nothing to do; skip the call instead.")
        if d > MAX_GRID_SIZE:
            raise ValueError(f"{what}={grid!r}: {d} programs along one axis is more than any GPU "
                             f"launches ({MAX_GRID_SIZE}); give each program more work (a "
                             f"larger block), or spread the grid over more axes.")
    return tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
