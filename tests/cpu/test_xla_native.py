"""XLA's own Triton custom call, taken on request (`xla_native`): what the lowering emits, and
when it declines (where the call asked for it, with an error naming `xla_native`; where
JAX_TRITON_ROCM_XLA_NATIVE=1 did, with a log and jaxlib's call). Layouts, scalars and
re-lowering on this route: `test_xla_route`.

Lowered for CUDA and ROCm on a machine without a GPU; the backend config is read back from the
StableHLO, and its IR parsed with jaxlib's Triton dialect, as XLA will.
"""

import logging
import warnings

import jax
import jax.numpy as jnp
import pytest
import triton

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env, _state
from jax_triton_rocm.routes.xla import _xla_native
from tests.support import autotune_utils, kernels
from tests.support import gluon_kernels as gk
from tests.support.lowering_utils import (ir_text, kernel_signature, lower_for, native_calls,
                                          one_native_call, spec)

PLATFORMS = ["cuda", "rocm"]
X = spec((1000,), jnp.float32)


# The route is chosen when a call is lowered; JAX reuses lowerings across tests otherwise.
pytestmark = pytest.mark.usefixtures("fresh_lowerings")


def native_add(x, y, **kwargs):
    return kernels.add(x, y, xla_native=True, **kwargs)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_native_call_carries_the_ir_and_launch_fields(platform):
    call = one_native_call(lambda a, b: native_add(a, b, block=128, num_warps=2), X, X,
                           platform=platform)
    assert call["name"] == "add_kernel"
    assert (call["grid_x"], call["grid_y"], call["grid_z"]) == (triton.cdiv(1000, 128), 1, 1)
    assert call["num_warps"] == 2
    assert call["debug"] is False
    # x, y, then n as a 0-d operand the trampoline loads, then the output.
    assert kernel_signature(call["ir"], "add_kernel") == [
        "!tt.ptr<f32>", "!tt.ptr<f32>", "!tt.ptr<i32>", "!tt.ptr<f32>"]
    assert call["operands"] == ["tensor<1000xf32>", "tensor<1000xf32>", "tensor<i32>"]


@pytest.mark.parametrize("platform,options_class", [
    ("cuda", "triton.backends.nvidia.compiler.CUDAOptions"),
    ("rocm", "triton.backends.amd.compiler.HIPOptions")])
def test_num_stages_is_the_one_triton_compiled_with(platform, options_class):
    import importlib

    module, name = options_class.rsplit(".", 1)
    default = getattr(importlib.import_module(module), name).num_stages
    assert one_native_call(native_add, X, X, platform=platform)["num_stages"] == default
    assert one_native_call(lambda a, b: native_add(a, b, num_stages=1), X, X,
                           platform=platform)["num_stages"] == 1


@pytest.mark.parametrize("platform", PLATFORMS)
def test_runtime_scalars_are_0d_operands_that_the_kernel_loads(platform):
    def scale_shift(x, scale):
        return jtr.triton_call(x, scale, 7, True, x.size, kernel=kernels.scale_shift_kernel,
                               out_shape=x, grid=(4,), BLOCK=256, xla_native=True)

    lowered = lower_for(lambda x: scale_shift(x, 2.5), X, platform=platform)
    [call] = native_calls(lowered)
    assert kernel_signature(call["ir"], "scale_shift_kernel") == [
        "!tt.ptr<f32>", "!tt.ptr<f32>", "!tt.ptr<i32>", "!tt.ptr<i1>", "!tt.ptr<i32>",
        "!tt.ptr<f32>"]
    assert call["operands"][1:] == ["tensor<f32>", "tensor<i32>", "tensor<i1>", "tensor<i32>"]
    text = ir_text(call["ir"])
    assert "2.500000e+00" not in text and "tt.load" in text
    assert "2.500000e+00" in lowered.as_text()  # the value is a constant of the program
    other = one_native_call(lambda x: scale_shift(x, 0.75), X, platform=platform)
    assert other["ir"] == call["ir"]  # one kernel for every value


