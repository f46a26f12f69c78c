"""jax-triton 0.4's options of `triton_call`: `backend_options` (merged with the explicit
settings, passed to the vendor that has them), `has_side_effect`, `cost_estimate`, and JAX
never dropping a call; checked on the spec and on lowerings for sm_90 and gfx942 (no GPU)."""

import re

import jax
import jax.numpy as jnp
import pytest
import triton
import triton.language as tl
from jax.interpreters import partial_eval as pe

import jax_triton_rocm as jtr
from jax_triton_rocm import backends
from jax_triton_rocm.compile import _compile
from jax_triton_rocm.plan import _plan
from jax_triton_rocm.routes import _arch
from jax_triton_rocm.routes.xla import _xla_native
from tests.support import autotune_utils, kernels
from tests.support.lowering_utils import lowered_text

X = jax.device_put(jnp.arange(1000, dtype=jnp.float32), jax.devices("cpu")[0])


def spec_of(fn, *args):
    [eqn] = [e for e in jax.make_jaxpr(fn)(*args).eqns if e.primitive is jtr.triton_kernel_p]
    return eqn.params["spec"]


def test_backend_options_give_the_settings_the_explicit_arguments_give():
    by_options = spec_of(lambda x, y: kernels.add(x, y, backend_options={
        "num_warps": 2, "num_stages": 1, "debug": True, "enable_fp_fusion": False}), X, X)
    explicit = spec_of(lambda x, y: kernels.add(x, y, num_warps=2, num_stages=1, debug=True,
                                                enable_fp_fusion=False), X, X)
    assert by_options == explicit and by_options.num_warps == 2


def test_a_setting_given_both_ways_is_an_error_naming_both():
    with pytest.raises(ValueError, match=r"num_warps is given both as an argument of "
                                         r"triton_call \(num_warps=4\) and in backend_options"):
        kernels.add(X, X, num_warps=4, backend_options={"num_warps": 2})


def test_an_unhashable_backend_option_is_named():
    with pytest.raises(TypeError, match=r"backend_options\['extern_libs'\] must be hashable"):
        kernels.add(X, X, backend_options={"extern_libs": {"libdevice": "/path"}})


@pytest.mark.parametrize("key,match", [
    ("num_wraps", r"backend_options\['num_wraps'\] is no Triton compile option of any "
                  r"installed vendor backend.*max_num_imprecise_acc_default"),
    ("arch", r"backend_options\['arch'\] cannot be set here: the target's architecture")])
def test_a_backend_option_no_vendor_takes_is_refused(key, match):
    with pytest.raises(ValueError, match=match):
        kernels.add(X, X, backend_options={key: 1})


def test_a_vendor_knob_in_backend_options_is_the_keyword_and_clashes_with_it():
    assert spec_of(lambda x, y: kernels.add(x, y, backend_options={"waves_per_eu": 2}),
                   X, X).options == (("waves_per_eu", 2),)
    with pytest.raises(ValueError, match="waves_per_eu is given both"):
        kernels.add(X, X, waves_per_eu=1, backend_options={"waves_per_eu": 2})


def _triton_options(platform: str, spec):
    backend = backends.backend(platform)
    target = _arch.GpuArch(platform, {"cuda": "sm_90", "rocm": "gfx942"}[platform],
                                      "test")
    [launch] = _plan.launches(spec, (X, X), (X,), backend.answers(target).launch_site)
    return _compile.triton_options(launch, spec, backend.compile_options, backend.option_names)


def test_a_triton_option_reaches_only_the_vendor_whose_options_have_it():
    spec = spec_of(lambda x, y: kernels.add(x, y, backend_options={
        "schedule_hint": "attention", "max_num_imprecise_acc_default": 8}), X, X)
    rocm, cuda = _triton_options("rocm", spec), _triton_options("cuda", spec)
    assert rocm["schedule_hint"] == "attention" and "schedule_hint" not in cuda
    assert rocm["max_num_imprecise_acc_default"] == cuda["max_num_imprecise_acc_default"] == 8


