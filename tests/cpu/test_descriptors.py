"""`TensorDescriptor` operands through `triton_call`: run in Triton's interpreter on the CPU, and
lowered without a GPU for sm_90 (a TMA map that jaxlib encodes at launch, checked against
jaxlib's own parser), sm_80, gfx942 and gfx950 (plain parameters); with the errors where the
installed jaxlib cannot launch them."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from tests.support.surface_kernels import (desc_block_kernel, device_desc_copy_kernel,
                                           gluon_tma_copy_kernel, two_desc_kernel)
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _compat
from tests.support.lowering_utils import lower_for, opaque_metadata

# On the CPU, where the interpreter runs (on a GPU machine too); GPUs: test_operand_routes.py.
BASE = jax.device_put(jnp.arange(40 * 64, dtype=jnp.float32).reshape(40, 64),
                      jax.devices("cpu")[0])


def copy_block(desc, m=16, n=64, **kwargs):
    return jtr.triton_call(desc, kernel=desc_block_kernel, grid=1, M=m, N=n,
                           out_type=jax.ShapeDtypeStruct((m, n), desc.base.dtype), **kwargs)


@pytest.mark.parametrize("padding,fill", [("zero", 0.0), ("nan", np.nan)])
def test_the_interpreter_reads_through_a_descriptor_with_its_padding(padding, fill):
    # Rows 16..31 of a 20-row view: 4 inside, 12 padded.
    desc = jtr.TensorDescriptor(BASE, (20, 64), (64, 1), (16, 64), padding=padding)
    out = np.asarray(copy_block(desc))
    np.testing.assert_array_equal(out[:4], BASE[16:20])
    np.testing.assert_array_equal(out[4:], np.full((12, 64), fill, np.float32))


def test_descriptors_under_jit_and_vmap_each_describe_one_example():
    stacked = jnp.stack([BASE, BASE + 1])
    out = jax.jit(jax.vmap(lambda b: copy_block(jtr.TensorDescriptor.from_array(b, [16, 64]))))(
        stacked)
    np.testing.assert_array_equal(out, stacked[:, 16:32])


def test_a_descriptor_over_a_ref_sees_its_value():
    ref = jax.new_ref(BASE)
    desc = jtr.TensorDescriptor.from_array(ref, [16, 64])
    np.testing.assert_array_equal(copy_block(desc), BASE[16:32])


def test_a_descriptor_with_batch_grid_axis_is_refused():
    with pytest.raises(NotImplementedError, match="batch_grid_axis with a TensorDescriptor"):
        copy_block(jtr.TensorDescriptor.from_array(BASE, [16, 64]), batch_grid_axis=1)


def _lowered(arch: str, platform: str) -> jax.stages.Lowered:
    return lower_for(lambda b: copy_block(jtr.TensorDescriptor.from_array(b, [16, 64])), BASE,
                     platform=platform, arch=arch)


@pytest.mark.parametrize("arch,platform,params", [
    ("sm_90", "cuda", ["tensor_descriptor", "i32", "i32", "i64", "i64", "array"]),
    ("sm_80", "cuda", ["array", "i64", "i64", "i64", "i64", "bool", "i32", "i32", "i64", "i64",
                       "array"]),
    ("gfx942", "rocm", ["array", "i64", "i64", "i64", "i64", "bool", "i32", "i32", "i64", "i64",
                        "array"]),
    ("gfx950", "rocm", ["array", "i64", "i64", "i64", "i64", "bool", "i32", "i32", "i64", "i64",
                        "array"])])
def test_a_descriptor_becomes_tma_on_sm90_and_plain_parameters_elsewhere(arch, platform, params):
    if arch == "sm_90" and not _tma_plugin():  # jax 0.10.2: refused, naming the release
        with pytest.raises(NotImplementedError, match=r"from jax/jaxlib 0\.11\.1 on"):
            _lowered(arch, platform)
        return
    [call] = jtr.kernel_calls(_lowered(arch, platform))
    launched = call.summary()["launches"][0]["parameters"]
    if _compat.triton_info().version.startswith("3.9") and "bool" in params:
        params = params[:6] + ["bool"] + params[6:]  # Triton 3.9 adds a round-to-TF32 flag
    assert launched == params


def _tma_plugin() -> bool:
    """Whether the jaxlib that lowerings for CUDA assume here encodes TMA descriptors."""
    features = _vendors.plugin_features("cuda") or _vendors.assumed_features("cuda")
    return features.tma_descriptors


@pytest.mark.skipif(not _tma_plugin(), reason="the jaxlib here (its CUDA plugin's, else the "
                                             "installed one) is older than 0.11.1, which "
                                             "encodes TMA descriptors")
def test_a_call_with_a_tma_parameter_parses_as_jaxlib_reads_it():
    [call] = jtr.kernel_calls(_lowered("sm_90", "cuda"))
    tma = call.message.kernel_call.parameters[0].tensor_descriptor.nvidia
    assert (list(tma.shape), list(tma.strides), tma.oob_fill) == ([40, 64], [64, 1], 0)
    assert opaque_metadata(call.opaque) == b""


def _old_plugin(monkeypatch):
    """The plugin of jax 0.11.0 (no TMA descriptors, no global scratch) stands for this one."""
    old = _vendors.PluginFeatures("cuda", "jax_cuda13_plugin", True, False,
                                 "jax-cuda13-plugin release 0.11.0", tma_descriptors=False)
    monkeypatch.setattr(_vendors, "plugin_features", lambda platform: old)
    monkeypatch.setattr(_vendors, "assumed_features", lambda platform: old)


def test_a_plugin_without_tma_names_the_jax_release_needed(monkeypatch, fresh_lowerings):
    _old_plugin(monkeypatch)
    with pytest.raises(NotImplementedError, match=r"jax/jaxlib 0\.11\.1 on; the jaxlib plugin "
                                                  r"here \(jax-cuda13-plugin release 0\.11\.0\)"):
        _lowered("sm_90", "cuda")


def test_a_descriptor_built_in_the_kernel_names_the_jax_release_it_needs_on_sm90(monkeypatch,
                                                                                 fresh_lowerings):
    _old_plugin(monkeypatch)
    with pytest.raises(NotImplementedError, match=r"global scratch memory.*Upgrade jax and its "
                                                  r"plugin to 0\.11\.1 or newer"):
        lower_for(lambda x: jtr.triton_call(x, kernel=device_desc_copy_kernel, out_type=x, grid=1,
                                            M=32, N=32), BASE[:32, :32], platform="cuda")


def test_round_to_tf32_where_the_interpreter_cannot_is_refused_not_ignored():
    base = BASE / 7  # values TF32 cannot hold
    desc = jtr.TensorDescriptor.from_array(base, [16, 64], round_f32_to_tf32=True)
    if _compat.triton_info().version.startswith("3.6"):
        with pytest.raises(Exception, match=r"round_f32_to_tf32=True\) on the CPU needs"):
            copy_block(desc)
        return
    expected = jax.lax.reduce_precision(base[16:32], exponent_bits=8, mantissa_bits=10)
    assert not np.array_equal(expected, base[16:32])
    np.testing.assert_array_equal(copy_block(desc), expected)


def two_descriptors(a, b):
    return jtr.triton_call(jtr.TensorDescriptor.from_array(a, [16, 64]),
                           jtr.TensorDescriptor.from_array(b, [16, 64]), kernel=two_desc_kernel,
                           out_type=jax.ShapeDtypeStruct((16, 64), jnp.float32), grid=1, M=16,
                           N=64)


def test_each_descriptor_gets_its_own_tma_map():
    if not _tma_plugin():
        pytest.skip("needs a jaxlib (0.11.1+) that encodes TMA descriptors")
    a, b = BASE[:16], BASE[:16].astype(jnp.bfloat16)
    [call] = jtr.kernel_calls(lower_for(two_descriptors, a, b, platform="cuda"))
    maps = [p.tensor_descriptor.nvidia for p in call.message.kernel_call.parameters
            if p.WhichOneof("value") == "tensor_descriptor"]
    assert [m.elem_type for m in maps] == [7, 9]  # CUDA's float32, bfloat16
    assert [list(m.block_shape) for m in maps] == [[16, 32], [16, 64]]  # 128-byte rows
    np.testing.assert_array_equal(two_descriptors(a, b), a + b.astype(jnp.float32))


def test_a_gluon_kernel_takes_a_descriptor_with_its_shared_layout_as_tma():
    if not _tma_plugin():
        pytest.skip("needs a jaxlib (0.11.1+) that encodes TMA descriptors")
    from triton.experimental.gluon import language as gl

    x = BASE[:16, :32]
    layout = gl.NVMMASharedLayout(128, element_bitwidth=32, rank=2)
    with jtr.target_arch(cuda="sm_90"):
        lowered = jax.jit(lambda x: jtr.triton_call(
            jtr.TensorDescriptor.from_array(x, [16, 32], layout=layout),
            kernel=gluon_tma_copy_kernel, out_type=x, grid=1, M=16, N=32)).trace(x).lower(
                lowering_platforms=("cuda",))
    [call] = jtr.kernel_calls(lowered)
    assert call.summary()["launches"][0]["parameters"][0] == "tensor_descriptor"
    assert call.message.kernel_call.kernel.global_scratch_size > 0  # the kernel's own
