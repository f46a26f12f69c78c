"""`jax_triton_rocm.compat` on the GPU: calls written for jax-triton 0.4.1 run on jaxlib's route
and match jnp (the lowering itself: `test_compat`)."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton

import jax_triton_rocm.compat as jt
from tests.support import autotune_utils, kernels
from tests.support.gpu_utils import on_gpu
from tests.support.surface_kernels import two_calls

pytestmark = pytest.mark.gpu


def test_two_calls_under_xla_metadata_match_jnp():
    x = on_gpu(jax.random.normal(jax.random.key(0), (100_003,), jnp.float32))
    y = on_gpu(jax.random.normal(jax.random.key(1), (100_003,), jnp.float32))
    np.testing.assert_allclose(jax.jit(two_calls)(x, y), (x + y) + 2 * y, rtol=1e-6)


def test_a_zeroed_output_starts_from_zero_at_every_call():
    x = on_gpu(jnp.ones(1000, jnp.float32))

    @jax.jit
    def total(x):
        return jt.triton_call(x, x.size, kernel=kernels.atomic_sum_kernel, grid=(1,),
                              out_type=jax.ShapeDtypeStruct((1,), jnp.float32), BLOCK=1024,
                              zeroed_outputs=(0,))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert [float(total(x)[0]) for _ in range(3)] == [1000.0] * 3


def test_an_autotuned_call_matches_jnp():
    x = on_gpu(jax.random.normal(jax.random.key(2), (50_000,), jnp.float32))
    y = on_gpu(jax.random.normal(jax.random.key(3), (50_000,), jnp.float32))
    out = jax.jit(lambda x, y: jt.triton_call(
        x, y, x.size, kernel=autotune_utils.tuned_add_kernel, out_type=x,
        grid=lambda meta: (triton.cdiv(x.size, meta["BLOCK"]),)))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
