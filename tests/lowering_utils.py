"""Lowering for a platform without its GPU, and reading back what the lowering emitted."""

from __future__ import annotations

import dataclasses

import jax
from jax._src.lib.mlir import ir

import jax_triton_rocm as jtr
from jax_triton_rocm import _proto


@dataclasses.dataclass(frozen=True)
class EmittedCall:
    """One Triton custom call found in a lowered module."""

    target: str
    opaque: bytes
    typed_ffi: bool

    @property
    def message(self):
        """The decoded `TritonAnyKernelCall`."""
        return _proto.decode(self.opaque)


def _walk(operation):
    for region in operation.regions:
        for block in region.blocks:
            for op in block.operations:
                yield op
                yield from _walk(op)


def emitted_calls(lowered) -> list[EmittedCall]:
    """The Triton custom calls in a `jax.stages.Lowered`, in program order."""
    module = lowered.compiler_ir("stablehlo")
    calls = []
    with module.context:
        for op in _walk(module.operation):
            if op.name != "stablehlo.custom_call":
                continue
            target = ir.StringAttr(op.attributes["call_target_name"]).value
            if not target.startswith("triton_kernel_call"):
                continue
            typed_ffi = "mhlo.backend_config" in op.attributes  # how JAX writes typed-FFI calls
            if typed_ffi:
                config = ir.DictAttr(op.attributes["mhlo.backend_config"])
                opaque = ir.StringAttr(config["opaque"]).value_bytes
            else:
                opaque = ir.StringAttr(op.attributes["backend_config"]).value_bytes
            calls.append(EmittedCall(target, opaque, typed_ffi))
    return calls


def lower_for(fn, *args, platform: str, arch=None):
    """Lowers `fn(*args)` for `platform` under `target_arch`, on a machine without that GPU.

    `args` may be arrays or `jax.ShapeDtypeStruct`s.
    """
    if arch is None:
        arch = {"cuda": "sm_90", "rocm": "gfx942"}[platform]
    with jtr.target_arch(**{platform: arch}):
        return jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,))


def lower_one(fn, *args, platform: str, arch=None) -> EmittedCall:
    """Lowers and returns the single Triton custom call the module must contain."""
    calls = emitted_calls(lower_for(fn, *args, platform=platform, arch=arch))
    assert len(calls) == 1, f"expected one Triton custom call, found {len(calls)}"
    return calls[0]


def spec(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype)
