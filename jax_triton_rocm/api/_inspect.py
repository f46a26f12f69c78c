"""The custom calls the package emits, the `jax.export` checks that let them through (one
`DisabledSafetyCheck.custom_call` per target), and the Triton kernel calls of a lowering.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jax_triton_rocm.base import _compat
from jax_triton_rocm.base._compat import FFI_CALL_NAME, LEGACY_CALL_NAME, XLA_TRITON_CALL_NAME


def disabled_checks() -> list[Any]:
    """The `jax.export.DisabledSafetyCheck`s that let `jax.export` serialise any call the
    package emits: `export.export(f, disabled_checks=jtr.disabled_checks())`.

    Returns:
      One `DisabledSafetyCheck.custom_call(target)` per target in
      `CUSTOM_CALL_TARGET_NAME.targets`; add your own checks to the list as needed.
    """
    from jax import export

    return [export.DisabledSafetyCheck.custom_call(target)
            for target in CustomCallTargetName.targets]


class CustomCallTargetName(str):
    """The typed-FFI target's name as a `str`, with every target the package may emit."""

    targets: tuple[str, ...] = (FFI_CALL_NAME, LEGACY_CALL_NAME, XLA_TRITON_CALL_NAME)
    disabled_checks = staticmethod(disabled_checks)


CUSTOM_CALL_TARGET_NAME = CustomCallTargetName(FFI_CALL_NAME)
"""jax-triton 0.4's name for the custom-call target of plain calls: the string
"triton_kernel_call_ffi" (jaxlib's typed-FFI Triton call), so that
`jax.export.DisabledSafetyCheck.custom_call(CUSTOM_CALL_TARGET_NAME)` works unchanged. Its
`targets` are every target the package may emit (the legacy `triton_kernel_call` of autotuned
calls and XLA's `__gpu$xla.gpu.triton` too); `disabled_checks()` allows them all."""


@dataclasses.dataclass(frozen=True)
class EmittedCall:
    """One Triton custom call in a lowered module.

    Attributes:
      target: the custom-call target: jaxlib's ("triton_kernel_call_ffi",
        "triton_kernel_call") or XLA's own ("__gpu$xla.gpu.triton").
      typed_ffi: emitted as a typed-FFI call (its configuration in an attribute) rather than
        legacy.
      opaque: the bytes jaxlib receives (zlib-compressed proto); empty for XLA's call.
      native: XLA's call's configuration (kernel `name`, Triton `ir` bytes, `num_warps`,
        `num_stages`, `grid`, `pointers`: one per operand and result) and the call's name
        (`call_name`); None for jaxlib's.
    """

    target: str
    typed_ffi: bool
    opaque: bytes
    native: dict[str, Any] | None = None

    @property
    def message(self) -> Any:
        """The decoded `TritonAnyKernelCall` protobuf message; None for XLA's call."""
        if self.native is not None:
            return None
        from jax_triton_rocm.routes.jaxlib import _proto  # protobuf stays out of JAX's start-up

        return _proto.decode(self.opaque)

    def summary(self) -> dict[str, Any]:
        """The launch in plain Python values: kernels, grids, warps, parameters, binaries."""
        native = self.native
        if native is not None:  # XLA builds the binary: no memory, capability or binary known yet
            return {"target": self.target, "name": native.get("call_name") or native["name"],
                    "launches": [{
                        "kernel": native["name"], "config": "", "grid": native["grid"],
                        "num_warps": native["num_warps"], "shared_mem_bytes": None,
                        "compute_capability": None, "parameters": ["array"] * native["pointers"],
                        "embedded_binary_bytes": 0, "ptx_field": "",
                        "ir_bytes": len(native["ir"])}]}
        message = self.message
        configs = ([(c.kernel_call, c.description) for c in message.autotuned_kernel_call.configs]
                   if message.HasField("autotuned_kernel_call") else [(message.kernel_call, "")])
        launches = []
        for call, description in configs:
            kernel = call.kernel
            image = kernel.module_image.object_file if kernel.HasField("module_image") else b""
            launches.append({
                "kernel": kernel.kernel_name,
                "config": description,
                "grid": (call.grid_0, call.grid_1, call.grid_2),
                "num_warps": kernel.num_warps,
                "shared_mem_bytes": kernel.shared_mem_bytes,
                "compute_capability": kernel.compute_capability,
                "parameters": [p.WhichOneof("value") for p in call.parameters],
                "embedded_binary_bytes": len(image),
                "ptx_field": kernel.ptx if len(kernel.ptx) < 200 else f"<{len(kernel.ptx)} chars>",
            })
        return {"target": self.target, "name": message.name, "launches": launches}


def _native_config(op: Any) -> dict[str, Any]:
    from jax._src.lib.mlir import ir

    config = ir.DictAttr(op.attributes["mhlo.backend_config"])
    number = {key: ir.IntegerAttr(config[key]).value
              for key in ("num_warps", "num_stages", "grid_x", "grid_y", "grid_z")}
    # The call's name, which `_xla_native.emit` writes as a frontend attribute.
    names = (ir.DictAttr(op.attributes["mhlo.frontend_attributes"])
             if "mhlo.frontend_attributes" in op.attributes else {})
    name_key = _compat.XLA_CALL_NAME_ATTRIBUTE
    return {"name": ir.StringAttr(config["name"]).value,
            "call_name": ir.StringAttr(names[name_key]).value if name_key in names else "",
            "ir": ir.StringAttr(config["ir"]).value_bytes,
            "num_warps": number["num_warps"], "num_stages": number["num_stages"],
            "grid": (number["grid_x"], number["grid_y"], number["grid_z"]),
            "pointers": len(op.operands) + len(op.results)}


def kernel_calls(lowered: Any) -> list[EmittedCall]:
    """The Triton kernel calls in a `jax.stages.Lowered`, in program order: jaxlib's and XLA's
    own (the route each call took).

    Example::

        with jax_triton_rocm.target_arch(rocm="gfx942"):
            lowered = jax.jit(f).trace(x).lower(lowering_platforms=("rocm",))
        for call in jax_triton_rocm.kernel_calls(lowered):
            print(call.summary())

    Raises:
      TypeError: `lowered` is not a `jax.stages.Lowered` (a `jax.jit(f).trace(...).lower()`).
    """
    from jax._src.lib.mlir import ir

    if not callable(getattr(lowered, "compiler_ir", None)):
        raise TypeError(f"kernel_calls(lowered={lowered!r:.80}) takes a jax.stages.Lowered, e.g. "
                        f"jax.jit(f).trace(x).lower(lowering_platforms=('rocm',)); got a "
                        f"{type(lowered).__name__}.")
    module = lowered.compiler_ir("stablehlo")
    calls = []

    def keep(op: Any) -> Any:
        target = (ir.StringAttr(op.attributes["call_target_name"]).value
                  if op.name == "stablehlo.custom_call" else "")
        if target == XLA_TRITON_CALL_NAME:
            calls.append(EmittedCall(target, True, b"", _native_config(op)))
        elif target.startswith("triton_kernel_call"):
            typed_ffi = "mhlo.backend_config" in op.attributes  # how JAX writes typed FFI
            opaque = (ir.DictAttr(op.attributes["mhlo.backend_config"])["opaque"] if typed_ffi
                      else op.attributes["backend_config"])
            calls.append(EmittedCall(target, typed_ffi, ir.StringAttr(opaque).value_bytes))
        return ir.WalkResult.ADVANCE

    with module.context:
        module.operation.walk(keep, ir.WalkOrder.PRE_ORDER)
    return calls
