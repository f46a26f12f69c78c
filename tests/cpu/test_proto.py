"""The package's own encoding of the kernel call: read back through its decoder, and compared
with what jaxlib's `to_proto` writes, live where jaxlib's CUDA plugin imports (it does without a
GPU), and always with bytes jaxlib wrote (`JAXLIB_WROTE`)."""

import pytest

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.routes.jaxlib import _proto, _tma
from tests.support.lowering_utils import opaque_metadata

plugin = _vendors.plugin_triton_module("cuda")

SCALARS = [("bool", True, "i1"), ("bool", False, "i1"), ("i32", -3, "i32"), ("i32", 0, "i32"),
           ("u32", 2**32 - 1, "u32"), ("i64", -(2**40), "i64"), ("u64", 2**63, "u64"),
           ("f32", 1.5, "fp32"), ("f64", -2.25, "fp64")]


def _jaxlib_kernel(name="k", warps=4, ctas=1, shared=1024, ptx="PTX", ttir="TTIR", cc=90,
                   scratch=(0, 1)):
    if "global_scratch" in (plugin.TritonKernel.__init__.__doc__ or ""):
        return plugin.TritonKernel(name, warps, ctas, shared, ptx, ttir, cc, *scratch)
    return plugin.TritonKernel(name, warps, ctas, shared, ptx, ttir, cc)


def _our_image(name="k", warps=4, ctas=1, shared=1024, ptx="PTX", ttir="TTIR", cc=90,
               scratch=(0, 1)):
    features = _vendors.plugin_features("cuda") or _vendors.assumed_features("cuda")
    if not features.global_scratch:
        scratch = (None, None)
    return _proto.KernelImage(name, warps, ctas, shared, ptx, cc, ttir,
                              global_scratch_size=scratch[0], global_scratch_align=scratch[1])


def _also_jaxlibs(ours: bytes, jaxlib_bytes) -> None:
    """Where jaxlib's CUDA plugin imports, `ours` must be the bytes `jaxlib_bytes()` gives."""
    if plugin is not None:
        assert ours == jaxlib_bytes()


@pytest.mark.parametrize("kind,value,jaxlib_type", SCALARS)
def test_each_scalar_kind_encodes_like_jaxlib(kind, value, jaxlib_type):
    ours = _proto.encode_call(_proto.KernelCall(_our_image(), (2, 3, 4),
                                                (_proto.Param(kind, value),)), name="call")
    [param] = _proto.decode(ours).kernel_call.parameters
    assert (param.WhichOneof("value"), getattr(param, kind)) == (kind, value)
    _also_jaxlibs(ours, lambda: plugin.TritonKernelCall(
        _jaxlib_kernel(), 2, 3, 4, [plugin.create_scalar_parameter(value, jaxlib_type)]
    ).to_proto("call", b""))


@pytest.mark.parametrize("bytes_to_zero,divisibility", [(0, 16), (64, 0), (4096, 16)])
def test_array_parameters_encode_like_jaxlib(bytes_to_zero, divisibility):
    param = _proto.Param("array", bytes_to_zero=bytes_to_zero, ptr_divisibility=divisibility)
    ours = _proto.encode_call(_proto.KernelCall(_our_image(), (1, 1, 1), (param,)),
                              name="call", metadata=b"meta")
    decoded = _proto.decode(ours)
    [read] = decoded.kernel_call.parameters
    assert read.WhichOneof("value") == "array"
    assert (read.array.bytes_to_zero, read.array.ptr_divisibility) == (bytes_to_zero,
                                                                       divisibility)
    assert (decoded.name, decoded.metadata) == ("call", b"meta")
    _also_jaxlibs(ours, lambda: plugin.TritonKernelCall(
        _jaxlib_kernel(), 1, 1, 1, [plugin.create_array_parameter(bytes_to_zero, divisibility)]
    ).to_proto("call", b"meta"))


def test_kernel_fields_encode_like_jaxlib():
    args = dict(name="my_kernel", warps=8, ctas=2, shared=49152, ptx=".version 8.0", ttir="module",
                cc=90, scratch=(256, 128))
    ours = _proto.encode_call(_proto.KernelCall(_our_image(**args), (7, 1, 1), ()), name="n")
    call = _proto.decode(ours).kernel_call
    kernel = call.kernel
    assert (kernel.kernel_name, kernel.num_warps, kernel.num_ctas, kernel.shared_mem_bytes,
            kernel.ptx, kernel.ttir, kernel.compute_capability) == (
        "my_kernel", 8, 2, 49152, ".version 8.0", "module", 90)
    if _our_image(**args).global_scratch_size is not None:
        assert (kernel.global_scratch_size, kernel.global_scratch_align) == (256, 128)
    assert (call.grid_0, call.grid_1, call.grid_2) == (7, 1, 1)
    _also_jaxlibs(ours, lambda: plugin.TritonKernelCall(_jaxlib_kernel(**args), 7, 1, 1, []
                                                        ).to_proto("n", b""))


