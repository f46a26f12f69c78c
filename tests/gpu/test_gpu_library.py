"""Library primitives lowered with `triton_call_lowering`, run on the GPU against jnp, on one GPU
and sharded over two (custom_partitioning, shard_map)."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from tests.support import library_kernels as lk
from tests.support.gpu_utils import gpu_devices, on_gpu

pytestmark = pytest.mark.gpu


def test_autotuned_amax_matches_jnp():
    x = on_gpu(jax.random.normal(jax.random.key(0), (1 << 20,), jnp.float32))
    np.testing.assert_allclose(jax.jit(lk.amax)(x), lk.amax_reference(x))


def test_in_place_kernel_matches_jnp_with_donation():
    x = on_gpu(jnp.linspace(-1, 1, 100_003, dtype=jnp.float32))
    expected = 3.0 * np.asarray(x)
    out = jax.jit(lk.scale_in_place, donate_argnums=0)(x)
    np.testing.assert_allclose(out, expected, rtol=1e-6)
    assert x.is_deleted()  # donated: the kernel wrote into the input's buffer


def test_multi_output_kernel_matches_jnp():
    x = on_gpu(jax.random.normal(jax.random.key(1), (10_000,), jnp.float32))
    y = on_gpu(jax.random.normal(jax.random.key(2), (10_000,), jnp.float32))
    total, diff = jax.jit(lk.sum_diff)(x, y)
    np.testing.assert_allclose(total, x + y, rtol=1e-6)
    np.testing.assert_allclose(diff, x - y, rtol=1e-6)


def test_gluon_kernel_through_the_helper_matches_jnp():
    x = on_gpu(jax.random.normal(jax.random.key(3), (5000,), jnp.float32))
    np.testing.assert_array_equal(jax.jit(lk.gluon_copy)(x), x)


def _row_sharded(x, count):
    mesh = jax.make_mesh((count,), ("rows",), devices=gpu_devices()[:count])
    return mesh, jax.device_put(x, jax.NamedSharding(mesh, jax.P("rows", None)))


@pytest.mark.parametrize("count", [1, pytest.param(2, marks=pytest.mark.multi_gpu)])
def test_custom_partitioning_runs_per_shard(count):
    x = jax.random.normal(jax.random.key(4), (64, 300), jnp.float32)
    _, sharded = _row_sharded(x, count)
    out = jax.jit(lk.row_amax_sharded)(sharded)
    assert len(out.sharding.device_set) == count
    np.testing.assert_allclose(out, lk.row_amax_reference(x))


@pytest.mark.parametrize("count", [1, pytest.param(2, marks=pytest.mark.multi_gpu)])
def test_shard_map_runs_the_primitive_per_shard(count):
    x = jax.random.normal(jax.random.key(5), (64, 300), jnp.float32)
    mesh, sharded = _row_sharded(x, count)
    f = jax.jit(jax.shard_map(lambda x: lk.row_amax_p.bind(x)[0], mesh=mesh,
                              in_specs=jax.P("rows", None), out_specs=jax.P("rows")))
    np.testing.assert_allclose(f(sharded), lk.row_amax_reference(x))


def test_vmap_of_an_in_place_library_primitive_updates_each_example():
    # Each example is sliced from and written back to one array: XLA's dynamic-slice fusion
    # (which takes slices aligned to 128 bytes, as these rows of 2048 floats are) would otherwise
    # hand the in-place kernel an output that does not hold its input.
    x = jax.random.normal(jax.random.key(21), (4, 3, 2048), jnp.float32)
    out = jax.jit(jax.vmap(jax.vmap(lambda v: lk.scale_in_place(v, alpha=2.0))))(x)
    np.testing.assert_allclose(out, 2.0 * x, rtol=1e-6)
