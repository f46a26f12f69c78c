"""How a `TensorDescriptor` argument is laid onto a compiled kernel (`_tma`), checked against the
kernels the installed Triton compiles for sm_90 (TMA), sm_80, gfx942 and gfx950 (plain
parameters). The TMA parameter's bytes against jaxlib's own: test_proto."""

import re
import types

import jax
import jax.numpy as jnp
import pytest
import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.kernel import _tensordesc
from jax_triton_rocm.routes.jaxlib import _tma

TARGETS = {"sm_90": ("cuda", 90, 32), "sm_80": ("cuda", 80, 32), "gfx942": ("hip", "gfx942", 64),
           "gfx950": ("hip", "gfx950", 64)}


@triton.jit
def desc_copy_kernel(in_desc, out_ptr, M: tl.constexpr, N: tl.constexpr):
    block = in_desc.load([0, 0])
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], block)


def _compile(desc, arch, tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    element = _tensordesc.signature_type(desc).split("<")[1].split("[")[0]
    source = ASTSource(desc_copy_kernel, {"in_desc": _tensordesc.signature_type(desc),
                                          "out_ptr": f"*{element}", "M": "constexpr",
                                          "N": "constexpr"},
                       constexprs={"M": desc.block_shape[0], "N": desc.block_shape[1]},
                       attrs={(1,): [["tt.divisibility", 16]]})
    return triton.compile(source, target=GPUTarget(*TARGETS[arch]))


def _binary_params(kernel, arch) -> list[str]:
    """The compiled kernel's parameters as "tma", "ptr" or a size in bytes."""
    if arch.startswith("sm_"):
        entry = re.search(r"\.entry\s+\w+\(([^)]*)\)", kernel.asm["ptx"], re.S).group(1)
        return ["tma" if "[128]" in p else "ptr" if ".ptr" in p else
                {".u8": "1", ".u32": "4", ".u64": "8"}[p.split()[1]] for p in entry.split(",")]
    args = re.findall(r"\.size:\s+(\d+)\s*\n\s+\.value_kind:\s+(\w+)", kernel.asm["amdgcn"])
    return ["ptr" if kind == "global_buffer" else size for size, kind in args]


def _param_kinds(params) -> list[str]:
    return [{"tensor_descriptor": "tma", "array": "ptr", "bool": "1", "i32": "4", "i64": "8"}[
        p.kind] for p in params]


def _meta(kernel):
    return list(getattr(kernel.metadata, "tensordesc_meta", None) or [])


@pytest.mark.parametrize("arch", list(TARGETS))
def test_the_launch_parameters_are_the_compiled_kernels_own(arch, tmp_path, monkeypatch):
    desc = jtr.TensorDescriptor.from_array(jnp.zeros((32, 64), jnp.float32), [16, 64])
    kernel = _compile(desc, arch, tmp_path, monkeypatch)
    meta = _meta(kernel)
    assert bool(meta) == (arch == "sm_90"), "only sm_90 takes a TMA descriptor"
    vendor = _vendors.vendor("cuda" if arch.startswith("sm_") else "rocm")
    types = _tma.launch_types(_tensordesc.signature_type(desc), bool(meta), vendor)
    params = _tma.one_descriptor_params(desc, types, meta[0] if meta else None)
    # Then come the output pointer and the two scratch pointers jaxlib appends itself.
    assert _param_kinds(params) + ["ptr"] * 3 == _binary_params(kernel, arch)


def _plain(round_f32_to_tf32: bool):
    desc = jtr.TensorDescriptor(jnp.zeros((40, 64), jnp.float32), (40, 48), (64, 1), (8, 16),
                                padding="nan", round_f32_to_tf32=round_f32_to_tf32)
    types = _tma.launch_types(_tensordesc.signature_type(desc), False, _vendors.vendor("rocm"))
    return desc, types


def test_plain_parameters_carry_the_shape_strides_and_flags():
    desc, types = _plain(False)
    values = [p.value for p in _tma.one_descriptor_params(desc, types, None)[1:]]
    flags = [True] + [False] * (types.count("i1") - 1)  # "nan", then (Triton 3.9) round to TF32
    assert values == [40, 48, 64, 1, *flags, 40, 48, 64, 1]


def test_plain_parameters_round_to_tf32_where_triton_passes_the_flag():
    desc, types = _plain(True)
    if types.count("i1") < 2:  # Triton 3.6: the kernel cannot be told; refused, not ignored
        with pytest.raises(NotImplementedError,
                           match=r"round_f32_to_tf32=True\) without TMA needs"):
            _tma.one_descriptor_params(desc, types, None)
        return
    values = [p.value for p in _tma.one_descriptor_params(desc, types, None)[1:]]
    assert values == [40, 48, 64, 1, True, True, 40, 48, 64, 1]


@pytest.mark.parametrize("dtype,block,host_type,box", [
    (jnp.float32, (16, 64), 7, (16, 32)), (jnp.bfloat16, (16, 64), 9, (16, 64)),
    (jnp.float64, (16, 64), 8, (16, 16)), (jnp.int8, (16, 64), 0, (16, 64))])
def test_the_tma_descriptor_takes_cudas_element_type_and_tritons_box(dtype, block, host_type, box,
                                                                     tmp_path, monkeypatch):
    desc = jtr.TensorDescriptor.from_array(jax.ShapeDtypeStruct((64, 64), dtype), block)
    (meta,) = _meta(_compile(desc, "sm_90", tmp_path, monkeypatch))
    tma = _tma.tma_descriptor(desc, meta)
    assert (tma.elem_type, tma.block_shape) == (host_type, box)
    assert (tma.shape, tma.strides, tma.oob_fill) == ((64, 64), (64, 1), 0)


def test_round_to_tf32_and_nan_padding_reach_the_tma_descriptor():
    desc = jtr.TensorDescriptor.from_array(jnp.zeros((32, 32), jnp.float32), [32, 32],
                                           padding="nan", round_f32_to_tf32=True)
    meta = dict(swizzle=3, elem_size=4, elem_type=7, block_size=[32, 32], fp4_padded=False)
    tma = _tma.tma_descriptor(desc, meta)
    assert (tma.elem_type, tma.oob_fill, tma.swizzle) == (11, 1, 3)


@pytest.mark.parametrize("dtype,meta_change,error,match", [
    (jnp.float32, dict(block_size=[512, 8]), ValueError, "at most 256"),
    (jnp.float32, dict(block_size=[32, 2]), ValueError, "multiple of 16 bytes"),
    (jnp.float8_e5m2, dict(block_size=[32, 32]), ValueError, "16-bit and wider"),
    (jnp.float32, dict(is_im2col=True), NotImplementedError, "is_im2col"),
])
def test_a_descriptor_tma_cannot_encode_is_named(dtype, meta_change, error, match):
    desc = jtr.TensorDescriptor.from_array(jnp.zeros((64, 64), dtype), [32, 32], padding="nan")
    meta = {**dict(swizzle=3, elem_size=4, elem_type=7, block_size=[32, 32]), **meta_change}
    with pytest.raises(error, match=match):
        _tma.tma_descriptor(desc, meta)


def test_signature_type_names_the_element_block_and_gluon_layout():
    from triton.experimental.gluon import language as gl

    base = jnp.zeros((32, 32), jnp.bfloat16)
    assert _tensordesc.signature_type(jtr.TensorDescriptor.from_array(base, [16, 32])) == (
        "tensordesc<bf16[16,32]>")
    layout = gl.NVMMASharedLayout(64, 16, rank=2)
    typed = tl.str_to_ty(_tensordesc.signature_type(
        jtr.TensorDescriptor.from_array(base, [16, 32], layout=layout)), None)
    assert typed.layout == layout  # Triton reads the layout back from the signature


def _features(tma: bool) -> _vendors.PluginFeatures:
    return _vendors.PluginFeatures("cuda", "jax_cuda13_plugin", True, True,
                                  "jax-cuda13-plugin release 0.11.0", tma_descriptors=tma)


def test_a_plugin_without_tma_names_the_release_needed():
    with pytest.raises(NotImplementedError, match=r"jax/jaxlib 0\.11\.1 on; the jaxlib plugin "
                                                  r"here \(jax-cuda13-plugin release 0\.11\.0\)"):
        _tma.check_launchable(_vendors.vendor("cuda"), _features(False), kernel="k",
                              arch="sm_90")
    _tma.check_launchable(_vendors.vendor("cuda"), _features(True), kernel="k", arch="sm_90")


def test_an_encoded_amd_descriptor_is_refused_on_every_plugin():
    with pytest.raises(NotImplementedError, match="no jaxlib release encodes.*tl.make_tensor_"):
        _tma.check_launchable(_vendors.vendor("rocm"), _features(True), kernel="k",
                              arch="gfx1250")


@pytest.mark.parametrize("version,expected", [("0.10.2", False), ("0.11.0", False),
                                              ("0.11.1", True), ("0.12.0.1", True)])
def test_tma_support_by_release_when_the_plugin_cannot_be_read(version, expected):
    features = _vendors._features_from_version("cuda", None, version, "assumed")
    assert features.tma_descriptors is expected


def test_tma_support_is_read_from_the_plugin_binary(tmp_path, monkeypatch):
    with_marker, without = tmp_path / "new.so", tmp_path / "old.so"
    with_marker.write_bytes(b"\0create_tma_descriptor_parameter\0")
    without.write_bytes(b"\0create_array_parameter\0")

    def read(path):  # the features of a plugin whose `_triton` is the file at `path`
        module = types.SimpleNamespace(__name__="p._triton", __file__=str(path))
        monkeypatch.setattr(_vendors, "plugin_triton_module", lambda platform: module)
        return _vendors.plugin_features.__wrapped__("cuda")  # uncached

    assert read(with_marker).tma_descriptors and not read(without).tma_descriptors
