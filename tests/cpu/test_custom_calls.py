"""`CUSTOM_CALL_TARGET_NAME` and `disabled_checks()`: what `jax.export` needs to accept the custom
calls the package emits, checked by exporting real lowerings for sm_90 on a machine without it."""

import re

import jax
import jax.numpy as jnp
import pytest
from jax import export

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env
from tests.support import autotune_utils, kernels

X = jax.ShapeDtypeStruct((1000,), jnp.float32)


@pytest.fixture(autouse=True)
def legacy_autotune_target(monkeypatch, fresh_lowerings):
    # The autotuned target and the XLA route are chosen at lowering; JAX reuses lowerings.
    monkeypatch.setenv(_env.ENV_AUTOTUNE_TARGET, "legacy")


def every_route(x, y):
    """A plain call, an autotuned one (legacy target) and one through XLA's own Triton call."""
    return (kernels.add(x, y), autotune_utils.tuned_add(x, y),
            kernels.add(x, y, xla_native=True))


def _export(fn, checks):
    with jtr.target_arch(cuda="sm_90"):
        return export.export(jax.jit(fn), platforms=["cuda"], disabled_checks=checks)(X, X)


def _targets(exported) -> set[str]:
    return set(re.findall(r"stablehlo\.custom_call @([\w$.]+)\(", exported.mlir_module()))


def test_the_name_is_jax_tritons_typed_ffi_target_as_a_plain_string():
    name = jtr.CUSTOM_CALL_TARGET_NAME
    assert isinstance(name, str) and name == "triton_kernel_call_ffi" and f"{name}" == name
    assert (export.DisabledSafetyCheck.custom_call(name)
            == export.DisabledSafetyCheck.custom_call("triton_kernel_call_ffi"))


def test_the_jax_triton_04_idiom_exports_plain_calls():
    exported = _export(kernels.add, [export.DisabledSafetyCheck.custom_call(
        jtr.CUSTOM_CALL_TARGET_NAME)])
    assert _targets(exported) == {"triton_kernel_call_ffi"}


def test_disabled_checks_export_every_route_the_package_takes():
    exported = _export(every_route, jtr.disabled_checks())
    assert len(_targets(exported)) == 3, "the function should use all three targets"


def test_targets_list_every_route_and_each_is_needed():
    assert set(jtr.CUSTOM_CALL_TARGET_NAME.targets) == {
        "triton_kernel_call_ffi", "triton_kernel_call", "__gpu$xla.gpu.triton"}
    for left_out in jtr.disabled_checks():
        with pytest.raises(ValueError, match="Cannot serialize code with custom calls"):
            _export(every_route, [c for c in jtr.disabled_checks() if c != left_out])


def test_the_names_method_gives_the_same_checks():
    assert jtr.CUSTOM_CALL_TARGET_NAME.disabled_checks() == jtr.disabled_checks()
