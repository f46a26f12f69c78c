"""`JAX_TRITON_ROCM_COMMAND_BUFFERS=0`: plain calls are emitted under the package's registration
of jaxlib's typed-FFI handler (`_unbuffered`), which XLA launches outside its command buffers;
the opaque is jaxlib's, byte for byte. tests/gpu/test_gpu_command_buffers.py runs both on the
GPU and reads where XLA put the calls."""

import jax
import jax.numpy as jnp
import pytest
from jax import export

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _compat, _env
from jax_triton_rocm.routes.jaxlib import _unbuffered
from tests.support import kernels
from tests.support.lowering_utils import lower_for, spec

X = spec((1024,), jnp.float32)


def _chain(x, y):
    for _ in range(3):
        x = kernels.add(jnp.sin(x), y)
    return x


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_turned_off_the_plain_calls_carry_the_same_opaque_under_the_packages_target(
        monkeypatch, platform):
    emitted = {}
    for setting in ("1", "0"):
        monkeypatch.setenv(_env.ENV_COMMAND_BUFFERS, setting)
        emitted[setting] = jtr.kernel_calls(lower_for(_chain, X, X, platform=platform))
    assert [c.target for c in emitted["1"]] == [_compat.FFI_CALL_NAME] * 3
    assert [c.target for c in emitted["0"]] == [_compat.UNBUFFERED_CALL_NAME] * 3
    assert all(c.typed_ffi for c in emitted["0"])
    assert [c.opaque for c in emitted["0"]] == [c.opaque for c in emitted["1"]]


def test_unset_it_is_jaxlibs_target(monkeypatch):
    monkeypatch.delenv(_env.ENV_COMMAND_BUFFERS, raising=False)
    (call,) = jtr.kernel_calls(lower_for(kernels.add, X, X, platform="cuda"))
    assert call.target == _compat.FFI_CALL_NAME


def test_a_refused_value_names_the_variable(monkeypatch):
    monkeypatch.setenv(_env.ENV_COMMAND_BUFFERS, "graphs")
    with pytest.raises(ValueError, match=r"^JAX_TRITON_ROCM_COMMAND_BUFFERS='graphs' is not a "
                                         r"flag; use 1 .* or 0 "):
        lower_for(kernels.add, X, X, platform="cuda")


@pytest.fixture
def recorded_registrations(monkeypatch):
    """Each registration `_unbuffered` makes, recorded instead of made, from a clean slate."""
    from jax._src.lib import xla_client

    made = []
    monkeypatch.setattr(_unbuffered, "_registered", set())
    monkeypatch.setattr(xla_client, "register_custom_call_target",
                        lambda *args, **kwargs: made.append((args, kwargs)))
    return made


def test_the_target_is_jaxlibs_handler_registered_once_without_the_command_buffer_trait(
        recorded_registrations):
    module = _vendors.plugin_triton_module("cuda")
    if module is None or not hasattr(module, "registrations"):
        pytest.skip("jaxlib's CUDA plugin (jax-cuda13-plugin) is not installed here")
    assert _unbuffered.register("cuda") is True
    assert _unbuffered.register("cuda") is True
    ((args, kwargs),) = recorded_registrations
    assert args[0] == _compat.UNBUFFERED_CALL_NAME
    stages = module.registrations()[_compat.FFI_CALL_NAME]
    assert sorted(args[1]) == sorted(stages)  # jaxlib's stages (fresh capsules at each listing)
    assert kwargs == {"platform": "CUDA", "api_version": 1}  # no traits: XLA's default


def test_a_plugin_without_the_handler_registers_nothing(monkeypatch, recorded_registrations):
    class OldPlugin:
        """A `_triton` module from before jaxlib's typed-FFI call: no `registrations()`."""

    monkeypatch.setattr(_vendors, "plugin_triton_module", lambda platform: OldPlugin())
    assert _unbuffered.register("rocm") is False
    assert recorded_registrations == []
    assert _unbuffered.target("rocm") == _compat.UNBUFFERED_CALL_NAME  # lowering still works


def test_the_target_is_among_those_export_is_told_to_accept(monkeypatch):
    assert _compat.UNBUFFERED_CALL_NAME in jtr.CUSTOM_CALL_TARGET_NAME.targets
    monkeypatch.setenv(_env.ENV_COMMAND_BUFFERS, "0")
    with jtr.target_arch(cuda="sm_90"):
        exported = export.export(jax.jit(lambda x, y: kernels.add(x, y)), platforms=("cuda",),
                                 disabled_checks=jtr.disabled_checks())(X, X)
    restored = export.deserialize(exported.serialize())
    assert f"stablehlo.custom_call @{_compat.UNBUFFERED_CALL_NAME}(" in restored.mlir_module()


@pytest.mark.parametrize("setting,shown", [
    ("1", "triton_kernel_call_ffi"),
    ("0", "jax_triton_rocm_kernel_call_ffi (outside command buffers)"),
    ("graphs", "unknown (ValueError: JAX_TRITON_ROCM_COMMAND_BUFFERS='graphs' is not a"),
])
def test_info_says_which_target_plain_calls_take(monkeypatch, setting, shown):
    from jax_triton_rocm.cli import _info

    monkeypatch.setenv(_env.ENV_COMMAND_BUFFERS, setting)
    assert _info.platform_report("cuda")["custom_call_target"].startswith(shown)
