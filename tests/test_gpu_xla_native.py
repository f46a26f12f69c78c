"""The GPU tests of `test_gpu_cuda.py` again, on XLA's own Triton custom call.

Each runs with JAX_TRITON_ROCM_XLA_NATIVE=1 and checks which route its calls took, so that a
silent fallback to jaxlib's call cannot pass for the native route.
"""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jax_triton_rocm.lowering import _jaxlib_call, _xla_native
from tests import kernels
from tests import test_gpu_cuda as base
from tests.gpu_utils import gpu_platform
from tests.kernels import random_normal

pytestmark = pytest.mark.gpu


class Routes:
    def __init__(self):
        self.native = 0
        self.jaxlib = 0


@pytest.fixture(autouse=True)
def routes(monkeypatch):
    """Native route on by default; counts the calls emitted through each route."""
    monkeypatch.setenv(_xla_native.ENV_XLA_NATIVE, "1")
    jax.clear_caches()  # lowerings from other tests may have taken jaxlib's route
    counts = Routes()
    native_emit, jaxlib_emit = _xla_native.emit, _jaxlib_call.emit

    def count_native(*args, **kwargs):
        counts.native += 1
        return native_emit(*args, **kwargs)

    def count_jaxlib(*args, **kwargs):
        counts.jaxlib += 1
        return jaxlib_emit(*args, **kwargs)

    monkeypatch.setattr(_xla_native, "emit", count_native)
    monkeypatch.setattr(_jaxlib_call, "emit", count_jaxlib)
    yield counts
    jax.clear_caches()


def assert_native_only(routes):
    assert routes.native > 0 and routes.jaxlib == 0, vars(routes)


@pytest.mark.parametrize("n", [1024, 1000, 1 << 20])
def test_vector_add_matches_jnp(n, routes):
    base.test_vector_add_matches_jnp(n)
    assert_native_only(routes)


def test_eager_call_outside_jit_matches_jnp(routes):
    base.test_eager_call_outside_jit_matches_jnp()
    assert_native_only(routes)


def test_fused_softmax_matches_jax_nn(routes):
    base.test_fused_softmax_matches_jax_nn()
    assert_native_only(routes)


@pytest.mark.parametrize("dtype,tol", [(jnp.float16, 1e-2), (jnp.bfloat16, 2e-2),
                                       (jnp.float32, 1e-2)])
def test_matmul_matches_jnp(dtype, tol, routes):
    base.test_matmul_matches_jnp(dtype, tol)
    assert_native_only(routes)


@pytest.mark.parametrize("scale,shift,flip", [(2.5, 3, False), (0.5, -7, True), (1.0, 1, True),
                                              (np.float32(3.0), 2**40, False)])
def test_int_float_bool_scalars_reach_the_kernel(scale, shift, flip, routes):
    base.test_int_float_bool_scalars_reach_the_kernel(scale, shift, flip)
    assert_native_only(routes)


def test_input_output_aliases_with_donation_updates_in_place(routes):
    base.test_input_output_aliases_with_donation_updates_in_place()
    assert_native_only(routes)


def test_zeroed_outputs_take_jaxlibs_call_and_are_zeroed(routes):
    base.test_zeroed_outputs_are_zeroed_before_launch()
    assert routes.native == 0 and routes.jaxlib > 0, vars(routes)


def test_two_outputs_in_pytree_order(routes):
    base.test_two_outputs_in_pytree_order()
    assert_native_only(routes)


def test_callable_grid_sees_the_metaparameters(routes):
    base.test_callable_grid_sees_the_metaparameters()
    assert_native_only(routes)


def test_inside_lax_scan(routes):
    base.test_inside_lax_scan()
    assert_native_only(routes)


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "int64", "float16", "bfloat16",
                                   "float64", "float8_e4m3fn", "float8_e5m2", "bool"])
def test_copy_round_trips_every_dtype(dtype, routes):
    base.test_copy_round_trips_every_dtype(jnp.dtype(dtype))
    assert_native_only(routes)


def test_same_kernel_in_many_jits_compiles_once(routes):
    base.test_same_kernel_in_many_jits_compiles_once()
    assert_native_only(routes)


@pytest.mark.multi_gpu
def test_sharded_call_runs_on_every_device(routes):
    base.test_sharded_call_runs_on_every_device()
    assert_native_only(routes)


@pytest.mark.multi_gpu
def test_call_on_the_second_device_runs_there(routes):
    base.test_call_on_the_second_device_runs_there()
    assert_native_only(routes)


@pytest.mark.multi_gpu
def test_threads_calling_on_every_device_at_once(routes):
    base.test_threads_calling_on_every_device_at_once()
    assert_native_only(routes)


def test_mixed_routes_in_one_function(routes):
    x, y = random_normal(30, (4096,)), random_normal(31, (4096,))
    out = jax.jit(lambda a, b: kernels.add(kernels.add(a, b, xla_native=False), b))(x, y)
    np.testing.assert_allclose(out, x + 2 * y, rtol=1e-6)
    assert routes.native == 1 and routes.jaxlib == 1, vars(routes)


def test_exported_call_runs_after_serialization(routes):
    from jax import export

    x, y = random_normal(20, (4096,)), random_normal(21, (4096,))
    exported = export.export(jax.jit(kernels.add), platforms=[gpu_platform()], disabled_checks=[
        export.DisabledSafetyCheck.custom_call(_xla_native.CUSTOM_CALL_TARGET)])(x, y)
    restored = export.deserialize(exported.serialize())
    np.testing.assert_allclose(restored.call(x, y), x + y, rtol=1e-6)
    assert_native_only(routes)


def test_persistent_compilation_cache_serves_a_second_process(tmp_path):
    from tests.subprocess_utils import last_line, run_python

    code = """
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_compilation_cache_dir", {cache!r})
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        from tests import kernels
        x = jnp.arange(4096, dtype=jnp.float32)
        f = jax.jit(lambda a: kernels.add(a, a, block=256))
        assert "__gpu$xla.gpu.triton" in f.lower(x).as_text()
        np.testing.assert_allclose(f(x), 2 * x)
        import os
        print(len(os.listdir({cache!r})))
    """.format(cache=str(tmp_path))
    env = {_xla_native.ENV_XLA_NATIVE: "1"}
    first = run_python(code, env=env)
    second = run_python(code, env=env)
    assert int(last_line(first)) >= 1, first.stderr[-2000:]
    # The IR is the same bytes in the new process: a hit, no new entry.
    assert last_line(second) == last_line(first), second.stderr[-2000:]
