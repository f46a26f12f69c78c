"""Lowering for platform `cuda` on a machine without a GPU, read back as jaxlib reads it (and by
jaxlib's own parser where its CUDA plugin imports); jaxlib's Triton call: XLA's is
`test_xla_native`'s."""

import re
import zlib

import jax
import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.routes.jaxlib import _proto
from tests.support import kernels
from tests.support.binary_utils import check_cubin
from tests.support.lowering_utils import (captured_lowerings, lower_for, lower_one,
                                          opaque_metadata, spec)

cuda_triton = _vendors.plugin_triton_module("cuda")
needs_cuda_plugin = pytest.mark.skipif(
    cuda_triton is None, reason="needs jaxlib's CUDA plugin (pip install jax-cuda13-plugin)")

X = spec((4096,), jnp.float32)


def _add_call(**kwargs):
    return lower_one(lambda x, y: kernels.add(x, y, **kwargs), X, X, platform="cuda")


def test_opaque_parses_as_jaxlib_reads_it():
    call = lower_one(lambda x, y: jtr.triton_call(
        x, y, x.size, kernel=kernels.add_kernel, out_shape=x, grid=(16,), BLOCK=256,
        serialized_metadata=b"user-metadata"), X, X, platform="cuda")
    assert opaque_metadata(call.opaque) == b"user-metadata"


@needs_cuda_plugin
def test_the_plugin_registers_the_typed_ffi_target():
    assert "triton_kernel_call_ffi" in cuda_triton.registrations()


def test_a_plain_call_takes_the_typed_ffi_target():
    call = _add_call()
    assert call.target == "triton_kernel_call_ffi"
    assert call.typed_ffi


def test_decodes_to_the_intended_kernel_grid_and_parameters():
    kernel_call = _add_call(block=512).message.kernel_call
    assert kernel_call.kernel.kernel_name == "add_kernel"
    assert kernel_call.kernel.num_warps == 4
    assert (kernel_call.grid_0, kernel_call.grid_1, kernel_call.grid_2) == (8, 1, 1)
    kinds = [p.WhichOneof("value") for p in kernel_call.parameters]
    assert kinds == ["array", "array", "i32", "array"]
    assert kernel_call.parameters[2].i32 == 4096
    assert all(p.array.ptr_divisibility == 16 for p in kernel_call.parameters if p.HasField("array"))


def _compiled_for(arch):
    """The kernel call and the compiled kernel of `kernels.add` lowered for `arch`."""
    jax.clear_caches()  # JAX would serve an earlier lowering for the same arch, emitting nothing
    with captured_lowerings() as lowered:
        call = lower_one(kernels.add, X, X, platform="cuda", arch=arch)
    return call.message.kernel_call.kernel, lowered[0].kernels[0]


def test_compiles_for_the_named_arch():
    kernel, compiled = _compiled_for("sm_90")
    assert re.search(r"^\.target sm_90a?\b", compiled.asm, re.M)
    assert kernel.compute_capability == 90
    assert ".entry add_kernel" in compiled.asm


def test_carries_the_cubin_in_module_image_where_the_plugin_loads_it():
    kernel = _add_call().message.kernel_call.kernel
    features = _vendors.plugin_features("cuda") or _vendors.assumed_features("cuda")
    if features.module_image:
        check_cubin(kernel.module_image.object_file, 90)
        assert kernel.module_image.kernel_name == "add_kernel"
        # The ROCm encoding exactly: jaxlib keys loaded modules by `ptx`, so it names the binary.
        assert kernel.ptx == _proto.module_image_ptx(kernel.module_image.object_file)
    else:
        assert not kernel.HasField("module_image")
        assert ".entry add_kernel" in kernel.ptx


def test_another_arch_gives_another_binary():
    sm80, sm80_compiled = _compiled_for(80)
    sm90 = lower_one(kernels.add, X, X, platform="cuda", arch="9.0").message.kernel_call.kernel
    assert (sm80.compute_capability, sm90.compute_capability) == (80, 90)
    assert re.search(r"^\.target sm_80\b", sm80_compiled.asm, re.M)
    assert sm80.ptx != sm90.ptx


