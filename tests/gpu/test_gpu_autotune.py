"""Autotuned kernels run on a GPU through jaxlib's autotuner, compared with jnp.

Each test that names a target runs once through the legacy custom-call target (the default) and
once through the typed-FFI one (forced with JAX_TRITON_ROCM_AUTOTUNE_TARGET); the operands here
are program inputs, which both targets see before their trials. Operands computed in the same
program are in test_gpu_autotune_real_data.py. Every case carries its own
`serialized_metadata`, so its opaque differs from the other target's: jaxlib keeps one
autotuned result per opaque for the life of the process, and a shared one would skip the trials.
"""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jax_triton_rocm.base import _compat, _env
from tests.support import autotune_utils as au
from tests.support import kernels
from tests.support import lowering_utils
from tests.support.kernels import random_normal

pytestmark = pytest.mark.gpu

TARGETS = {"legacy": _compat.LEGACY_CALL_NAME, "ffi": _compat.FFI_CALL_NAME}


@pytest.fixture(params=sorted(TARGETS))
def target(request, monkeypatch):
    """Forces the autotuned-call target; yields its name ("ffi" or "legacy")."""
    monkeypatch.setenv(_env.ENV_AUTOTUNE_TARGET, request.param)
    return request.param


def _check_target(calls, target):
    assert [c.custom_call_name for c in calls] == [TARGETS[target]] * len(calls)


def test_autotuned_add_matches_jnp(monkeypatch, target):
    x, y = random_normal(0, (100_000,)), random_normal(1, (100_000,))
    with lowering_utils.captured_lowerings() as calls:
        out = jax.jit(lambda x, y: au.tuned_add(x, y, serialized_metadata=target.encode()))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    _check_target(calls, target)


@pytest.mark.parametrize("dtype,tol", [(jnp.float16, 1e-2), (jnp.float32, 1e-2)])
def test_autotuned_matmul_matches_jnp(dtype, tol):
    a, b = random_normal(2, (512, 256), dtype), random_normal(3, (256, 384), dtype)
    out = jax.jit(au.tuned_matmul)(a, b)
    assert out.dtype == dtype
    assert kernels.matmul_relative_error(out, a, b) < tol


def test_autotuned_kernel_with_aliasing_matches_jnp(monkeypatch, target):
    """Three configs are tried on x's buffer; unless jaxlib restores x between trials, the
    result holds y added once per trial."""
    x, y = random_normal(4, (65_536,)), random_normal(5, (65_536,))
    expected = x + y
    with lowering_utils.captured_lowerings() as calls:
        out = jax.jit(lambda x, y: au.tuned_add_inplace(x, y, metadata=target.encode()))(x, y)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    _check_target(calls, target)


def test_autotuned_kernel_with_donated_aliasing_matches_jnp(monkeypatch, target):
    x, y = random_normal(6, (65_536,)), random_normal(7, (65_536,))
    expected = x + y
    with lowering_utils.captured_lowerings() as calls:
        inplace = jax.jit(lambda x, y: au.tuned_add_inplace(x, y, metadata=target.encode()),
                          donate_argnums=0)
        out = inplace(x, y)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert x.is_deleted()
    _check_target(calls, target)


def test_autotuned_calls_in_a_long_jitted_chain_match_jnp(monkeypatch, target):
    """A chain long enough for XLA to put it in a command buffer (CUDA graph), where jaxlib
    cannot autotune; the FFI target is command-buffer compatible, the legacy one is not."""
    x, y = random_normal(8, (8192,)), random_normal(9, (8192,))

    def chain(x, y):
        for _ in range(8):
            x = au.tuned_add(jnp.sin(x), y, serialized_metadata=f"{target}-chain".encode())
        return x

    with lowering_utils.captured_lowerings() as calls:
        out = jax.jit(chain)(x, y)
    ref = x
    for _ in range(8):
        ref = jnp.sin(ref) + y
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
    _check_target(calls, target)
