"""Activation: JAX's plugin discovery, initialize() and register()."""

import importlib.metadata
import logging

import jax
import jax.numpy as jnp
import pytest
from jax._src.interpreters import mlir

import jax_triton_rocm as jtr
from jax_triton_rocm import _plugin
from jax_triton_rocm.backends import _vendors
from tests.support import kernels
from tests.support.subprocess_utils import distribution_installed


@pytest.mark.skipif(not distribution_installed(),
                    reason="the distribution jax_triton_rocm is not installed (the checkout is "
                           "only on PYTHONPATH), so no installed metadata advertises its entry "
                           "point; `pip install .` to run this (CI does)")
def test_entry_point_is_advertised_in_the_jax_plugins_group():
    values = {ep.value for ep in importlib.metadata.entry_points(group="jax_plugins")}
    assert "jax_triton_rocm._plugin" in values


def test_initialize_never_raises_into_jax_startup(monkeypatch, caplog):
    def broken():
        raise RuntimeError("simulated failure while looking for plugins")

    monkeypatch.setattr(_vendors, "installed_gpu_platforms", broken)
    # At DEBUG, where `initialize` lists the installed plugins for its log line.
    with caplog.at_level(logging.DEBUG, logger="jax_triton_rocm"):
        assert _plugin.initialize() is None
    assert "simulated failure" in caplog.text
    assert "plugin initialization failed" in caplog.text


def test_initialize_lists_the_plugins_only_for_its_debug_line(monkeypatch, caplog):
    looked = []
    monkeypatch.setattr(_vendors, "installed_gpu_platforms", lambda: looked.append(1) or ("cuda",))
    with caplog.at_level(logging.INFO, logger="jax_triton_rocm"):
        assert _plugin.initialize() is None
    assert looked == []
    with caplog.at_level(logging.DEBUG, logger="jax_triton_rocm"):
        assert _plugin.initialize() is None
    assert looked == [1]
    assert "jaxlib GPU plugins installed: cuda" in caplog.text


def test_register_is_idempotent_and_returns_the_platforms():
    first = jtr.register(platforms=("cuda", "rocm"))
    rules = {p: mlir._platform_specific_lowerings[p][jtr.triton_kernel_p] for p in ("cuda", "rocm")}
    second = jtr.register(platforms=("cuda", "rocm"))
    assert first == second
    assert {"cuda", "rocm"} <= set(second)
    assert all(mlir._platform_specific_lowerings[p][jtr.triton_kernel_p] is rules[p]
               for p in rules)


def test_register_with_no_arguments_covers_installed_plugins():
    assert set(_vendors.installed_gpu_platforms()) <= set(jtr.register())


def test_register_rejects_an_unknown_platform():
    with pytest.raises(ValueError, match="'tpu' is not a GPU platform"):
        jtr.register(platforms=("tpu",))


def test_lowering_rule_for_cpu_runs_the_kernel_through_a_host_callback():
    # Arrays on the CPU device make the CPU the lowering's backend, on a GPU machine too.
    x = jax.device_put(jnp.zeros((1024,), jnp.float32), jax.devices("cpu")[0])
    text = jax.jit(kernels.add).trace(x, x).lower().as_text()
    assert "python_cpu_callback" in text
