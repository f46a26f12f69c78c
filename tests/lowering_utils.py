"""Lowering for a platform without its GPU, and reading back what the lowering emitted."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax

import jax_triton_rocm as jtr
from jax_triton_rocm import _lowering


def emitted_calls(lowered):
    """The Triton custom calls in a `jax.stages.Lowered`, in program order."""
    return jtr.kernel_calls(lowered)


@contextlib.contextmanager
def captured_lowerings() -> Iterator[list[_lowering.LoweredCall]]:
    """Records every `LoweredCall` the lowering emits while in force (the MLIR is still emitted)."""
    captured: list[_lowering.LoweredCall] = []
    emit = _lowering.emit

    def recording_emit(ctx, operands, lowered):
        captured.append(lowered)
        return emit(ctx, operands, lowered)

    _lowering.emit = recording_emit
    try:
        yield captured
    finally:
        _lowering.emit = emit


def lower_for(fn, *args, platform: str, arch=None):
    """Lowers `fn(*args)` for `platform` under `target_arch`, on a machine without that GPU.

    `args` may be arrays or `jax.ShapeDtypeStruct`s.
    """
    if arch is None:
        arch = {"cuda": "sm_90", "rocm": "gfx942"}[platform]
    with jtr.target_arch(**{platform: arch}):
        return jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,))


def lower_one(fn, *args, platform: str, arch=None) -> jtr.EmittedCall:
    """Lowers and returns the single Triton custom call the module must contain."""
    calls = emitted_calls(lower_for(fn, *args, platform=platform, arch=arch))
    assert len(calls) == 1, f"expected one Triton custom call, found {len(calls)}"
    return calls[0]


def spec(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)
