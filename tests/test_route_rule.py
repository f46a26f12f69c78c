"""The route a call takes when nothing forces one (`routes._primitive`), the ways to force one,
and how the route is reported: the log each lowering writes, `info`, and the test session's
route counts (JAX_TRITON_ROCM_TEST_ROUTE_COUNTS).

Lowered for CUDA and ROCm on the CPU. The rule asks what the installed jaxlib can do (its Triton
dialect, `_xla_native.xla_triton_dialect`), which every CI lane's jaxlib has; a jaxlib without it is
stood in.
"""

import json
import logging
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.cli import _info_routes
from jax_triton_rocm.base import _compat
from jax_triton_rocm.routes import _primitive
from jax_triton_rocm.routes.xla import _xla_native
from tests import autotune_utils, kernels
from tests.lowering_utils import lower_for, spec
from tests.subprocess_utils import ROOT, child_env

X = spec((1000,), jnp.float32)
XLA, FFI, LEGACY = _compat.XLA_TRITON_TARGET, _compat.FFI_TARGET, _compat.LEGACY_TARGET


@pytest.fixture(autouse=True)
def automatic(monkeypatch, fresh_lowerings):
    """No route forced by the environment, and no lowering made under other rules served."""
    monkeypatch.delenv(_primitive.ENV_XLA_NATIVE, raising=False)


def _targets(fn, *args, platform="cuda"):
    return [call.target for call in jtr.kernel_calls(lower_for(fn, *args, platform=platform))]


def _logged(caplog, fn, *args, platform="cuda"):
    """The (route, reason) each lowering of `fn(*args)` logged."""
    with caplog.at_level(logging.DEBUG, logger="jax_triton_rocm"):
        lower_for(fn, *args, platform=platform)
    return [(r.jax_triton_rocm_route, r.jax_triton_rocm_reason) for r in caplog.records
            if hasattr(r, "jax_triton_rocm_route")]


def test_a_plain_kernel_takes_xlas_call():
    assert _targets(kernels.sized_add, X, X) == [XLA]


def test_a_jaxlib_without_a_triton_dialect_keeps_jaxlibs_call(monkeypatch, caplog):
    monkeypatch.setattr(_xla_native, "xla_triton_dialect", lambda: False)
    assert _logged(caplog, kernels.sized_add, X, X) == [
        ("jaxlib", "this jaxlib has no Triton dialect (jaxlib.triton) to read the kernel's IR "
                   "with, as XLA's call must")]


def test_rocm_keeps_jaxlibs_call_as_xlas_has_not_launched_there(caplog):
    [(route, reason)] = _logged(caplog, kernels.sized_add, X, X, platform="rocm")
    assert route == "jaxlib" and "not yet launched the package's kernels on an AMD GPU" in reason


def test_runtime_scalars_take_xlas_call(caplog):
    assert _logged(caplog, kernels.add, X, X) == [("xla", "the call fits it")]


def test_an_int_scalar_equal_to_1_leaves_the_kernel_plain():
    def call(x):  # 1 is compiled in, as Triton's launcher does
        return jtr.triton_call(x, 1, kernel=kernels.copy_kernel, out_shape=x, grid=(4,),
                               BLOCK=256)

    assert _targets(call, X) == [XLA]


def test_a_call_xlas_route_cannot_take_stays_on_jaxlibs(caplog):
    [(route, reason)] = _logged(caplog, lambda x: kernels.sized_add(x, x, maxnreg=64), X)
    assert route == "jaxlib" and "maxnreg" in reason


def test_autotuned_calls_take_jaxlibs_legacy_call(caplog):
    [(route, reason)] = _logged(caplog, autotune_utils.tuned_add, X, X)
    assert route == "jaxlib legacy" and "autotuned" in reason and "no configuration" in reason


def test_an_export_takes_jaxlibs_call_after_a_lowering_took_xlas():
    from jax import export

    assert _targets(kernels.sized_add, X, X) == [XLA]
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
    monkeypatch.setenv(_primitive.ENV_XLA_NATIVE, value)
    assert _targets(lambda a, b: (kernels.sized_add(a, b), kernels.add(a, b)), X, X) == targets


@pytest.mark.parametrize("value,asked,target", [("0", True, XLA), ("1", False, FFI)])
def test_the_calls_own_choice_beats_the_environment(monkeypatch, value, asked, target):
    monkeypatch.setenv(_primitive.ENV_XLA_NATIVE, value)
    assert _targets(lambda a, b: kernels.sized_add(a, b, xla_native=asked), X, X) == [target]


def test_a_malformed_environment_value_is_named(monkeypatch):
    monkeypatch.setenv(_primitive.ENV_XLA_NATIVE, "auto")
    with pytest.raises(ValueError, match=r"JAX_TRITON_ROCM_XLA_NATIVE='auto' is not a flag.*"
                                         r"unset it for the default \(automatic\)"):
        lower_for(kernels.sized_add, X, X, platform="cuda")


def test_info_names_each_platforms_route_and_why():
    routes = _info_routes.report({"cuda": {"devices": []}, "rocm": {"devices": []}})
    cuda, rocm = routes["cuda"], routes["rocm"]
    assert cuda["arch"] == "sm_90 (assumed: no device here)"
    assert cuda["kernels"]["add, constexpr length"]["route"] == "xla"
    assert cuda["kernels"]["add, runtime length"]["route"] == "xla"
    assert rocm["kernels"]["add, constexpr length"]["route"] == "jaxlib"
    assert "AMD GPU" in rocm["kernels"]["add, runtime length"]["reason"]
    lines = _info_routes.format_lines(routes)
    assert "  cuda, lowered for sm_90 (assumed: no device here):" in lines
    assert any(line.startswith("    add, constexpr length: XLA's Triton call, as the call fits "
                               "it") for line in lines), lines


def test_info_lowers_for_the_named_architecture(monkeypatch):
    with jtr.target_arch(rocm="gfx950"):
        routes = _info_routes.report({"cuda": {"devices": []}, "rocm": {"devices": []}})
    assert routes["rocm"]["arch"] == "gfx950 (named, from target_arch())"


@pytest.mark.process
def test_the_test_session_counts_lowerings_by_route(tmp_path):
    path = tmp_path / "routes.json"
    tests = ["tests/test_route_rule.py::test_a_plain_kernel_takes_xlas_call",
             "tests/test_route_rule.py::"
             "test_rocm_keeps_jaxlibs_call_as_xlas_has_not_launched_there",
             "tests/test_route_rule.py::test_autotuned_calls_take_jaxlibs_legacy_call"]
    env = child_env({"JAX_TRITON_ROCM_TEST_ROUTE_COUNTS": str(path)})
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-n", "2", *tests], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    counts = json.loads(path.read_text())
    assert counts["lowerings"] == {"xla": 1, "jaxlib": 1, "jaxlib legacy": 1}
    assert counts["kernel_names"]["jaxlib legacy"] == ["tuned_add_kernel"]
    assert counts["share"]["xla"] == pytest.approx(1 / 3)
    assert "lowerings by route: jaxlib 1 (33%; 1 kernels)" in result.stdout
    assert list(tmp_path.iterdir()) == [path]  # the workers' files merged and removed
