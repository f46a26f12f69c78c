"""Issue 29 on the GPU: a rebound helper's numbers, declared parameter types, a concrete 0-d
array for a declared scalar, and two calls in one library rule, each on operands computed
earlier in the same jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from tests.support import callee_kernels, kernels
from tests.support import library_kernels as lk
from tests.support.gpu_utils import on_gpu

pytestmark = pytest.mark.gpu

N = 256


def _through_helper(x):
    y = x * 2  # computed in the jit, before the kernel
    return jtr.triton_call(y, kernel=callee_kernels.calls_helper_kernel, out_shape=y, grid=(1,),
                           BLOCK=N)


def test_a_rebound_helper_gives_its_numbers_on_the_gpu(monkeypatch):
    x = on_gpu(jnp.arange(N, dtype=jnp.float32))
    before = jax.jit(_through_helper)
    np.testing.assert_allclose(before(x), 2 * np.arange(N) + 1000)
    monkeypatch.setattr(callee_kernels, "helper", callee_kernels.other_helper)
    np.testing.assert_allclose(jax.jit(lambda x: _through_helper(x))(x), 2 * np.arange(N) + 2000)
    jtr.clear_caches()  # the function jitted before lowers again, with the new helper
    np.testing.assert_allclose(before(x), 2 * np.arange(N) + 2000)
    monkeypatch.undo()
    jtr.clear_caches()
    np.testing.assert_allclose(before(x), 2 * np.arange(N) + 1000)


def _declared(kernel, value, x):
    def call(x):
        y = x + 0  # computed in the jit
        return jtr.triton_call(y, value, kernel=kernel, out_shape=y, grid=(1,), BLOCK=N)

    return np.asarray(jax.jit(call)(on_gpu(x)))


@pytest.mark.parametrize("route", [False, True], ids=["jaxlib's call", "XLA's call"])
def test_declared_types_reach_the_kernel_on_the_gpu(route, monkeypatch):
    monkeypatch.setenv("JAX_TRITON_ROCM_XLA_NATIVE", "1" if route else "0")
    jtr.clear_caches()
    zeros = jnp.zeros(N, jnp.uint32)
    assert (_declared(kernels.add_unsigned_kernel, 2**32 - 1, zeros) == 2**32 - 1).all()
    assert (_declared(kernels.add_wide_kernel, 2**40, jnp.zeros(N, jnp.int32)) == 2**20).all()
    ramp = jnp.arange(N, dtype=jnp.float32)
    np.testing.assert_allclose(_declared(kernels.scale_declared_kernel, 3, ramp), 3 * ramp)
    np.testing.assert_allclose(
        _declared(kernels.scale_declared_kernel, jnp.float32(2.5), ramp), 2.5 * ramp)


def test_two_calls_in_one_rule_run_on_the_gpu():
    x = on_gpu(jnp.linspace(-1, 1, 1000, dtype=jnp.float32))
    np.testing.assert_allclose(jax.jit(lambda x: lk.six_times(x + 1))(x), 6 * (np.asarray(x) + 1),
                               rtol=1e-6)
