"""The package's environment variables are checked on every machine: a value a reader refuses
fails every kernel call, on the CPU too, with the reader's message (`_env.check_variables`),
and `info` lists it next to the variable."""

import jax
import jax.numpy as jnp
import pytest

from jax_triton_rocm.base import _env
from jax_triton_rocm.cli import _info
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