def test_two_outputs_are_pointers_after_the_inputs():
    def sum_and_diff(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernels.sum_and_diff_kernel,
                               out_shape=(x, x), grid=(4,), BLOCK=256, xla_native=True)

    call = one_native_call(sum_and_diff, X, X, platform="cuda")
    assert kernel_signature(call["ir"], "sum_and_diff_kernel") == [
        "!tt.ptr<f32>", "!tt.ptr<f32>", "!tt.ptr<i32>", "!tt.ptr<f32>", "!tt.ptr<f32>"]


def test_input_output_aliases_become_the_calls_operand_aliases():
    def inplace(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernels.add_inplace_kernel, out_shape=x,
                               grid=(4,), BLOCK=256, input_output_aliases={0: 0},
                               xla_native=True)

    call = one_native_call(inplace, X, X, platform="cuda")
    assert "output_operand_alias" in call["aliases"]
    assert "operand_index = 0" in call["aliases"]


def test_wave32_amd_keeps_num_warps_in_device_warps():
    # jaxlib's route refuses an odd num_warps on wave32 (it launches 64-thread warps); XLA
    # launches num_warps * 32 threads there, as Triton compiled the kernel.
    call = one_native_call(lambda a, b: native_add(a, b, num_warps=1), X, X, platform="rocm",
                           arch="gfx1100")
    assert call["num_warps"] == 1


def test_environment_turns_the_route_on_for_calls_that_do_not_say(monkeypatch):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "1")
    assert len(native_calls(lower_for(kernels.add, X, X, platform="cuda"))) == 1
    lowered = lower_for(lambda a, b: kernels.add(a, b, xla_native=False), X, X, platform="cuda")
    assert native_calls(lowered) == []
    assert [c.target for c in jtr.kernel_calls(lowered)] == ["triton_kernel_call_ffi"]


def test_environment_turns_the_route_off_for_calls_that_do_not_say(monkeypatch):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "0")
    lowered = lower_for(kernels.sized_add, X, X, platform="cuda")
    assert native_calls(lowered) == []
    assert [c.target for c in jtr.kernel_calls(lowered)] == ["triton_kernel_call_ffi"]
    lowered = lower_for(lambda a, b: kernels.sized_add(a, b, xla_native=True), X, X,
                        platform="cuda")
    assert len(native_calls(lowered)) == 1


def test_junk_environment_value_is_named(monkeypatch):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "maybe")
    with pytest.raises(ValueError, match="JAX_TRITON_ROCM_XLA_NATIVE='maybe'"):
        lower_for(kernels.add, X, X, platform="cuda")


def test_non_bool_keyword_is_named():
    with pytest.raises(TypeError, match="xla_native='yes'"):
        jax.eval_shape(lambda a, b: kernels.add(a, b, xla_native="yes"), X, X)


def _lowers_through_jaxlib(fn, *args, platform="cuda", reason, caplog):
    """`fn` (a call that did not choose a route) lowers through jaxlib's route under
    JAX_TRITON_ROCM_XLA_NATIVE=1, logging `reason`."""
    with caplog.at_level(logging.DEBUG, logger="jax_triton_rocm"):
        lowered = lower_for(fn, *args, platform=platform)
    assert native_calls(lowered) == []
    assert jtr.kernel_calls(lowered), "the call was not emitted through jaxlib's route either"
    logged = [r.getMessage() for r in caplog.records
              if getattr(r, "jax_triton_rocm_route", "").startswith("jaxlib")]
    assert logged and reason in logged[-1], logged


def _refused_and_falls_back(call, *args, platform="cuda", reason, caplog, monkeypatch):
    """`call(*args, xla_native=...)` raises naming xla_native and `reason` when it asks for
    XLA's route, and falls back to jaxlib's, logging `reason`, when the environment does."""
    with pytest.raises(ValueError, match=r"xla_native=True\) cannot be honoured") as refused:
        lower_for(lambda *a: call(*a, xla_native=True), *args, platform=platform)
    assert reason in str(refused.value)
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "1")
    _lowers_through_jaxlib(call, *args, platform=platform, reason=reason, caplog=caplog)


def test_an_autotuned_kernel_without_a_remembered_choice_refuses_xla_native(caplog,
                                                                            monkeypatch):
    _refused_and_falls_back(autotune_utils.tuned_add, X, X, reason="no configuration is "
                            "remembered", caplog=caplog, monkeypatch=monkeypatch)


