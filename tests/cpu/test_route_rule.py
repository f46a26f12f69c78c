"""The route a call takes when nothing forces one (`routes._primitive`: jaxlib's Triton call, on
every GPU platform), the ways to ask for XLA's call, and how the route is reported: the log each
lowering writes, `info`, and the test session's route counts (JAX_TRITON_ROCM_TEST_ROUTE_COUNTS).

Lowered for CUDA (sm_90) and ROCm (gfx942) on the CPU. XLA's call needs this jaxlib's Triton
dialect (`_xla_native.xla_triton_dialect`), which every CI lane's jaxlib has; a jaxlib without it
is stood in.
"""

import logging
import re

import jax
import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.cli import _info
from jax_triton_rocm.base import _compat, _env
from jax_triton_rocm.routes import _primitive
from jax_triton_rocm.routes.xla import _xla_native
from jax_triton_rocm.routes import _arch, _choices
from tests.support import autotune_utils, idiom_kernels, kernels
from tests.support.lowering_utils import call_targets, lower_for, spec

X = spec((1000,), jnp.float32)
XLA, FFI, LEGACY = _compat.XLA_TRITON_CALL_NAME, _compat.FFI_CALL_NAME, _compat.LEGACY_CALL_NAME
DEFAULT = ("jaxlib", _primitive.DEFAULT_REASON)
PLATFORMS = pytest.mark.parametrize("platform", ["cuda", "rocm"])


@pytest.fixture(autouse=True)
def automatic(monkeypatch, fresh_lowerings):
    """No route forced by the environment, and no lowering made under other rules served."""
    monkeypatch.delenv(_env.ENV_XLA_NATIVE, raising=False)


@pytest.fixture
def xla_asked_by_env(monkeypatch):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "1")


def _logged(caplog, fn, *args, platform="cuda"):
    """The (route, reason) each lowering of `fn(*args)` logged."""
    with caplog.at_level(logging.DEBUG, logger="jax_triton_rocm"):
        lower_for(fn, *args, platform=platform)
    return [(r.jax_triton_rocm_route, r.jax_triton_rocm_reason) for r in caplog.records
            if hasattr(r, "jax_triton_rocm_route")]


@PLATFORMS
@pytest.mark.parametrize("call", [kernels.sized_add, kernels.add],
                         ids=["constexpr length", "runtime length"])
def test_a_plain_kernel_takes_jaxlibs_call_by_default(caplog, platform, call):
    assert call_targets(call, X, X, platform=platform) == [FFI]
    assert _logged(caplog, call, X, X, platform=platform) == [DEFAULT]


@PLATFORMS
def test_an_autotuned_call_with_a_remembered_choice_takes_jaxlibs_call(
        monkeypatch, tmp_path, fresh_caches, platform):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))
    monkeypatch.setattr(_arch, "device_kind", lambda platform, context: "Stand-in GPU")
    x = autotune_utils.f32(4096)
    with _choices.session() as current:
        lower_for(autotune_utils.tuned_add, x, x, platform=platform)
    [undecided] = current.undecided.values()
    _choices.STORE.put(undecided.key, _choices.Choice(1, undecided.descriptions[1]))
    [call] = jtr.kernel_calls(lower_for(autotune_utils.tuned_add, x, x, platform=platform))
    assert call.target == FFI
    assert call.message.kernel_call.grid_0 == 4096 // autotune_utils.ADD_CONFIGS[1].kwargs["BLOCK"]


@PLATFORMS
def test_an_autotuned_call_without_a_choice_takes_jaxlibs_legacy_call(caplog, platform):
    assert _logged(caplog, autotune_utils.tuned_add, X, X, platform=platform) == [
        ("jaxlib legacy", _primitive.DEFAULT_REASON)]


@PLATFORMS
def test_a_kernel_with_its_output_before_its_inputs_takes_jaxlibs_call(platform):
    x = spec((16, 64), jnp.float32)
    assert call_targets(idiom_kernels.softmax, x, platform=platform) == [FFI]


@PLATFORMS
@pytest.mark.parametrize("call", [kernels.sized_add, kernels.add],
                         ids=["constexpr length", "runtime length"])
def test_xla_native_true_takes_xlas_call(caplog, platform, call):
    assert _logged(caplog, lambda a, b: call(a, b, xla_native=True), X, X,
                   platform=platform) == [("xla", "xla_native=True asks for it")]


@PLATFORMS
def test_the_environment_takes_xlas_call_for_calls_that_do_not_say(caplog, xla_asked_by_env,
                                                                   platform):
    assert _logged(caplog, kernels.add, X, X, platform=platform) == [
        ("xla", "JAX_TRITON_ROCM_XLA_NATIVE=1 asks for it")]


def test_an_int_scalar_equal_to_1_leaves_the_kernel_plain(xla_asked_by_env):
    def call(x):  # 1 is compiled in, as Triton's launcher does
        return jtr.triton_call(x, 1, kernel=kernels.copy_kernel, out_shape=x, grid=(4,),
                               BLOCK=256)

    assert call_targets(call, X, platform="cuda") == [XLA]


def test_a_jaxlib_without_a_triton_dialect_refuses_xla_native(monkeypatch, caplog,
                                                               xla_asked_by_env):
    monkeypatch.setattr(_xla_native, "xla_triton_dialect", lambda: False)
    reason = ("this jaxlib has no Triton dialect (jaxlib.triton) to read the kernel's IR with, "
              "as XLA's call must")
    assert _logged(caplog, kernels.sized_add, X, X) == [("jaxlib", reason)]
    with pytest.raises(ValueError, match=re.escape(reason)):
        lower_for(lambda a, b: kernels.sized_add(a, b, xla_native=True), X, X, platform="cuda")