def test_a_triton_option_takes_the_call_off_xlas_route():
    spec = spec_of(lambda x, y: kernels.add(x, y, backend_options={
        "max_num_imprecise_acc_default": 8}), X, X)
    assert "max_num_imprecise_acc_default" in _xla_native.unfit_before_compile(spec).reason


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_has_side_effect_marks_the_custom_call(platform):
    assert spec_of(lambda x, y: kernels.add(x, y, has_side_effect=True), X, X).has_side_effect
    for route in (False, True):  # jaxlib's call and XLA's both keep it
        text = lowered_text(lambda x, y: kernels.add(x, y, has_side_effect=True,
                                                     xla_native=route), X, X, platform=platform)
        target = "__gpu\\$xla.gpu.triton" if route else "triton_kernel_call_ffi"
        assert re.search(rf"custom_call @{target}.*has_side_effect = true", text), text
        plain = lowered_text(lambda x, y: kernels.add(x, y, xla_native=route), X, X,
                             platform=platform)
        assert "has_side_effect" not in plain


def test_has_side_effect_keeps_the_interpreters_callback():
    text = lowered_text(lambda x, y: kernels.add(x, y, has_side_effect=True), X, X,
                        platform="cpu")
    assert re.search(r"custom_call @xla_ffi_python_cpu_callback.*has_side_effect = true", text)


@triton.jit
def print_sum_kernel(x_ptr, n, BLOCK: tl.constexpr):
    """Prints a sum and writes no memory: only a side effect keeps its call."""
    offsets = tl.arange(0, BLOCK)
    tl.device_print("sum", tl.sum(tl.load(x_ptr + offsets, mask=offsets < n, other=0), 0))


def test_a_call_with_no_outputs_needs_a_side_effect_or_a_ref():
    def call(side_effect):
        return jax.make_jaxpr(lambda x: jtr.triton_call(
            x, x.size, kernel=print_sum_kernel, out_type=(), grid=4, BLOCK=256,
            has_side_effect=side_effect))(X)

    with pytest.raises(ValueError, match=r"out_type=\(\) is empty and kernel print_sum_kernel "
                                         r"gets no Ref"):
        call(False)
    assert [e.primitive for e in call(True).eqns] == [jtr.triton_kernel_p]


def test_jax_never_drops_a_call_whose_results_go_unused():
    jaxpr = jax.make_jaxpr(kernels.add)(X, X)
    kept, _ = pe.dce_jaxpr(jaxpr.jaxpr, [False])
    assert [e.primitive for e in kept.eqns] == [jtr.triton_kernel_p]


def test_cost_estimate_travels_as_an_attribute_of_the_typed_ffi_call():
    text = lowered_text(lambda x, y: kernels.add(
        x, y, cost_estimate={"flops": 123, "bytes_accessed": 456}, xla_native=False), X, X,
        platform="cuda")
    assert re.search(r'cost_estimate_json = "\{\\22bytes_accessed\\22: 456, \\22flops\\22: '
                     r'123\}"', text)


def test_cost_estimate_is_dropped_where_the_target_carries_no_attributes(monkeypatch):
    monkeypatch.setenv("JAX_TRITON_ROCM_AUTOTUNE_TARGET", "legacy")
    text = lowered_text(lambda x, y: autotune_utils.tuned_add(x, y, cost_estimate={"flops": 1}),
                        X, X, platform="cuda")
    assert "custom_call @triton_kernel_call(" in text and "cost_estimate" not in text


@pytest.mark.parametrize("value,error", [([1], TypeError), ({"flop": 1}, ValueError),
                                         ({"flops": -1}, ValueError)])
def test_a_bad_cost_estimate_is_named(value, error):
    with pytest.raises(error, match="cost_estimate="):
        kernels.add(X, X, cost_estimate=value)
