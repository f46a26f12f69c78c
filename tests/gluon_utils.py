"""Helpers for the Gluon tests: Gluon detection, lowering capture and ELF checks."""

import importlib
import importlib.util

import jax
import pytest

import jax_triton_rocm as jtr
from tests.lowering_utils import captured_lowerings

HAS_GLUON = importlib.util.find_spec("triton.experimental.gluon") is not None
requires_gluon = pytest.mark.skipif(
    not HAS_GLUON, reason="the installed Triton has no Gluon (triton.experimental.gluon)")

# The targets CI lowers for: (platform, arch, warp size).
TARGETS = [("rocm", "gfx942", 64), ("rocm", "gfx950", 64), ("cuda", "sm_90", 32)]



def gluon_kernels():
    """The shared Gluon kernels module (tests.gluon_kernels); skips where Gluon is missing."""
    if not HAS_GLUON:
        pytest.skip("the installed Triton has no Gluon (triton.experimental.gluon)")
    return importlib.import_module("tests.gluon_kernels")


def lower_for(fn, platform, arch, *avals):
    """Lowers `fn` at `avals` for `platform` under `target_arch`; returns the one `LoweredCall`."""
    with captured_lowerings() as captured, jtr.target_arch(**{platform: arch}):
        jax.jit(fn).trace(*avals).lower(lowering_platforms=(platform,))
    assert len(captured) == 1, f"expected one kernel call, lowered {len(captured)}"
    return captured[0]


def cause_types(error: BaseException) -> list[type]:
    """The types along `error`'s chain of causes (JAX inserts its own link when lowering)."""
    types = []
    cause = error.__cause__
    while cause is not None:
        types.append(type(cause))
        cause = cause.__cause__
    return types


def device_warp_size(device) -> int:
    """The warp size of a JAX GPU device: 64 on AMD gfx9xx (CDNA), else 32."""
    if device.platform != "rocm":
        return 32
    from jax_triton_rocm import _hip

    return _hip.warp_size(str(device.compute_capability).split(":")[0])
