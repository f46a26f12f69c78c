"""Helpers for the Gluon tests: Gluon detection, lowering capture and ELF checks."""

import contextlib
import importlib
import importlib.util
import struct

import jax
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm import _lowering

HAS_GLUON = importlib.util.find_spec("triton.experimental.gluon") is not None
requires_gluon = pytest.mark.skipif(
    not HAS_GLUON, reason="the installed Triton has no Gluon (triton.experimental.gluon)")

# The targets CI lowers for: (platform, arch, warp size).
TARGETS = [("rocm", "gfx942", 64), ("rocm", "gfx950", 64), ("cuda", "sm_90", 32)]

EM_CUDA = 190
EM_AMDGPU = 224
# EF_AMDGPU_MACH values (the low byte of an HSACO's e_flags).
AMDGPU_MACH = {"gfx942": 0x4C, "gfx950": 0x4F}


def gluon_kernels():
    """The shared Gluon kernels module (tests.gluon_kernels); skips where Gluon is missing."""
    if not HAS_GLUON:
        pytest.skip("the installed Triton has no Gluon (triton.experimental.gluon)")
    return importlib.import_module("tests.gluon_kernels")


@contextlib.contextmanager
def capture_lowerings():
    """Records every `LoweredCall` that the lowering emits while in force; yields the list."""
    captured = []
    emit = _lowering.emit

    def recording_emit(ctx, operands, lowered, aliases):
        captured.append(lowered)
        return emit(ctx, operands, lowered, aliases)

    _lowering.emit = recording_emit
    try:
        yield captured
    finally:
        _lowering.emit = emit


def lower_for(fn, platform, arch, *avals):
    """Lowers `fn` at `avals` for `platform` under `target_arch`; returns the one `LoweredCall`."""
    with capture_lowerings() as captured, jtr.target_arch(**{platform: arch}):
        jax.jit(fn).trace(*avals).lower(lowering_platforms=(platform,))
    assert len(captured) == 1, f"expected one kernel call, lowered {len(captured)}"
    return captured[0]


def elf_machine(binary: bytes) -> int:
    """An ELF's e_machine (190: CUDA, 224: AMDGPU); fails if `binary` is not an ELF."""
    assert binary[:4] == b"\x7fELF", f"not an ELF: starts with {binary[:4]!r}"
    return struct.unpack_from("<H", binary, 18)[0]


def hsaco_mach(binary: bytes) -> int:
    """An HSACO's EF_AMDGPU_MACH (the low byte of e_flags: 0x4c gfx942, 0x4f gfx950)."""
    return struct.unpack_from("<I", binary, 48)[0] & 0xFF


def cubin_sm(binary: bytes) -> int:
    """A CUBIN's SM version (90 for sm_90), from e_flags in either CUDA ELF ABI."""
    flags = struct.unpack_from("<I", binary, 48)[0]
    abi_version = binary[8]
    return (flags >> 8) & 0xFF if abi_version >= 8 else flags & 0xFF


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
