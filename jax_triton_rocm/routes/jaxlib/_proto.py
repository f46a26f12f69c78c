"""jaxlib's Triton kernel call, encoded: a compiled kernel as jaxlib loads it (`kernel_image`), one
launch's parameters in kernel order (`kernel_call`), the call in the messages of
`jaxlib/gpu/triton.proto` (`MESSAGES`, declared here: no protoc) and its opaque, one zlib stream
(`compress`). docs/design.md, "jaxlib's call, encoded".
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import struct
import zlib
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from jax_triton_rocm.base import _compat

if TYPE_CHECKING:
    from jax_triton_rocm.backends._backend import ArchAnswers, Backend
    from jax_triton_rocm.backends._vendors import PluginFeatures
    from jax_triton_rocm.compile._compile import CompiledKernel
    from jax_triton_rocm.backends._vendors import GpuArch
    from jax_triton_rocm.plan import _plan

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


def module_image_ptx(binary: bytes) -> str:
    """The `ptx` field of a kernel whose binary travels in `module_image` (docs/design.md,
    "jaxlib's call, encoded")."""
    return (f"jax_triton_rocm module_image sha256:{hashlib.sha256(binary).hexdigest()} (the "
            f"binary is in TritonKernel.module_image, which jaxlib reads from 0.11.1 on)")


# The fields of `TritonKernel` a `KernelImage` holds under the same name.
_KERNEL_FIELDS = ("num_warps", "num_ctas", "shared_mem_bytes", "ptx", "compute_capability", "ttir",
                  "global_scratch_size", "global_scratch_align")


@dataclasses.dataclass(frozen=True)
class KernelImage:
    """A compiled kernel as jaxlib loads it, `TritonKernel`'s fields (docs/design.md, "jaxlib's
    call, encoded"). `ttir` is empty unless asked for (jaxlib reads it for nothing, and copies
    it at every launch); `object_file`, the binary `module_image` carries, or None; `piece`, the
    image's bytes as a `TritonKernel` (every call of the kernel embeds these very bytes),
    `deflated`."""

    name: str
    num_warps: int
    num_ctas: int
    shared_mem_bytes: int
    ptx: str
    compute_capability: int
    ttir: str = ""
    object_file: bytes | None = None
    global_scratch_size: int = 0
    global_scratch_align: int = 1
    piece: tuple[bytes, bytes, int] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kernel = MESSAGES["TritonKernel"](kernel_name=self.name, **{
            name: getattr(self, name) for name in _KERNEL_FIELDS})
        if self.object_file is not None:
            kernel.module_image.object_file = self.object_file
            kernel.module_image.kernel_name = self.name
            kernel.module_image.shared_mem_bytes = self.shared_mem_bytes
        object.__setattr__(self, "piece", deflated(kernel.SerializeToString(deterministic=True)))


def kernel_image(backend: Backend, compiled: CompiledKernel, answers: ArchAnswers,
                 features: PluginFeatures, *, devices: GpuArch | None = None,
                 with_ttir: bool = False, keep_ptx_text: bool = False) -> KernelImage:
    """The compiled kernel as the installed jaxlib loads it on `devices` (None: on devices of
    the architecture it was compiled for, `answers.arch`), with its IR in `ttir` if asked.

    Raises:
      ValueError: no form of the kernel loads on `devices`, or jaxlib cannot launch its block
        (`Backend.loaded_form`).
      NotImplementedError: the kernel needs what this plugin or jaxlib cannot do.
    """
    if compiled.global_scratch_size and not features.global_scratch:
        raise NotImplementedError(
            f"Kernel {compiled.name} needs {compiled.global_scratch_size} bytes of Triton "
            f"global scratch memory, which this jaxlib {backend.platform} plugin "
            f"({features.detected_from}) does not allocate. Upgrade jax and its plugin to "
            f"0.11.1 or newer.")
    form = backend.loaded_form(compiled, answers, features, devices, keep_ptx_text)
    return KernelImage(
        name=compiled.name,
        num_warps=form.num_warps,
        num_ctas=compiled.num_ctas,
        shared_mem_bytes=compiled.shared_mem_bytes,
        ptx=module_image_ptx(form.object_file) if form.ptx is None else form.ptx,
        compute_capability=form.capability,
        ttir=compiled.ttir if with_ttir else "",
        object_file=form.object_file,
        global_scratch_size=compiled.global_scratch_size,
        global_scratch_align=compiled.global_scratch_align,
    )


@dataclasses.dataclass(frozen=True)
class Alias:
    """An input and the output sharing its buffer, `InputOutputAlias`'s fields."""

    input_buffer_idx: int
    output_buffer_idx: int
    buffer_size_bytes: int


