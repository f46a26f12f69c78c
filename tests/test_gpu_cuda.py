"""Kernels launched on the GPU (NVIDIA or AMD) through the bridge, compared with jnp references."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton

import jax_triton_rocm as jtr
from tests import kernels
from tests.gpu_utils import gpu_devices, gpu_platform
from tests.kernels import random_normal

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n", [1024, 1000, 1 << 20])
def test_vector_add_matches_jnp(n):
    x, y = random_normal(0, (n,)), random_normal(1, (n,))
    np.testing.assert_allclose(jax.jit(kernels.add)(x, y), x + y, rtol=1e-6)


def test_eager_call_outside_jit_matches_jnp():
    x, y = random_normal(2, (4096,)), random_normal(3, (4096,))
    np.testing.assert_allclose(kernels.add(x, y), x + y, rtol=1e-6)


def test_fused_softmax_matches_jax_nn():
    x = random_normal(4, (128, 781))
    np.testing.assert_allclose(jax.jit(kernels.softmax)(x), jax.nn.softmax(x, axis=-1),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype,tol", [(jnp.float16, 1e-2), (jnp.bfloat16, 2e-2),
                                       (jnp.float32, 1e-2)])
def test_matmul_matches_jnp(dtype, tol):
    a, b = random_normal(5, (256, 192), dtype), random_normal(6, (192, 320), dtype)
    out = jax.jit(kernels.matmul)(a, b)
    assert out.dtype == dtype
    assert kernels.matmul_relative_error(out, a, b) < tol


@pytest.mark.parametrize("scale,shift,flip", [(2.5, 3, False), (0.5, -7, True), (1.0, 1, True),
                                              (np.float32(3.0), 2**40, False)])
def test_int_float_bool_scalars_reach_the_kernel(scale, shift, flip):
    x = random_normal(7, (3000,))
    out = jtr.triton_call(x, scale, shift, flip, x.size, kernel=kernels.scale_shift_kernel,
                          out_shape=x, grid=(triton.cdiv(x.size, 512),), BLOCK=512)
    ref = x * np.float32(scale) + np.float32(shift)
    np.testing.assert_allclose(out, -ref if flip else ref, rtol=1e-6, atol=1e-6)  # FMA


def test_input_output_aliases_with_donation_updates_in_place():
    x, y = random_normal(8, (2048,)), random_normal(9, (2048,))
    expected = x + y

    @jax.jit
    def inplace(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernels.add_inplace_kernel, out_shape=x,
                               grid=(8,), BLOCK=256, input_output_aliases={0: 0})

    donated = jax.jit(inplace, donate_argnums=0)
    np.testing.assert_allclose(donated(x, y), expected, rtol=1e-6)
    assert x.is_deleted()


def test_zeroed_outputs_are_zeroed_before_launch():
    x = random_normal(10, (8192,))

    @jax.jit
    def total(x):
        return jtr.triton_call(x, x.size, kernel=kernels.atomic_sum_kernel,
                               out_shape=jax.ShapeDtypeStruct((1,), jnp.float32),
                               grid=(8192 // 1024,), BLOCK=1024, zeroed_outputs=(0,))

    for _ in range(3):  # a reused, unzeroed buffer would accumulate
        np.testing.assert_allclose(total(x)[0], jnp.sum(x), rtol=1e-4)


def test_two_outputs_in_pytree_order():
    x, y = random_normal(11, (5000,)), random_normal(12, (5000,))
    # Outputs fill the kernel's pointers in out_shape's pytree order (dict keys sorted).
    out = jax.jit(lambda x, y: jtr.triton_call(
        x, y, x.size, kernel=kernels.sum_and_diff_kernel,
        out_shape={"a_sum": x, "b_diff": x}, grid=(triton.cdiv(5000, 256),), BLOCK=256))(x, y)
    np.testing.assert_allclose(out["a_sum"], x + y, rtol=1e-6)
    np.testing.assert_allclose(out["b_diff"], x - y, rtol=1e-6)


def test_callable_grid_sees_the_metaparameters():
    x, y = random_normal(13, (3333,)), random_normal(14, (3333,))
    seen = []

    def grid(meta):
        seen.append(meta["BLOCK"])
        return (triton.cdiv(x.size, meta["BLOCK"]),)

    out = jax.jit(lambda x, y: jtr.triton_call(x, y, x.size, kernel=kernels.add_kernel,
                                               out_shape=x, grid=grid, BLOCK=128))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    assert seen and set(seen) == {128}


def test_inside_lax_scan():
    x = random_normal(15, (1024,))

    def body(carry, _):
        return kernels.add(carry, x), None

    out, _ = jax.jit(lambda c: jax.lax.scan(body, c, None, length=10))(jnp.zeros_like(x))
    np.testing.assert_allclose(out, 10 * x, rtol=1e-5)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.int32, jnp.uint16, jnp.int64, jnp.float16,
                                   jnp.bfloat16, jnp.float64, jnp.float8_e4m3fn,
                                   jnp.float8_e5m2, jnp.bool_])
def test_copy_round_trips_every_dtype(dtype):
    jax.config.update("jax_enable_x64", True)
    try:
        x = jnp.asarray(np.arange(1000) % 7).astype(dtype)
        np.testing.assert_array_equal(np.asarray(jax.jit(kernels.copy)(x)).view(np.uint8),
                                      np.asarray(x).view(np.uint8))
    finally:
        jax.config.update("jax_enable_x64", False)


def test_same_kernel_in_many_jits_compiles_once():
    jtr.clear_caches()
    from jax_triton_rocm.base import _state

    x = random_normal(16, (2048,))
    for block in (256, 256, 256):
        jax.jit(lambda x: kernels.add(x, x, block=block))(x).block_until_ready()
    assert _state.KERNELS.stats["compiles"] == 1


@pytest.mark.multi_gpu
def test_sharded_call_runs_on_every_device():
    devices = gpu_devices()
    mesh = jax.sharding.Mesh(np.array(devices), ("d",))
    spec = jax.sharding.PartitionSpec("d")
    n = 4096 * len(devices)
    x, y = random_normal(17, (n,)), random_normal(18, (n,))
    sharding = jax.sharding.NamedSharding(mesh, spec)
    x, y = jax.device_put(x, sharding), jax.device_put(y, sharding)
    f = jax.jit(jax.shard_map(lambda a, b: kernels.add(a, b), mesh=mesh,
                              in_specs=(spec, spec), out_specs=spec))
    np.testing.assert_allclose(f(x, y), x + y, rtol=1e-6)


@pytest.mark.multi_gpu
def test_call_on_the_second_device_runs_there():
    second = gpu_devices()[1]
    x = jax.device_put(random_normal(19, (4096,)), second)
    out = jax.jit(kernels.add)(x, x)
    assert out.devices() == {second}
    np.testing.assert_allclose(out, 2 * x, rtol=1e-6)


@pytest.mark.multi_gpu
def test_threads_calling_on_every_device_at_once():
    import concurrent.futures

    devices = gpu_devices()
    jtr.clear_caches()

    def work(i):
        device = devices[i % len(devices)]
        x = jax.device_put(random_normal(100 + i, (8192,)), device)
        return np.asarray(jax.jit(lambda a: kernels.add(a, a, block=512))(x)), np.asarray(2 * x)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for out, ref in pool.map(work, range(16)):
            np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_exported_call_runs_after_serialization():
    from jax import export

    target = "triton_kernel_call_ffi"
    x, y = random_normal(20, (4096,)), random_normal(21, (4096,))
    exported = export.export(jax.jit(kernels.add), platforms=[gpu_platform()],
                             disabled_checks=[export.DisabledSafetyCheck.custom_call(target)])(x, y)
    restored = export.deserialize(exported.serialize())
    np.testing.assert_allclose(restored.call(x, y), x + y, rtol=1e-6)


def test_persistent_compilation_cache_serves_a_second_process(tmp_path):
    from tests.subprocess_utils import last_line, run_python

    code = """
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_compilation_cache_dir", {cache!r})
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        from tests import kernels
        x = jnp.arange(4096, dtype=jnp.float32)
        out = jax.jit(lambda a: kernels.add(a, a, block=256))(x)
        np.testing.assert_allclose(out, 2 * x)
        import os
        print(len(os.listdir({cache!r})))
    """.format(cache=str(tmp_path))
    first = run_python(code)
    second = run_python(code)
    assert int(last_line(first)) >= 1, first.stderr[-2000:]
    # The same Triton call gives the same bytes in the new process: a hit, no new entry.
    assert last_line(second) == last_line(first), second.stderr[-2000:]
