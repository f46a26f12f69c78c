"""Gluon kernels launched on a GPU through the bridge, compared with jnp references."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton

import jax_triton_rocm as jtr
from tests.support import gluon_kernels as gk
from tests.support import gluon_utils
from tests.support.kernels import random_normal

pytestmark = pytest.mark.gpu


@pytest.fixture
def warp():
    return gluon_utils.device_warp_size(jax.devices()[0])


@pytest.mark.parametrize("n", [1024, 1000, 1 << 20])
def test_gluon_copy_returns_its_input(warp, n):
    x = random_normal(0, (n,))
    out = jax.jit(lambda x: gk.copy(x, warp_size=warp))(x)
    np.testing.assert_array_equal(out, x)


@pytest.mark.parametrize("num_warps", [4, 8])
def test_gluon_axpy_matches_jnp(warp, num_warps):
    x, y = random_normal(1, (100_003,)), random_normal(2, (100_003,))
    out = jax.jit(lambda x, y: gk.axpy(2.5, x, y, warp_size=warp, num_warps=num_warps))(x, y)
    np.testing.assert_allclose(out, 2.5 * x + y, rtol=1e-6, atol=1e-6)  # FMA


def test_gluon_eager_call_outside_jit_matches_jnp(warp):
    x, y = random_normal(3, (4096,)), random_normal(4, (4096,))
    np.testing.assert_allclose(gk.axpy(-1.0, x, y, warp_size=warp), y - x, rtol=1e-6)


def test_gluon_row_sum_matches_jnp(warp):
    x = random_normal(5, (300, 200))
    out = jax.jit(lambda x: gk.row_sum(x, warp_size=warp))(x)
    np.testing.assert_allclose(out, jnp.sum(x, axis=1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(100, 300), (256, 128)])
def test_gluon_tiled_transpose_matches_jnp(warp, shape):
    x = random_normal(6, shape)
    out = jax.jit(lambda x: gk.transpose(x, warp_size=warp))(x)
    np.testing.assert_array_equal(out, x.T)


def test_autotuned_gluon_kernel_matches_jnp_whichever_config_wins(warp):
    kernel = triton.autotune(configs=[
        triton.Config({"BLOCK": 1024, "NUM_WARPS": 4}, num_warps=4),
        triton.Config({"BLOCK": 2048, "NUM_WARPS": 8}, num_warps=8),
    ], key=["n"])(gk.copy_kernel)
    x = random_normal(7, (1 << 16,))
    out = jax.jit(lambda x: jtr.triton_call(
        x, x.size, kernel=kernel, out_shape=x,
        grid=lambda meta: (triton.cdiv(x.size, meta["BLOCK"]),), WARP_SIZE=warp))(x)
    np.testing.assert_array_equal(out, x)


def test_gluon_example_runs_and_matches_jnp():
    gluon_utils.load_example().run_on_device(jax.devices()[0])  # asserts against x + y itself
