"""Reading back the Triton kernel calls a lowered computation carries (no GPU needed)."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class EmittedCall:
    """One Triton custom call in a lowered module.

    Attributes:
      target: the custom-call target ("triton_kernel_call_ffi" or "triton_kernel_call").
      typed_ffi: emitted as a typed-FFI call (opaque in an attribute) rather than legacy.
      opaque: the bytes jaxlib receives (zlib-compressed proto).
    """

    target: str
    typed_ffi: bool
    opaque: bytes

    @property
    def message(self) -> Any:
        """The decoded `TritonAnyKernelCall` protobuf message."""
        from jax_triton_rocm.lowering import _proto  # protobuf stays out of JAX's start-up

        return _proto.decode(self.opaque)

    def summary(self) -> dict[str, Any]:
        """The launch in plain Python values: kernels, grids, warps, parameters, binaries."""
        message = self.message
        if message.HasField("autotuned_kernel_call"):
            configs = [(c.kernel_call, c.description)
                       for c in message.autotuned_kernel_call.configs]
        else:
            configs = [(message.kernel_call, "")]
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


def _walk(operation: Any):
    for region in operation.regions:
        for block in region.blocks:
            for op in block.operations:
                yield op
                yield from _walk(op)


def kernel_calls(lowered: Any) -> list[EmittedCall]:
    """The Triton kernel calls in a `jax.stages.Lowered`, in program order.

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
            calls.append(EmittedCall(target, typed_ffi, opaque))
    return calls