def test_autotuned_call_encodes_like_jaxlib():
    call = _proto.KernelCall(_our_image(), (5, 1, 1), (_proto.Param("array", ptr_divisibility=16),))
    ours = _proto.encode_autotuned_call(
        [(call, "cfg A"), (call, "cfg B")], [_proto.Alias(0, 1, 64), _proto.Alias(2, 0, 8)],
        call_name="tuned", name="outer", metadata=b"m")
    decoded = _proto.decode(ours)
    tuned = decoded.autotuned_kernel_call
    assert (decoded.name, decoded.metadata, tuned.name) == ("outer", b"m", "tuned")
    assert [c.description for c in tuned.configs] == ["cfg A", "cfg B"]
    assert all(c.kernel_call.grid_0 == 5 for c in tuned.configs)
    assert [(a.input_buffer_idx, a.output_buffer_idx, a.buffer_size_bytes)
            for a in tuned.input_output_aliases] == [(0, 1, 64), (2, 0, 8)]

    def jaxlibs():
        jaxlib_call = plugin.TritonKernelCall(_jaxlib_kernel(), 5, 1, 1,
                                              [plugin.create_array_parameter(0, 16)])
        return plugin.TritonAutotunedKernelCall(
            "tuned", [(jaxlib_call, "cfg A"), (jaxlib_call, "cfg B")], [(0, 1, 64), (2, 0, 8)]
        ).to_proto("outer", b"m")

    _also_jaxlibs(ours, jaxlibs)


# What jax-cuda13-plugin 0.12.1's `to_proto` wrote for `_every_field`'s calls (the live plugin
# is compared where one imports): the field numbers and wire types the decoder cannot check.
JAXLIB_WROTE = {
    "plain":     ("0a99010a2a0a046b65726e1008188004220870747820746578742a09747469722074657874305a50"
                  "026080026880011003180220012a060a04084010102a0210012a0b18fdffffffffffffffff012a06"
                  "20ffffffff0f2a0b288080808080e0ffffff012a0b30808080808080808080012a053d0000c03f2a"
                  "094100000000000002c02a184a160a14080910021a0328800122038001012a02104030011a046d65"
                  "74612205706c61696e"),
    "autotuned": ("12b1010a0574756e656412a1010a99010a2a0a046b65726e1008188004220870747820746578742a"
                  "09747469722074657874305a50026080026880011003180220012a060a04084010102a0210012a0b"
                  "18fdffffffffffffffff012a0620ffffffff0f2a0b288080808080e0ffffff012a0b308080808080"
                  "80808080012a053d0000c03f2a094100000000000002c02a184a160a14080910021a032880012203"
                  "8001012a021040300112036366671a04080118401a016d22056f75746572"),
}
TMA = _tma.TmaDescriptor(elem_type=9, swizzle=2, shape=(40, 128), strides=(128, 1),
                         block_shape=(16, 64), oob_fill=1)


def _every_field(encoder):
    """A plain and an autotuned call with every field jaxlib writes, by `encoder`: "ours", or
    "jaxlib" (the plugin's classes)."""
    scalars = [(kind, value, jaxlib_type) for kind, value, jaxlib_type in SCALARS
               if value not in (False, 0)]
    if encoder == "jaxlib":
        kernel = plugin.TritonKernel("kern", 8, 2, 512, "ptx text", "ttir text", 90, 256, 128)
        call = plugin.TritonKernelCall(kernel, 3, 2, 1, [
            plugin.create_array_parameter(64, 16),
            *(plugin.create_scalar_parameter(value, t) for _, value, t in scalars),
            plugin.create_tma_descriptor_parameter(
                elem_type=TMA.elem_type, swizzle=TMA.swizzle, shape=list(TMA.shape),
                strides=list(TMA.strides), block_shape=list(TMA.block_shape),
                oob_fill=TMA.oob_fill)])
        tuned = plugin.TritonAutotunedKernelCall("tuned", [(call, "cfg")], [(1, 0, 64)])
        return call.to_proto("plain", b"meta"), tuned.to_proto("outer", b"m")
    image = _proto.KernelImage("kern", 8, 2, 512, "ptx text", 90, "ttir text",
                               global_scratch_size=256, global_scratch_align=128)
    call = _proto.KernelCall(image, (3, 2, 1), (
        _proto.Param("array", bytes_to_zero=64, ptr_divisibility=16),
        *(_proto.Param(kind, value) for kind, value, _ in scalars),
        _proto.Param("tensor_descriptor", descriptor=TMA)))
    return (_proto.encode_call(call, name="plain", metadata=b"meta"),
            _proto.encode_autotuned_call([(call, "cfg")], [_proto.Alias(1, 0, 64)],
                                         call_name="tuned", name="outer", metadata=b"m"))


def test_the_bytes_are_those_jaxlib_wrote():
    ours = dict(zip(JAXLIB_WROTE, _every_field("ours")))
    assert {name: data.hex() for name, data in ours.items()} == JAXLIB_WROTE


@pytest.mark.skipif(plugin is None or not hasattr(plugin, "create_tma_descriptor_parameter"),
                    reason="needs jaxlib's CUDA plugin 0.11.1+ (its global scratch and TMA "
                           "parameters), which wrote JAXLIB_WROTE")
def test_jaxlib_here_writes_the_recorded_bytes():
    jaxlibs = dict(zip(JAXLIB_WROTE, _every_field("jaxlib")))
    assert {name: data.hex() for name, data in jaxlibs.items()} == JAXLIB_WROTE


def test_module_image_is_carried_and_read_back():
    image = _proto.KernelImage("k", 4, 1, 0, "PTX", 90, object_file=b"\x7fELF-binary")
    decoded = _proto.decode(_proto.compress(_proto.encode_call(
        _proto.KernelCall(image, (1, 1, 1), ()), name="n"))).kernel_call.kernel
    assert decoded.module_image.object_file == b"\x7fELF-binary"
    assert decoded.module_image.kernel_name == "k"
    assert decoded.ptx == "PTX"


def test_an_opaque_carrying_module_image_parses_as_jaxlib_reads_it():
    image = _proto.KernelImage("k", 4, 1, 0, "PTX", 90, object_file=b"\x00" * 100)
    opaque = _proto.compress(_proto.encode_call(_proto.KernelCall(image, (1, 1, 1), ()),
                                                name="n", metadata=b"kept"))
    assert opaque_metadata(opaque) == b"kept"