def test_a_call_xlas_route_cannot_take_stays_on_jaxlibs(caplog, xla_asked_by_env):
    [(route, reason)] = _logged(caplog, lambda x: kernels.sized_add(x, x, maxnreg=64), X)
    assert route == "jaxlib" and "maxnreg" in reason


def test_an_autotuned_call_without_a_choice_is_unfit_for_xlas_call(caplog, xla_asked_by_env):
    [(route, reason)] = _logged(caplog, autotune_utils.tuned_add, X, X)
    assert route == "jaxlib legacy" and "autotuned" in reason and "no configuration" in reason


def test_an_export_takes_jaxlibs_call():
    from jax import export

    with jtr.target_arch(cuda="sm_90"):
        exported = export.export(jax.jit(kernels.sized_add), platforms=["cuda"],
                                 disabled_checks=[export.DisabledSafetyCheck.custom_call(FFI)])(
            X, X)
    assert f"@{FFI}(" in exported.mlir_module() and XLA not in exported.mlir_module()


def test_an_export_asked_for_xlas_call_takes_it():
    from jax import export

    with jtr.target_arch(cuda="sm_90"):
        exported = export.export(
            jax.jit(lambda a, b: kernels.sized_add(a, b, xla_native=True)), platforms=["cuda"],
            disabled_checks=[export.DisabledSafetyCheck.custom_call(XLA)])(X, X)
    assert XLA in exported.mlir_module()


@pytest.mark.parametrize("value,targets", [("1", [XLA, XLA]), ("0", [FFI, FFI])])
def test_the_environment_forces_a_route_for_calls_that_do_not_say(monkeypatch, value, targets):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, value)
    assert call_targets(lambda a, b: (kernels.sized_add(a, b), kernels.add(a, b)), X, X,
                        platform="cuda") == targets


@pytest.mark.parametrize("value,asked,target", [("0", True, XLA), ("1", False, FFI)])
def test_the_calls_own_choice_beats_the_environment(monkeypatch, value, asked, target):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, value)
    assert call_targets(lambda a, b: kernels.sized_add(a, b, xla_native=asked), X, X,
                        platform="cuda") == [target]


def test_a_malformed_environment_value_is_named(monkeypatch):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "auto")
    with pytest.raises(ValueError, match=r"JAX_TRITON_ROCM_XLA_NATIVE='auto' is not a flag.*"
                                         r"unset it for the default\.(\n|$)"):
        lower_for(kernels.sized_add, X, X, platform="cuda")


def test_the_environment_is_read_once_at_the_top_also_where_it_asks_for_xlas_route(
        monkeypatch, xla_asked_by_env):
    with jtr.target_arch(cuda="sm_90"):
        traced = jax.jit(lambda a, b: kernels.sized_add(a, b)).trace(X, X)
        monkeypatch.setenv(_env.ENV_CALL_TARGET, "graph")  # after the trace's check
        with pytest.raises(ValueError, match=r"JAX_TRITON_ROCM_CALL_TARGET='graph' is not a "
                                             r"target for plain calls"):
            traced.lower(lowering_platforms=("cuda",))


def test_an_autotuned_call_xla_native_asks_for_reads_the_environment_once(monkeypatch,
                                                                          xla_asked_by_env):
    reads = []
    read = _env.lowering_settings
    monkeypatch.setattr(_env, "lowering_settings", lambda *a: reads.append(a) or read(*a))
    lower_for(autotune_utils.tuned_add, X, X, platform="cuda")  # XLA's call unfit: jaxlib's
    assert len(reads) == 1, reads


def test_info_names_each_platforms_route_and_why():
    routes = _info.routes_report({"cuda": {"devices": []}, "rocm": {"devices": []}})
    assert routes["cuda"]["arch"] == "sm_90 (assumed: no device here)"
    for platform in ("cuda", "rocm"):
        for name in _info.KERNELS:
            assert routes[platform]["kernels"][name] == {
                "route": "jaxlib", "reason": _primitive.DEFAULT_REASON,
                "xla_native": "XLA's Triton call"}
    lines = _info.routes_lines(routes)
    assert "  cuda, lowered for sm_90 (assumed: no device here):" in lines
    assert ("    add, constexpr length: jaxlib's Triton call (typed FFI), as the default: "
            "jaxlib's call launches pip Triton's own binary; with xla_native=True: XLA's Triton "
            "call") in lines, lines


def test_info_names_the_reason_xla_native_is_refused(monkeypatch):
    monkeypatch.setattr(_xla_native, "xla_triton_dialect", lambda: False)
    routes = _info.routes_report({"cuda": {"devices": []}, "rocm": {"devices": []}})
    assert routes["rocm"]["kernels"]["add, runtime length"]["xla_native"] == (
        "refused: this jaxlib has no Triton dialect (jaxlib.triton) to read the kernel's IR "
        "with, as XLA's call must")


def test_info_lowers_for_the_named_architecture(monkeypatch):
    with jtr.target_arch(rocm="gfx950"):
        routes = _info.routes_report({"cuda": {"devices": []}, "rocm": {"devices": []}})
    assert routes["rocm"]["arch"] == "gfx950 (named, from target_arch())"