@pytest.mark.parametrize("platform,warp", [("cuda", 32), ("rocm", 64)])
def test_a_gluon_kernel_refuses_xla_native(platform, warp, caplog, monkeypatch):
    def copy(x, **kwargs):
        return jtr.triton_call(x, x.size, kernel=gk.copy_kernel, out_shape=x, grid=(1,),
                               BLOCK=1024, WARP_SIZE=warp, NUM_WARPS=4, **kwargs)

    _refused_and_falls_back(copy, X, platform=platform, reason="Gluon", caplog=caplog,
                            monkeypatch=monkeypatch)


def test_zeroed_outputs_are_zero_filled_operands_aliased_to_them():
    def total(x):
        return jtr.triton_call(x, x.size, kernel=kernels.atomic_sum_kernel,
                               out_shape=jax.ShapeDtypeStruct((1,), jnp.float32), grid=(1,),
                               BLOCK=1024, zeroed_outputs=(0,), xla_native=True)

    lowered = lower_for(total, X, platform="cuda")
    [call] = native_calls(lowered)
    assert call["operands"] == ["tensor<1000xf32>", "tensor<1xf32>", "tensor<i32>"]
    assert "operand_index = 1" in call["aliases"]
    assert kernel_signature(call["ir"], "atomic_sum_kernel") == [
        "!tt.ptr<f32>", "!tt.ptr<f32>", "!tt.ptr<i32>", "!tt.ptr<f32>"]


@pytest.mark.parametrize("setting,reason", [
    ({"maxnreg": 64}, "maxnreg"), ({"debug": True}, "debug=True"),
    ({"enable_fp_fusion": False}, "enable_fp_fusion=False"), ({"num_ctas": 2}, "num_ctas=2"),
    ({"serialized_metadata": b"mine"}, "serialized_metadata")])
def test_a_launch_setting_xla_cannot_pass_refuses_xla_native(setting, reason, caplog,
                                                             monkeypatch):
    _refused_and_falls_back(lambda a, b, **k: kernels.add(a, b, **setting, **k), X, X,
                            reason=reason, caplog=caplog, monkeypatch=monkeypatch)


def _unparseable_ir_call(monkeypatch, expression):
    """A call on XLA's route of a new kernel computing `expression`, whose IR the patched parser
    refuses with 'tt.future_thing'."""
    def refuse(text):
        raise ValueError("unknown attribute 'tt.future_thing'")

    monkeypatch.setattr(_xla_native, "parse_ttir", refuse)
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "1")
    kernel = kernels.elementwise_kernel(expression)
    return lambda a, b: jtr.triton_call(a, b, a.size, kernel=kernel, out_shape=a, grid=(4,),
                                        BLOCK=256)


