"""jaxlib's Triton kernel-call proto (`jaxlib/gpu/triton.proto`, package `jax_triton`): its
messages, declared field by field as that file declares them and built into protobuf classes at
import (no protoc), so the package relies on no arity of jaxlib's nanobind constructors and can
write fields they lack (`TritonKernel.module_image`, a TMA parameter). Field numbers are those
jaxlib's `to_proto` writes (the tests compare the two); `_proto` encodes calls with them.
"""

from __future__ import annotations

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto

# Each message's fields, "[label] type name = number", in the .proto's own words; "oneof" puts a
# field in the message's one oneof, `value`.
_SCHEMA: dict[str, str] = {
    "ModuleImageProto": "bytes object_file = 1; string kernel_name = 2; "
                        "uint32 shared_mem_bytes = 3",
    "TritonKernel": "string kernel_name = 1; uint32 num_warps = 2; uint32 shared_mem_bytes = 3; "
                    "string ptx = 4; string ttir = 5; uint32 compute_capability = 6; "
                    "uint32 num_ctas = 10; ModuleImageProto module_image = 11; "
                    "optional uint64 global_scratch_size = 12; "
                    "optional uint64 global_scratch_align = 13",
    "ArrayParameter": "uint64 bytes_to_zero = 1; uint64 ptr_divisibility = 2",
    "Parameter": "oneof ArrayParameter array = 1; oneof bool bool = 2; oneof int32 i32 = 3; "
                 "oneof uint32 u32 = 4; oneof int64 i64 = 5; oneof uint64 u64 = 6; "
                 "oneof float f32 = 7; oneof double f64 = 8; "
                 "oneof TensorDescriptorParameter tensor_descriptor = 9",
    "TensorDescriptorParameter": "NvidiaTensorDescriptor nvidia = 1",
    "NvidiaTensorDescriptor": "uint32 elem_type = 1; uint32 swizzle = 2; "
                              "repeated uint64 shape = 3; repeated uint64 strides = 4; "
                              "repeated uint32 block_shape = 5; uint32 oob_fill = 6",
    "TritonKernelCall": "TritonKernel kernel = 1; uint32 grid_0 = 2; uint32 grid_1 = 3; "
                        "uint32 grid_2 = 4; repeated Parameter parameters = 5",
    "AutotuneConfig": "TritonKernelCall kernel_call = 1; string description = 2",
    "InputOutputAlias": "uint32 input_buffer_idx = 1; uint32 output_buffer_idx = 2; "
                        "uint64 buffer_size_bytes = 3",
    "TritonAutotunedKernelCall": "string name = 1; repeated AutotuneConfig configs = 2; "
                                 "repeated InputOutputAlias input_output_aliases = 3",
    "TritonAnyKernelCall": "oneof TritonKernelCall kernel_call = 1; "
                           "oneof TritonAutotunedKernelCall autotuned_kernel_call = 2; "
                           "bytes metadata = 3; string name = 4",
}

_PACKAGE = "jax_triton_rocm.wire"


def _build_messages() -> dict[str, type]:
    """Builds message classes from `_SCHEMA` in a private descriptor pool."""
    file_proto = descriptor_pb2.FileDescriptorProto(
        name="jax_triton_rocm/triton_wire.proto", package=_PACKAGE, syntax="proto3")
    for message_name, fields in _SCHEMA.items():
        message = file_proto.message_type.add(name=message_name)
        for declared in fields.split(";"):
            *label, type_name, name, _, number = declared.split()
            field_type = getattr(_F, f"TYPE_{type_name.upper()}", _F.TYPE_MESSAGE)
            field = message.field.add(name=name, number=int(number), type=field_type,
                                      label=_F.LABEL_OPTIONAL)
            if field_type == _F.TYPE_MESSAGE:
                field.type_name = f".{_PACKAGE}.{type_name}"
            if label == ["repeated"]:
                field.label = _F.LABEL_REPEATED
            elif label == ["oneof"]:
                if "value" not in [oneof.name for oneof in message.oneof_decl]:
                    message.oneof_decl.add(name="value")
                field.oneof_index = [oneof.name for oneof in message.oneof_decl].index("value")
            elif label == ["optional"]:
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
