"""jaxlib's Triton kernel-call proto (`jaxlib/gpu/triton.proto`, package `jax_triton`): its
messages, declared field by field and built into protobuf classes at import (no protoc), so the
package relies on no arity of jaxlib's nanobind constructors and can write fields they lack
(`TritonKernel.module_image`, a TMA parameter). Field numbers are those jaxlib's `to_proto`
writes (the tests compare the two); `_proto` encodes calls with them.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto

# (name, number, type, message type or None, kind), the kind being None, "repeated", "value" (the
# oneof) or "optional".
_SCHEMA: dict[str, list[tuple]] = {
    "ModuleImageProto": [
        ("object_file", 1, _F.TYPE_BYTES, None, None),
        ("kernel_name", 2, _F.TYPE_STRING, None, None),
        ("shared_mem_bytes", 3, _F.TYPE_UINT32, None, None),
    ],
    "TritonKernel": [
        ("kernel_name", 1, _F.TYPE_STRING, None, None),
        ("num_warps", 2, _F.TYPE_UINT32, None, None),
        ("shared_mem_bytes", 3, _F.TYPE_UINT32, None, None),
        ("ptx", 4, _F.TYPE_STRING, None, None),
        ("ttir", 5, _F.TYPE_STRING, None, None),
        ("compute_capability", 6, _F.TYPE_UINT32, None, None),
        ("num_ctas", 10, _F.TYPE_UINT32, None, None),
        ("module_image", 11, _F.TYPE_MESSAGE, "ModuleImageProto", None),
        ("global_scratch_size", 12, _F.TYPE_UINT64, None, "optional"),
        ("global_scratch_align", 13, _F.TYPE_UINT64, None, "optional"),
    ],
    "ArrayParameter": [
        ("bytes_to_zero", 1, _F.TYPE_UINT64, None, None),
        ("ptr_divisibility", 2, _F.TYPE_UINT64, None, None),
    ],
    "Parameter": [
        ("array", 1, _F.TYPE_MESSAGE, "ArrayParameter", "value"),
        ("bool", 2, _F.TYPE_BOOL, None, "value"),
        ("i32", 3, _F.TYPE_INT32, None, "value"),
        ("u32", 4, _F.TYPE_UINT32, None, "value"),
        ("i64", 5, _F.TYPE_INT64, None, "value"),
        ("u64", 6, _F.TYPE_UINT64, None, "value"),
        ("f32", 7, _F.TYPE_FLOAT, None, "value"),
        ("f64", 8, _F.TYPE_DOUBLE, None, "value"),
        ("tensor_descriptor", 9, _F.TYPE_MESSAGE, "TensorDescriptorParameter", "value"),
    ],
    "TensorDescriptorParameter": [("nvidia", 1, _F.TYPE_MESSAGE, "NvidiaTensorDescriptor", None)],
    "NvidiaTensorDescriptor": [
        ("elem_type", 1, _F.TYPE_UINT32, None, None), ("swizzle", 2, _F.TYPE_UINT32, None, None),
        ("shape", 3, _F.TYPE_UINT64, None, "repeated"),
        ("strides", 4, _F.TYPE_UINT64, None, "repeated"),
        ("block_shape", 5, _F.TYPE_UINT32, None, "repeated"),
        ("oob_fill", 6, _F.TYPE_UINT32, None, None),
    ],
    "TritonKernelCall": [
        ("kernel", 1, _F.TYPE_MESSAGE, "TritonKernel", None),
        ("grid_0", 2, _F.TYPE_UINT32, None, None),
        ("grid_1", 3, _F.TYPE_UINT32, None, None),
        ("grid_2", 4, _F.TYPE_UINT32, None, None),
        ("parameters", 5, _F.TYPE_MESSAGE, "Parameter", "repeated"),
    ],
    "AutotuneConfig": [
        ("kernel_call", 1, _F.TYPE_MESSAGE, "TritonKernelCall", None),
        ("description", 2, _F.TYPE_STRING, None, None),
    ],
    "InputOutputAlias": [
        ("input_buffer_idx", 1, _F.TYPE_UINT32, None, None),
        ("output_buffer_idx", 2, _F.TYPE_UINT32, None, None),
        ("buffer_size_bytes", 3, _F.TYPE_UINT64, None, None),
    ],
    "TritonAutotunedKernelCall": [
        ("name", 1, _F.TYPE_STRING, None, None),
        ("configs", 2, _F.TYPE_MESSAGE, "AutotuneConfig", "repeated"),
        ("input_output_aliases", 3, _F.TYPE_MESSAGE, "InputOutputAlias", "repeated"),
    ],
    "TritonAnyKernelCall": [
        ("kernel_call", 1, _F.TYPE_MESSAGE, "TritonKernelCall", "value"),
        ("autotuned_kernel_call", 2, _F.TYPE_MESSAGE, "TritonAutotunedKernelCall", "value"),
        ("metadata", 3, _F.TYPE_BYTES, None, None),
        ("name", 4, _F.TYPE_STRING, None, None),
    ],
}

_PACKAGE = "jax_triton_rocm.wire"


def _build_messages() -> dict[str, type]:
    """Builds message classes from `_SCHEMA` in a private descriptor pool."""
    file_proto = descriptor_pb2.FileDescriptorProto(
        name="jax_triton_rocm/triton_wire.proto", package=_PACKAGE, syntax="proto3")
    for message_name, fields in _SCHEMA.items():
        message = file_proto.message_type.add(name=message_name)
        oneofs: dict[str, int] = {}
        for name, number, field_type, type_name, kind in fields:
            field = message.field.add(name=name, number=number, type=field_type,
                                      label=_F.LABEL_OPTIONAL)
            if type_name is not None:
                field.type_name = f".{_PACKAGE}.{type_name}"
            if kind == "repeated":
                field.label = _F.LABEL_REPEATED
            elif kind == "value":
                if "value" not in oneofs:
                    oneofs["value"] = len(message.oneof_decl)
                    message.oneof_decl.add(name="value")
                field.oneof_index = oneofs["value"]
            elif kind == "optional":
                # proto3 `optional`: explicit presence through a synthetic one-field oneof.
                field.proto3_optional = True
                field.oneof_index = len(message.oneof_decl)
                message.oneof_decl.add(name=f"_{name}")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file_proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _SCHEMA
    }


MESSAGES = _build_messages()