def test_scalars_are_typed_like_tritons_launcher():
    def f(x):
        return jtr.triton_call(x, 2.5, 2**40, True, x.size, kernel=kernels.scale_shift_kernel,
                               out_shape=x, grid=(4,), BLOCK=1024)

    params = lower_one(f, X, platform="cuda").message.kernel_call.parameters
    assert [p.WhichOneof("value") for p in params] == ["array", "f32", "i64", "bool", "i32",
                                                        "array"]
    assert (params[1].f32, params[2].i64, params[3].bool) == (2.5, 2**40, True)


def test_an_int_equal_to_one_becomes_a_constexpr():
    def f(x):
        return jtr.triton_call(x, 2.0, 1, False, x.size, kernel=kernels.scale_shift_kernel,
                               out_shape=x, grid=(4,), BLOCK=1024)

    params = lower_one(f, X, platform="cuda").message.kernel_call.parameters
    assert [p.WhichOneof("value") for p in params] == ["array", "f32", "bool", "i32", "array"]


def test_zeroed_outputs_carry_their_size():
    def f(x):
        return jtr.triton_call(x, x.size, kernel=kernels.atomic_sum_kernel,
                               out_shape=jax.ShapeDtypeStruct((3,), jnp.float32), grid=(4,),
                               BLOCK=1024, zeroed_outputs=(0,))

    params = lower_one(f, X, platform="cuda").message.kernel_call.parameters
    assert params[-1].array.bytes_to_zero == 12
    assert params[0].array.bytes_to_zero == 0


def test_a_zeroed_output_without_a_pointer_of_its_own_is_zeroed_through_its_input():
    # jax-triton 0.4's layout: the output aliased to the accumulator fills no parameter.
    def f(x, total):
        return jtr.triton_call(x, x.size, total, kernel=kernels.atomic_sum_kernel,
                               out_type=total, grid=(4,), BLOCK=1024,
                               input_output_aliases={2: 0}, zeroed_outputs=(0,))

    call = lower_one(f, X, spec((3,), jnp.float32), platform="cuda").message.kernel_call
    assert [p.array.bytes_to_zero for p in call.parameters if p.HasField("array")] == [0, 12]


def test_input_output_aliases_become_operand_aliases():
    def f(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernels.add_inplace_kernel, out_shape=x,
                               grid=(16,), BLOCK=256, input_output_aliases={0: 0})

    text = lower_for(f, X, X, platform="cuda").as_text()
    assert "output_operand_aliases" in text


def test_two_outputs_and_a_callable_grid():
    def f(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernels.sum_and_diff_kernel,
                               out_shape=(x, x), grid=lambda meta: (4096 // meta["BLOCK"],),
                               BLOCK=128)

    call = lower_one(f, X, X, platform="cuda").message.kernel_call
    assert call.grid_0 == 32
    assert [p.WhichOneof("value") for p in call.parameters] == ["array"] * 2 + ["i32"] + \
        ["array"] * 2


def test_opaque_is_zlib_of_the_serialized_call():
    call = _add_call()
    assert _proto.decode(zlib.decompress(call.opaque)) == call.message


def test_export_with_the_custom_call_allowed():
    export = pytest.importorskip("jax.export")
    target = "triton_kernel_call_ffi"
    with jtr.target_arch(cuda="sm_90"):
        exported = export.export(
            jax.jit(kernels.add), platforms=["cuda"],
            disabled_checks=[export.DisabledSafetyCheck.custom_call(target)])(X, X)
    assert exported.platforms == ("cuda",)
    assert target in exported.mlir_module()


def test_lowering_leaves_tritons_environment_alone():
    import os

    before = {k: v for k, v in os.environ.items() if k.startswith("TRITON")}
    _add_call(block=64)
    assert {k: v for k, v in os.environ.items() if k.startswith("TRITON")} == before


def test_the_ir_travels_in_ttir_only_in_debug_mode(capsys):
    plain = _add_call().message.kernel_call.kernel
    debug = _add_call(debug=True).message.kernel_call.kernel
    assert plain.ttir == ""  # jaxlib reads it for nothing, and copies it at every launch
    assert "tt.func public @add_kernel" in debug.ttir
    assert "--- TTIR ---" in capsys.readouterr().out
