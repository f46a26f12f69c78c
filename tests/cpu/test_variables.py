"""The package's environment variables are checked on every machine: a value a reader refuses
fails every kernel call, on the CPU too, with the reader's message (`_env.check_variables`),
and `info` lists it next to the variable and reports the rest. An unknown variable of the
package's prefix is warned of once, at the first call."""

import logging

import jax
import jax.numpy as jnp
import pytest

from jax_triton_rocm.base import _env
from jax_triton_rocm.cli import _info, _startup
from tests.support import kernels, library_kernels
from tests.support.lowering_utils import lower_for, spec

X = spec((1024,), jnp.float32)

# One refused value per variable that takes only some values (any path is a folder's name).
REFUSED = {
    _env.ENV_TARGET_ARCH: "cuda=sm_1",
    _env.ENV_HSACO_DELIVERY: "pigeon",
    _env.ENV_PREWARM: "maybe",
    _env.ENV_AUTOTUNE_TARGET: "fastest",
    _env.ENV_CALL_TARGET: "graphs",
    _env.ENV_COMPILE_THREADS: "-2",
    _env.ENV_EARLY_COMPILE: "soon",
    _env.ENV_XLA_NATIVE: "maybe",
    _env.ENV_KERNEL_CACHE_SIZE: "²",
    _env.ENV_CALL_CACHE_SIZE: "0",
    _env.ENV_REMEMBER_TRITON_KEY: "perhaps",
    _env.ENV_KEEP_PTX_TEXT: "some",
}


def test_every_variable_that_takes_only_some_values_has_a_reader_to_check():
    assert set(_env.VARIABLE_READERS) == set(REFUSED)
    assert set(_env.PACKAGE_ENV_VARS) - set(REFUSED) == {_env.ENV_AUTOTUNE_DIR}


# The architecture variable is read when the package is imported: set in a test, it is an error
# for being late (tests/process/test_target_processes.py); the demo's test sets it before the
# process starts.
SET_IN_PROCESS = {name: value for name, value in REFUSED.items()
                  if name != _env.ENV_TARGET_ARCH}


@pytest.mark.parametrize("name,value", SET_IN_PROCESS.items(), ids=list(SET_IN_PROCESS))
def test_a_refused_value_fails_a_kernel_call_on_the_cpu(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=rf"^{name}="):
        jax.jit(lambda x, y: kernels.add(x, y)).trace(X, X)


def test_a_refused_value_fails_a_call_from_a_primitives_lowering(monkeypatch):
    monkeypatch.setenv(_env.ENV_PREWARM, "maybe")
    with pytest.raises(ValueError, match=r"JAX_TRITON_ROCM_PREWARM='maybe' is not a flag"):
        lower_for(library_kernels.amax, X, platform="cuda")


def test_a_value_changed_after_a_passing_check_is_checked_again(monkeypatch):
    monkeypatch.setenv(_env.ENV_CALL_CACHE_SIZE, "64")
    _env.check_variables()
    monkeypatch.setenv(_env.ENV_CALL_CACHE_SIZE, "sixty-four")
    with pytest.raises(ValueError, match=r"CALL_CACHE_SIZE='sixty-four' must be a positive"):
        _env.check_variables()


def test_info_lists_each_refused_value_with_the_message_a_call_raises(monkeypatch):
    monkeypatch.setenv(_env.ENV_KERNEL_CACHE_SIZE, "²")
    monkeypatch.setenv(_env.ENV_PREWARM, "1")
    invalid = _info.environment_report()["invalid"]
    assert list(invalid) == [_env.ENV_KERNEL_CACHE_SIZE]
    with pytest.raises(ValueError) as raised:
        _env.check_variables()
    assert invalid[_env.ENV_KERNEL_CACHE_SIZE] == str(raised.value)


@pytest.mark.parametrize("name,value", SET_IN_PROCESS.items(), ids=list(SET_IN_PROCESS))
def test_info_marks_a_refused_value_and_reports_the_rest(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    text = _info.format_report(_info.collect(_startup.Startup(("cpu",), None, (), ())))
    assert f"\n  {name}={value!r} (invalid: {name}={value!r} " in text
    assert "\nLowering for cuda:" in text and "\nLowering for rocm:" in text


@pytest.mark.parametrize("name", [_env.ENV_KERNEL_CACHE_SIZE, _env.ENV_COMPILE_THREADS])
def test_a_count_of_thousands_of_digits_is_refused_naming_the_variable(monkeypatch, name):
    monkeypatch.setenv(name, "1" * 5000)
    with pytest.raises(ValueError, match=rf"^{name}='1{{40}}'\.\.\. \(5000 characters\) must be "
                                         rf"a (positive|non-negative) integer of at most 18 "
                                         rf"digits"):
        jax.jit(lambda x, y: kernels.add(x, y)).trace(X, X)


def test_an_unknown_package_variable_is_warned_of_once_at_the_first_call(monkeypatch, caplog):
    monkeypatch.setattr(_env, "_UNKNOWN_LOOKED_FOR", [])  # as in a fresh process
    monkeypatch.setenv("JAX_TRITON_ROCM_CALL_TARGETS", "legacy")
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        for _ in range(2):
            jax.jit(lambda x, y: kernels.add(x, y)).trace(X, X)
    assert [r.getMessage() for r in caplog.records if "ignoring" in r.getMessage()] == [
        "jax_triton_rocm: ignoring JAX_TRITON_ROCM_CALL_TARGETS (the closest known name: "
        "JAX_TRITON_ROCM_CALL_TARGET): the package reads no variable of that name "
        "(docs/environment.md lists those it reads). This warning is logged once per process."]