def _length_delimited(number: int, payload: bytes) -> bytes:
    """Field `number` holding `payload` (a message's bytes) as protobuf writes it: the tag and
    the length as varints, then the payload."""
    head = bytearray()
    for value in (number << 3 | 2, len(payload)):
        while value > 0x7F:
            head.append(value & 0x7F | 0x80)
            value >>= 7
        head.append(value)
    return bytes(head) + payload


@dataclasses.dataclass(frozen=True)
class Param:
    """One kernel parameter: `kind` is "array", a scalar ("i32", ...) or "tensor_descriptor"."""

    kind: str
    value: bool | int | float = 0
    bytes_to_zero: int = 0
    ptr_divisibility: int = 0
    descriptor: object = None  # a `_tma.TmaDescriptor`, which jaxlib's CUDA plugin encodes


@dataclasses.dataclass(frozen=True)
class KernelCall:
    """One launch: a kernel, its grid and its parameters in kernel order."""

    kernel: KernelImage
    grid: tuple[int, int, int]
    params: tuple[Param, ...]


def size_bytes(aval: Any) -> int:
    """The bytes of an array of `aval`'s shape and dtype."""
    return int(math.prod(aval.shape)) * np.dtype(aval.dtype).itemsize


def kernel_call(image: KernelImage, launch: _plan.Launch, out_avals: tuple,
                aliases: tuple[tuple[int, int], ...] = (),
                descriptors: Callable[..., list] | None = None) -> KernelCall:
    """One launch of `image`, as jaxlib's kernel call carries it, its parameters in kernel
    order; `descriptors` gives those of the kernel's tensor descriptors
    (`_tma.descriptor_params`). An output to zero that has no pointer of its own is zeroed
    through the input it is aliased to (the same buffer).

    Raises:
      NotImplementedError: a zeroed output aliased to a TensorDescriptor's base.
    """
    bound, zeroed = launch.bound, set(launch.zeroed)
    params = []
    specs = dict(bound.specializations)
    own = {source.index for source in bound.sources if source.kind == "output"}
    zero_inputs = {i: o for i, o in aliases if o in zeroed and o not in own}
    n_descriptors = 0
    for source in bound.sources:
        if source.kind == "scalar":
            params.append(Param(source.scalar.proto_kind, source.scalar.value))
            continue
        if source.kind == "descriptor":
            if source.index in zero_inputs:
                raise NotImplementedError(
                    f"zeroed_outputs names output {zero_inputs[source.index]}, which is written "
                    f"through a TensorDescriptor; zero its base before the call instead.")
            params.extend(descriptors(source.descriptor, n_descriptors))
            n_descriptors += 1
            continue
        # Its key in `BoundKernel.specializations`: the position, or (position, *path).
        key = (source.position, *source.path) if source.path else source.position
        divisibility = 16 if "D" in specs.get(key, "") else 0
        if source.kind == "output":
            zeroes = source.index if source.index in zeroed else None
        else:
            zeroes = zero_inputs.get(source.index)
        zero = 0 if zeroes is None else size_bytes(out_avals[zeroes])
        params.append(Param("array", bytes_to_zero=zero, ptr_divisibility=divisibility))
    return KernelCall(kernel=image, grid=launch.grid, params=tuple(params))


