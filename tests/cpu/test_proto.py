"""The package's own encoding of the kernel call against what jaxlib's `to_proto` writes."""

import pytest

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.routes.jaxlib import _opaque, _proto

plugin = _vendors.plugin_triton_module("cuda")
pytestmark = pytest.mark.skipif(
    plugin is None, reason="needs jaxlib's CUDA plugin, whose to_proto is the reference")

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
    if not _vendors.plugin_features("cuda").global_scratch:
        scratch = (None, None)
    return _proto.KernelImage(name, warps, ctas, shared, ptx, cc, ttir,
                              global_scratch_size=scratch[0], global_scratch_align=scratch[1])


@pytest.mark.parametrize("kind,value,jaxlib_type", SCALARS)
def test_each_scalar_kind_encodes_like_jaxlib(kind, value, jaxlib_type):
    reference = plugin.TritonKernelCall(
        _jaxlib_kernel(), 2, 3, 4, [plugin.create_scalar_parameter(value, jaxlib_type)]
    ).to_proto("call", b"")
    ours = _proto.encode_call(_proto.KernelCall(_our_image(), (2, 3, 4),
                                                (_proto.Param(kind, value),)), name="call")
    assert ours == reference


@pytest.mark.parametrize("bytes_to_zero,divisibility", [(0, 16), (64, 0), (4096, 16)])
def test_array_parameters_encode_like_jaxlib(bytes_to_zero, divisibility):
    reference = plugin.TritonKernelCall(
        _jaxlib_kernel(), 1, 1, 1, [plugin.create_array_parameter(bytes_to_zero, divisibility)]
    ).to_proto("call", b"meta")
    param = _proto.Param("array", bytes_to_zero=bytes_to_zero, ptr_divisibility=divisibility)
    ours = _proto.encode_call(_proto.KernelCall(_our_image(), (1, 1, 1), (param,)),
                              name="call", metadata=b"meta")
    assert ours == reference


def test_kernel_fields_encode_like_jaxlib():
    args = dict(name="my_kernel", warps=8, ctas=2, shared=49152, ptx=".version 8.0", ttir="module",
                cc=90, scratch=(256, 128))
    reference = plugin.TritonKernelCall(_jaxlib_kernel(**args), 7, 1, 1, []).to_proto("n", b"")
    ours = _proto.encode_call(_proto.KernelCall(_our_image(**args), (7, 1, 1), ()), name="n")
    assert ours == reference


def test_autotuned_call_encodes_like_jaxlib():
    jaxlib_call = plugin.TritonKernelCall(_jaxlib_kernel(), 5, 1, 1,
                                          [plugin.create_array_parameter(0, 16)])
    reference = plugin.TritonAutotunedKernelCall(
        "tuned", [(jaxlib_call, "cfg A"), (jaxlib_call, "cfg B")], [(0, 1, 64), (2, 0, 8)]
    ).to_proto("outer", b"m")
    call = _proto.KernelCall(_our_image(), (5, 1, 1), (_proto.Param("array", ptr_divisibility=16),))
    ours = _proto.encode_autotuned_call(
        [(call, "cfg A"), (call, "cfg B")], [_proto.Alias(0, 1, 64), _proto.Alias(2, 0, 8)],
        call_name="tuned", name="outer", metadata=b"m")
    assert ours == reference


def test_module_image_is_carried_and_read_back():
    image = _proto.KernelImage("k", 4, 1, 0, "PTX", 90, object_file=b"\x7fELF-binary")
    decoded = _proto.decode(_opaque.compress(_proto.encode_call(
        _proto.KernelCall(image, (1, 1, 1), ()), name="n"))).kernel_call.kernel
    assert decoded.module_image.object_file == b"\x7fELF-binary"
    assert decoded.module_image.kernel_name == "k"
    assert decoded.ptx == "PTX"


def test_jaxlib_parses_an_opaque_carrying_module_image():
    image = _proto.KernelImage("k", 4, 1, 0, "PTX", 90, object_file=b"\x00" * 100)
    opaque = _opaque.compress(_proto.encode_call(_proto.KernelCall(image, (1, 1, 1), ()),
                                                name="n", metadata=b"kept"))
    assert plugin.get_serialized_metadata(opaque) == b"kept"