def test_unparseable_ir_falls_back_with_one_warning_per_kernel(monkeypatch, caplog):
    mul = _unparseable_ir_call(monkeypatch, "x * y")

    with pytest.warns(RuntimeWarning, match="tt.future_thing") as first:
        _lowers_through_jaxlib(mul, X, X, reason="cannot parse", caplog=caplog)
    assert len([w for w in first if "tt.future_thing" in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same kernel again: no second warning
        jax.clear_caches()
        _lowers_through_jaxlib(mul, X, X, reason="cannot parse", caplog=caplog)


def test_a_kernels_ir_is_checked_once_however_often_its_call_is_planned(monkeypatch, caplog):
    call = _unparseable_ir_call(monkeypatch, "x + 2 * y")

    with pytest.warns(RuntimeWarning, match="tt.future_thing"):
        _lowers_through_jaxlib(call, X, X, reason="cannot parse", caplog=caplog)
    _state.PLANS.clear()  # planned again: the compiled kernel's IR check is kept in its record
    _state.LOWERED_CALLS.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jax.clear_caches()
        _lowers_through_jaxlib(call, X, X, reason="cannot parse", caplog=caplog)


def test_unparseable_ir_refuses_xla_native_naming_the_parser(monkeypatch):
    def refuse(text):
        raise ValueError("unknown attribute 'tt.other_thing'")

    monkeypatch.setattr(_xla_native, "parse_ttir", refuse)
    kernel = kernels.elementwise_kernel("x - y")
    with pytest.warns(RuntimeWarning), pytest.raises(ValueError, match="tt.other_thing"):
        lower_for(lambda a, b: jtr.triton_call(a, b, a.size, kernel=kernel, out_shape=a,
                                               grid=(4,), BLOCK=256, xla_native=True),
                  X, X, platform="cuda")


def test_parse_check_accepts_the_ir_triton_writes():
    # The real check, on this environment's Triton and jaxlib: the CI lanes cover every
    # supported pair, so a Triton release whose IR a supported jaxlib cannot read fails here.
    call = one_native_call(lambda a, b: kernels.matmul(a, b, xla_native=True),
                           spec((64, 32), jnp.float16), spec((32, 64), jnp.float16),
                           platform="cuda")
    assert "tt.dot" in ir_text(call["ir"])


def test_ir_that_jaxlib_cannot_parse_is_refused_with_the_parsers_words():
    # Triton 3.6-3.7 write tensor descriptor types in a form no supported jaxlib reads.
    ttir = """module {
  tt.func public @k(%d: !tt.tensordesc<tensor<32x32xf16>>, %o: !tt.ptr<f16>) {
    tt.return
  }
}"""
    compiled = _xla_native_kernel(name="k", ttir=ttir)
    with pytest.warns(RuntimeWarning, match="kernel k takes jaxlib's Triton call") as record:
        reason = _xla_native.checked_ir(compiled, 2).reason
    assert "tensordesc" in reason and "cannot parse" in reason
    assert len(record) == 1


def test_ir_whose_kernel_takes_a_scalar_is_refused():
    ttir = """module {
  tt.func public @k(%x: !tt.ptr<f32>, %n: i32) {
    tt.return
  }
}"""
    reason = _xla_native.checked_ir(_xla_native_kernel(name="k", ttir=ttir), 2).reason
    assert "(!tt.ptr<f32>, i32)" in reason


def _xla_native_kernel(*, name, ttir):
    import uuid

    from jax_triton_rocm.compile._compile import CompiledKernel

    return CompiledKernel(key=uuid.uuid4().hex, name=name, binary=b"", asm="", ttir=ttir,
                          shared_mem_bytes=0, num_warps=4, num_ctas=1, warp_size=32,
                          global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0,
                          metadata={})


def test_lowering_the_same_call_again_makes_no_compile_job(monkeypatch):
    from jax_triton_rocm.compile import _compile

    first = one_native_call(native_add, X, X, platform="cuda")
    jobs = []
    original = _compile.make_job
    monkeypatch.setattr(_compile, "make_job", lambda *a, **k: jobs.append(a) or original(*a, **k))
    jax.clear_caches()
    again = one_native_call(native_add, X, X, platform="cuda")
    assert jobs == [] and again == first  # the call kept in the lowered-call memo
    jtr.clear_caches()
    one_native_call(native_add, X, X, platform="cuda")
    assert len(jobs) == 1


def test_kernel_calls_lists_xlas_calls_with_their_summary():
    lowered = lower_for(lambda a, b: (native_add(a, b, block=128),
                                      kernels.add(a, b, xla_native=False)), X, X,
                        platform="cuda")
    native, jaxlib = jtr.kernel_calls(lowered)
    assert (native.target, jaxlib.target) == ("__gpu$xla.gpu.triton", "triton_kernel_call_ffi")
    assert native.message is None and native.opaque == b""
    [launch] = native.summary()["launches"]
    assert launch["kernel"] == "add_kernel" and launch["grid"] == (triton.cdiv(1000, 128), 1, 1)
    assert launch["parameters"] == ["array"] * 4 and launch["ir_bytes"] > 0
    assert kernel_signature(native.native["ir"], "add_kernel")[2] == "!tt.ptr<i32>"


@pytest.mark.parametrize("name", ["scale v2", 'a "quoted" name'])
def test_the_calls_name_survives_xlas_route(name):
    """XLA's backend config has no field for the call's name: it rides as a frontend attribute,
    which the HLO carries and `summary()` reads back (the kernel's name stays the tt.func)."""
    lowered = lower_for(lambda a, b: native_add(a, b, name=name), X, X, platform="cuda")
    [native] = jtr.kernel_calls(lowered)
    assert native.summary()["name"] == name
    assert native.summary()["launches"][0]["kernel"] == "add_kernel"
    assert "jax_triton_rocm.name=" in lowered.as_text(dialect="hlo")