def kernel_call_bytes(call: KernelCall) -> bytes:
    """`call` serialized as a `TritonKernelCall`: the kernel's bytes (`KernelImage.piece`) as
    they are, first (protobuf writes fields by number, and the kernel is field 1)."""
    message = MESSAGES["TritonKernelCall"](
        grid_0=call.grid[0], grid_1=call.grid[1], grid_2=call.grid[2])
    for param in call.params:
        entry = message.parameters.add()
        if param.kind == "array":
            entry.array.CopyFrom(MESSAGES["ArrayParameter"](
                bytes_to_zero=param.bytes_to_zero, ptr_divisibility=param.ptr_divisibility))
        elif param.kind == "tensor_descriptor":
            entry.tensor_descriptor.nvidia.CopyFrom(MESSAGES["NvidiaTensorDescriptor"](
                **dataclasses.asdict(param.descriptor)))
        else:
            setattr(entry, param.kind, param.value)
    return (_length_delimited(1, call.kernel.piece[0])
            + message.SerializeToString(deterministic=True))


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A call encoded: its bytes, the custom call that takes them, and the opaque that carries
    them (`compress`, each kernel's bytes deflated apart)."""

    serialized: bytes
    custom_call_name: str
    opaque: bytes


def encode(configs: Sequence[tuple[KernelCall, str]], aliases: Sequence[Alias], *, name: str,
           kernel_name: str, plain_call_name: str, metadata: bytes = b"") -> Encoded:
    """The call of (kernel call, description) `configs` encoded: one kernel call (for the target
    `plain_call_name`), or an autotuned one for several (which alone reads `aliases`)."""
    if len(configs) == 1:
        serialized = encode_call(configs[0][0], name=name, metadata=metadata)
        custom_call_name = plain_call_name
    else:
        serialized = encode_autotuned_call(configs, aliases, call_name=f"{name} ({kernel_name})",
                                           name=name, metadata=metadata)
        custom_call_name = _compat.autotuned_call_name()
    return Encoded(serialized, custom_call_name, compress(
        serialized, [call.kernel.piece for call, _ in configs]))


def encode_call(call: KernelCall, *, name: str, metadata: bytes = b"") -> bytes:
    """Serializes a single kernel call as jaxlib's `TritonAnyKernelCall` (whose field 1, written
    first, is the kernel call)."""
    rest = MESSAGES["TritonAnyKernelCall"](name=name, metadata=metadata)
    return (_length_delimited(1, kernel_call_bytes(call))
            + rest.SerializeToString(deterministic=True))


def encode_autotuned_call(configs: Sequence[tuple[KernelCall, str]], aliases: Sequence[Alias],
                          *, call_name: str, name: str, metadata: bytes = b"") -> bytes:
    """Serializes an autotuned call of (kernel call, description) `configs`, which jaxlib
    times at first run, restoring the aliased buffers between trials, and keeps the best;
    `call_name` shows in jaxlib's autotuning logs."""
    autotuned = MESSAGES["TritonAutotunedKernelCall"](name=call_name, input_output_aliases=[
        dataclasses.asdict(alias) for alias in aliases])
    for call, description in configs:
        autotuned.configs.add(description=description).kernel_call.MergeFromString(
            kernel_call_bytes(call))
    return MESSAGES["TritonAnyKernelCall"](
        name=name, metadata=metadata, autotuned_kernel_call=autotuned).SerializeToString(
            deterministic=True)


def decode(opaque: bytes):
    """Parses an opaque (compressed or not) back into a `TritonAnyKernelCall` message."""
    try:
        serialized = zlib.decompress(opaque)
    except zlib.error:
        serialized = opaque
    message = MESSAGES["TritonAnyKernelCall"]()
    message.ParseFromString(serialized)
    return message


# What `zlib.compress` writes first: deflate with a 32 KiB window, default level.
_ZLIB_HEADER = b"\x78\x9c"
_ADLER_BASE = 65521
# The bytes of a piece searched for first; the whole piece is then compared in place.
_PROBE_BYTES = 64
# Bytes between pieces up to this many are stored, not deflated.
_STORED_MAX = 256


def compress(data: bytes, pieces: Sequence[tuple[bytes, bytes, int]] = ()) -> bytes:
    """`data` as a zlib stream, with `pieces` (the kernels' bytes, in the order `data` embeds
    them, each as `deflated` gives it) as they were deflated; one not found after the previous
    is compressed with the bytes around it (docs/design.md, "jaxlib's call, encoded")."""
    parts = [_ZLIB_HEADER]
    checksum = zlib.adler32(b"")
    start = 0
    for piece, deflate, piece_checksum in (*dict.fromkeys(pieces), (None, b"", 0)):
        last = piece is None
        if last:
            at = len(data)
        else:  # probed by its first bytes, the rest compared in place: a long piece's own
            # search table costs more
            at = data.find(piece[:_PROBE_BYTES], start)
            while at >= 0 and not data.startswith(piece, at):
                at = data.find(piece[:_PROBE_BYTES], at + 1)
            if at < 0:
                continue
        if at > start or last:
            gap = data[start:at]
            if len(gap) > _STORED_MAX:
                compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -9, 1)
                parts.append(compressor.compress(gap) + compressor.flush(
                    zlib.Z_FINISH if last else zlib.Z_FULL_FLUSH))
            else:
                parts.append(bytes((last,)) + struct.pack("<HH", len(gap), len(gap) ^ 0xFFFF)
                             + gap)
            checksum = zlib.adler32(gap, checksum)
        if last:
            return b"".join([*parts, checksum.to_bytes(4, "big")])
        parts.append(deflate)
        # The checksum of the bytes so far and the piece's, combined (zlib's adler32_combine).
        remainder = len(piece) % _ADLER_BASE
        low = (checksum & 0xFFFF) + (piece_checksum & 0xFFFF) - 1
        high = ((checksum >> 16) + (piece_checksum >> 16) + remainder * (checksum & 0xFFFF)
                - remainder)
        checksum = (high % _ADLER_BASE) << 16 | low % _ADLER_BASE
        start = at + len(piece)


def deflated(piece: bytes) -> tuple[bytes, bytes, int]:
    """`piece`, its raw deflate at the default level, ending on a full flush, and its Adler-32:
    as `compress` takes it."""
    compressor = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zlib.DEFLATED, -zlib.MAX_WBITS)
    return (piece, compressor.compress(piece) + compressor.flush(zlib.Z_FULL_FLUSH),
            zlib.adler32(piece))
