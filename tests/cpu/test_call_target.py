"""The custom-call target of plain calls (`JAX_TRITON_ROCM_CALL_TARGET`): jaxlib's typed-FFI
target, or its legacy `triton_kernel_call`, which `auto` takes where XLA_FLAGS keeps custom
calls out of XLA's command buffers. Lowered for sm_90 and gfx942 on a machine without them;
tests/gpu runs every route's kernels on the legacy target too (the "legacy" route)."""

import re

import jax
import jax.numpy as jnp
import pytest
from jax import export

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _compat, _env
from jax_triton_rocm.routes.jaxlib import _proto
from tests.support import autotune_utils, kernels, lowering_utils

X = jax.ShapeDtypeStruct((1000,), jnp.float32)
FLAG = "--xla_gpu_enable_command_buffer="
PLATFORMS = ("cuda", "rocm")


@pytest.fixture(autouse=True)
def clean(monkeypatch, fresh_lowerings):
    monkeypatch.delenv(_env.ENV_CALL_TARGET, raising=False)
    monkeypatch.delenv(_env.XLA_FLAGS, raising=False)
    monkeypatch.delenv(_env.ENV_AUTOTUNE_TARGET, raising=False)


@pytest.mark.parametrize("flags,recorded", [
    ("", True),
    ("--xla_dump_to=/tmp/dump", True),
    (FLAG, False),
    (f"{FLAG}''", False),
    (f'--xla_dump_to=/tmp/dump {FLAG}""', False),
    (f"{FLAG}FUSION,CUBLAS,CUBLASLT,CUDNN", False),
    (f"{FLAG}fusion,custom_call", True),
    (f"{FLAG}CUSTOM_CALL", True),
    (f"{FLAG}-CUSTOM_CALL", False),
    (f"{FLAG}-FUSION", True),
    (f"{FLAG} {FLAG}+CUSTOM_CALL", True),
    (f"{FLAG}-CUSTOM_CALL {FLAG}+CUSTOM_CALL", True),
    (f"{FLAG}CUSTOM_CALL {FLAG}", False),
    ("--xla_gpu_graph_level=0", False),
    ("--xla_gpu_graph_level=3", False),
    (f"{FLAG}FUSION,-CUSTOM_CALL", True),  # mixed: XLA refuses it, nothing changes
    (f"{FLAG}'unbalanced", True),
], ids=repr)
def test_whether_xla_records_custom_calls_follows_its_flags(flags, recorded):
    assert _compat.custom_calls_recorded(flags) is recorded


@pytest.mark.parametrize("setting,flags,target", [
    (None, "", _compat.FFI_CALL_NAME),
    ("auto", "", _compat.FFI_CALL_NAME),
    (None, FLAG, _compat.LEGACY_CALL_NAME),
    ("auto", f"{FLAG}-CUSTOM_CALL", _compat.LEGACY_CALL_NAME),
    ("ffi", FLAG, _compat.FFI_CALL_NAME),
    ("legacy", "", _compat.LEGACY_CALL_NAME),
    ("LEGACY", "", _compat.LEGACY_CALL_NAME),
])
@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_plain_call_takes_the_target_set(monkeypatch, setting, flags, target, platform):
    if setting is not None:
        monkeypatch.setenv(_env.ENV_CALL_TARGET, setting)
    monkeypatch.setenv(_env.XLA_FLAGS, flags)
    assert lowering_utils.call_targets(kernels.add, X, X, platform=platform) == [target]


def test_both_targets_carry_the_same_call(monkeypatch):
    calls = {}
    for setting in ("ffi", "legacy"):
        monkeypatch.setenv(_env.ENV_CALL_TARGET, setting)
        calls[setting] = lowering_utils.capture_one(kernels.add, X, X, platform="cuda")
    assert calls["ffi"].custom_call_name == _compat.FFI_CALL_NAME
    assert calls["legacy"].custom_call_name == _compat.LEGACY_CALL_NAME
    assert calls["ffi"].opaque == calls["legacy"].opaque
    # The legacy target takes the opaque as its backend config, with the legacy API.
    text = lowering_utils.lowered_text(kernels.add, X, X, platform="cuda")
    call = re.search(r"stablehlo\.custom_call @triton_kernel_call\(.*", text).group(0)
    assert "api_version = 2" in call and "backend_config" in call


def test_a_change_of_setting_lowers_the_call_again(monkeypatch):
    # The lowered call is kept by a key that holds the target: the second lowering, same call,
    # must not be served the first's target.
    monkeypatch.setenv(_env.XLA_FLAGS, "")
    first = lowering_utils.call_targets(kernels.add, X, X, platform="cuda")
    monkeypatch.setenv(_env.XLA_FLAGS, FLAG)
    second = lowering_utils.call_targets(kernels.add, X, X, platform="cuda")
    assert (first, second) == ([_compat.FFI_CALL_NAME], [_compat.LEGACY_CALL_NAME])


def test_autotuned_calls_keep_their_own_setting(monkeypatch):
    monkeypatch.setenv(_env.ENV_CALL_TARGET, "ffi")
    targets = lowering_utils.call_targets(autotune_utils.tuned_add, X, X, platform="cuda")
    assert targets == [_compat.LEGACY_CALL_NAME]


def _export(checks):
    with jtr.target_arch(cuda="sm_90"):
        return export.export(jax.jit(kernels.add), platforms=["cuda"],
                             disabled_checks=checks)(X, X)


def test_auto_exports_on_the_ffi_target_whatever_the_flags(monkeypatch):
    monkeypatch.setenv(_env.XLA_FLAGS, FLAG)
    exported = _export([export.DisabledSafetyCheck.custom_call(jtr.CUSTOM_CALL_TARGET_NAME)])
    assert "@triton_kernel_call_ffi(" in exported.mlir_module()


def test_a_forced_legacy_target_still_exports_on_the_ffi_target(monkeypatch):
    monkeypatch.setenv(_env.ENV_CALL_TARGET, "legacy")
    exported = _export([export.DisabledSafetyCheck.custom_call(jtr.CUSTOM_CALL_TARGET_NAME)])
    assert "@triton_kernel_call_ffi(" in exported.mlir_module()
    assert lowering_utils.call_targets(kernels.add, X, X, platform="cuda") == [
        _compat.LEGACY_CALL_NAME]  # outside jax.export the setting holds


def test_an_unknown_setting_names_the_variable_and_the_choices(monkeypatch):
    monkeypatch.setenv(_env.ENV_CALL_TARGET, "graphs")
    with pytest.raises(ValueError, match=r"JAX_TRITON_ROCM_CALL_TARGET='graphs'.*auto, ffi, "
                                         r"legacy"):
        lowering_utils.call_targets(kernels.add, X, X, platform="cuda")


@pytest.mark.parametrize("target", [_compat.FFI_CALL_NAME, _compat.LEGACY_CALL_NAME])
def test_encode_names_the_target_it_is_given_for_one_kernel(target):
    image = _proto.KernelImage("k", 4, 1, 0, "PTX", 90, "TTIR")
    call = _proto.KernelCall(image, (1, 1, 1), (_proto.Param("array", ptr_divisibility=16),))
    encoded = _proto.encode([(call, "only")], (), name="n", kernel_name="k",
                            plain_call_name=target)
    assert encoded.custom_call_name == target
    assert encoded.serialized == _proto.encode_call(call, name="n")
