"""`jtr.partitioned` on GPUs, against jnp: on a mesh of one GPU (the same code path, on any GPU
machine) and of two (multi_gpu: skipped, with the reason, where there is one). Operands are
computed earlier in the same program; the compiled program is read for gathers."""

import os
import runpy

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env
from jax_triton_rocm.routes import _choices
from tests.support import autotune_utils
from tests.support import partition_kernels as pk
from tests.support.gpu_utils import gpu_devices
from tests.support.lowering_utils import compiled_text
from tests.support.subprocess_utils import ROOT

pytestmark = pytest.mark.gpu

COUNTS = [1, pytest.param(2, marks=pytest.mark.multi_gpu)]


def _split(x, count, *spec):
    mesh = Mesh(np.array(gpu_devices()[:count]), ("d",))
    sharding = NamedSharding(mesh, P(*spec))
    return jax.device_put(x, sharding), sharding


@pytest.mark.parametrize("count", COUNTS)
def test_split_rows_run_per_gpu_without_gathering(count):
    x, y = pk.matrix(64, 1000, seed=1), pk.matrix(64, 1000, seed=2)
    (xs, by_rows), (ys, _) = _split(x, count, "d", None), _split(y, count, "d", None)
    step = jax.jit(lambda a, b: pk.add(a * 2.0, b + 1.0))
    out = step(xs, ys)
    assert out.sharding.is_equivalent_to(by_rows, out.ndim), out.sharding
    np.testing.assert_allclose(out, 2.0 * x + y + 1.0, rtol=1e-6, atol=1e-6)
    assert "all-gather" not in compiled_text(step, xs, ys)


@pytest.mark.parametrize("count", COUNTS)
def test_contracted_dimension_reduced_by_sum_is_not_gathered(count):
    x = pk.matrix(32, 512, seed=3)
    xs, _ = _split(x, count, None, "d")
    step = jax.jit(lambda a: pk.row_sum_reduced(jnp.abs(a)))
    np.testing.assert_allclose(step(xs), jnp.abs(x).sum(axis=1), rtol=1e-5, atol=1e-5)
    assert "all-gather" not in compiled_text(step, xs)


@pytest.mark.parametrize("count", COUNTS)
def test_library_primitive_partitioned_by_a_rule_matches_jnp(count):
    x = pk.matrix(64, 300, seed=4)
    xs, by_rows = _split(x, count, "d", None)
    step = jax.jit(lambda a: pk.row_amax(a - 1.0))
    out = step(xs)
    assert len(out.sharding.device_set) == count
    np.testing.assert_allclose(out, jnp.max(jnp.abs(x - 1.0), axis=1), rtol=1e-6, atol=1e-6)
    assert "all-gather" not in compiled_text(step, xs)


@pytest.mark.parametrize("count", COUNTS)
def test_vmap_of_a_partitioned_function_splits_the_batch(count):
    x = jnp.stack([pk.matrix(16, 256, seed=s) for s in range(4)])
    xs, _ = _split(x, count, "d", None, None)
    step = jax.jit(jax.vmap(lambda a: pk.add(a, a + 1.0)))
    np.testing.assert_allclose(step(xs), 2.0 * x + 1.0, rtol=1e-6, atol=1e-6)
    assert "all-gather" not in compiled_text(step, xs)


@pytest.mark.parametrize("count", COUNTS)
def test_autotune_picks_once_per_shard_shape(count, tmp_path, monkeypatch, fresh_caches):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))
    x, y = pk.matrix(64, 2048, seed=5), pk.matrix(64, 2048, seed=6)
    (xs, _), (ys, _) = _split(x, count, "d", None), _split(y, count, "d", None)
    step = jax.jit(lambda a, b: pk.tuned_add(a * 2.0, b))
    before = _choices.STORE.generation
    np.testing.assert_allclose(jtr.autotune(step, xs, ys), 2.0 * x + y, rtol=1e-6, atol=1e-6)
    assert _choices.STORE.generation == before + 1  # one choice: every shard has one shape
    np.testing.assert_allclose(jtr.autotune(step, xs, ys), 2.0 * x + y, rtol=1e-6, atol=1e-6)
    assert _choices.STORE.generation == before + 1  # remembered: nothing timed again

    def undecided(rows):
        spec = jax.ShapeDtypeStruct((rows, 2048), jnp.float32)
        with _choices.session() as current:
            jax.jit(autotune_utils.tuned_add).trace(spec, spec).lower()
        return list(current.undecided)

    assert undecided(64 // count) == []  # the shard's shape is decided
    if count > 1:
        assert undecided(64) != []  # the full shape was never a call's


def test_example_runs_on_every_gpu():
    example = runpy.run_path(os.path.join(ROOT, "examples", "sharded_add.py"), run_name="example")
    devices = gpu_devices()
    assert example["run"](devices).startswith(f"{len(devices)} {devices[0].platform} devices")
