"""`target_arch`: name the GPU architectures lowerings compile for, instead of the devices', in
a JAX config state (`routes._arch`) that JAX's trace and jit cache keys include.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from jax_triton_rocm.backends._vendors import GPU_PLATFORMS, normalize_arch
from jax_triton_rocm.checks import _checker
from jax_triton_rocm.routes import _arch, _primitive


@contextlib.contextmanager
def target_arch(*, cuda: Any = None, rocm: Any = None,
                **others: Any) -> Iterator[dict[str, str]]:
    """Makes lowerings on this thread compile for the named architectures instead of a device's.

    For machines without the GPU (CI, export, ahead-of-time compilation)::

        with jax_triton_rocm.target_arch(cuda="sm_90", rocm="gfx942"):
            jax.jit(f).trace(x).lower(lowering_platforms=("rocm",))

    Args:
      cuda: a CUDA architecture: 90, "9.0", "sm_90".
      rocm: an AMD architecture: "gfx942", "gfx950", "gfx90a".

    Also registers the lowering rules for the named platforms, so cross-lowering works on a
    machine without their jaxlib plugin. Yields the architectures in force.

    Raises:
      TypeError: a keyword that names no GPU platform of the package (`others`).
      ValueError: an architecture that is not one, or that the installed Triton cannot compile
        for; or no architecture named.
    """
    if others:
        raise TypeError(
            f"target_arch() got {', '.join(f'{k}={v!r}' for k, v in others.items())}: "
            f"{', '.join(map(repr, others))} is no GPU platform this package lowers for"
            f"{_checker.close_names(others, GPU_PLATFORMS)}. Name architectures for "
            f"{' and '.join(f'{p}=' for p in GPU_PLATFORMS)} only, e.g. "
            f"target_arch(cuda='sm_90').")
    named = {platform: _arch.check_arch(platform, normalize_arch(platform, given, what=platform),
                                        given=given, what=platform)
             for platform, given in (("cuda", cuda), ("rocm", rocm)) if given is not None}
    if not named:
        raise ValueError("target_arch() needs cuda=... and/or rocm=..., e.g. "
                         "target_arch(cuda='sm_90') or target_arch(rocm='gfx942').")
    _primitive.register(platforms=tuple(named), explicit=True)
    with _arch.named_in_force(named) as merged:
        yield merged
