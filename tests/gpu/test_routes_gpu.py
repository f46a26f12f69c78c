"""Kernels run through every route a call can take, compared with jax.numpy references.

Routes: jaxlib's Triton custom call and XLA's own (`xla_native`), on whichever GPU JAX sees,
NVIDIA or AMD (marked `gpu`); and Triton's interpreter, on the CPU (which runs here too: every
array is placed on the CPU device, so it runs on a GPU machine as well). The `route` fixture
also takes "default": the GPU route of a call that asks for none, which is jaxlib's. It fails a
test whose calls did not all take its route, so that a silent fallback (XLA's call to jaxlib's,
say) cannot pass for the route.

The tests on every route (`every_route`) are in tests/support/every_route/calls.py;
tests/cpu/test_routes.py collects them too, where they run on the interpreter, and this
file on the GPU routes.
"""

import numpy as np
import pytest

import jax

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env
from tests.support import kernels
from tests.support.gpu_utils import gpu_devices, gpu_platform
from tests.support.routes import EXPORT_TARGET, gpu_route
from tests.support.every_route.calls import *  # noqa: F403  (its tests)


@gpu_route
def test_same_kernel_in_many_jits_compiles_once(route):
    jtr.clear_caches()
    from jax_triton_rocm.base import _state

    x = route.rand(16, (2048,))
    for block in (256, 256, 256):
        jax.jit(lambda x: kernels.add(x, x, block=block))(x).block_until_ready()
    assert _state.COMPILED_KERNELS.stats["compiles"] == 1


@gpu_route
@pytest.mark.multi_gpu
def test_sharded_call_runs_on_every_device(route):
    devices = gpu_devices()
    mesh = jax.sharding.Mesh(np.array(devices), ("d",))
    spec = jax.sharding.PartitionSpec("d")
    n = 4096 * len(devices)
    sharding = jax.sharding.NamedSharding(mesh, spec)
    x = jax.device_put(route.rand(17, (n,)), sharding)
    y = jax.device_put(route.rand(18, (n,)), sharding)
    f = jax.jit(jax.shard_map(lambda a, b: kernels.add(a, b), mesh=mesh,
                              in_specs=(spec, spec), out_specs=spec))
    np.testing.assert_allclose(f(x, y), x + y, rtol=1e-6)


@gpu_route
@pytest.mark.multi_gpu
def test_call_on_the_second_device_runs_there(route):
    second = gpu_devices()[1]
    x = jax.device_put(route.rand(19, (4096,)), second)
    out = jax.jit(kernels.add)(x, x)
    assert out.devices() == {second}
    np.testing.assert_allclose(out, 2 * x, rtol=1e-6)


@gpu_route
@pytest.mark.multi_gpu
def test_threads_calling_on_every_device_at_once(route):
    import concurrent.futures

    devices = gpu_devices()
    jtr.clear_caches()

    def work(i):
        x = jax.device_put(route.rand(100 + i, (8192,)), devices[i % len(devices)])
        return np.asarray(jax.jit(lambda a: kernels.add(a, a, block=512))(x)), np.asarray(2 * x)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        for out, ref in pool.map(work, range(16)):
            np.testing.assert_allclose(out, ref, rtol=1e-6)


@gpu_route
def test_exported_call_runs_after_serialization(route):
    from jax import export

    x, y = route.rand(20, (4096,)), route.rand(21, (4096,))
    exported = export.export(jax.jit(kernels.add), platforms=[gpu_platform()], disabled_checks=[
        export.DisabledSafetyCheck.custom_call(EXPORT_TARGET[route.name])])(x, y)
    assert EXPORT_TARGET[route.name] in exported.mlir_module()
    route.plain_targets.discard(EXPORT_TARGET[route.name])  # checked here, for export
    restored = export.deserialize(exported.serialize())
    np.testing.assert_allclose(restored.call(x, y), x + y, rtol=1e-6)


@pytest.mark.process
@pytest.mark.gpu
@pytest.mark.parametrize("route_name", ["jaxlib", "xla"])
def test_persistent_compilation_cache_serves_a_second_process(tmp_path, route_name):
    from tests.support.subprocess_utils import last_line, run_python

    code = """
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_compilation_cache_dir", {cache!r})
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        from tests.support import kernels
        x = jnp.arange(4096, dtype=jnp.float32)
        f = jax.jit(lambda a: kernels.add(a, a, block=256))
        assert {target!r} in f.lower(x).as_text()
        np.testing.assert_allclose(f(x), 2 * x)
        import os
        print(len(os.listdir({cache!r})))
    """.format(cache=str(tmp_path), target=EXPORT_TARGET[route_name])
    env = {_env.ENV_XLA_NATIVE: "1" if route_name == "xla" else "0"}
    first = run_python(code, env=env)
    second = run_python(code, env=env)
    assert int(last_line(first)) >= 1, first.stderr[-2000:]
    # The same call gives the same bytes in the new process: a hit, no new entry.
    assert last_line(second) == last_line(first), second.stderr[-2000:]


@pytest.mark.gpu
@pytest.mark.parametrize("route", ["xla"], indirect=True)
def test_routes_mix_in_one_function(route):
    x, y = route.rand(30, (4096,)), route.rand(31, (4096,))
    out = jax.jit(lambda a, b: kernels.add(kernels.add(a, b, xla_native=False), b))(x, y)
    # (x + y) + y in float32, as the two kernels round it (x + 2 * y may round differently).
    x, y = np.asarray(x), np.asarray(y)
    np.testing.assert_array_equal(out, (x + y) + y)
    assert route.emitted == {"jaxlib": 1, "xla": 1, "interpreter": 0}
    route.expect(None)


@pytest.mark.process
@pytest.mark.gpu
@pytest.mark.parametrize("flags,target", [
    ("--xla_gpu_enable_command_buffer=", "triton_kernel_call"),
    ("--xla_gpu_enable_command_buffer=-CUSTOM_CALL", "triton_kernel_call"),
    ("", "triton_kernel_call_ffi"),
])
def test_the_default_target_follows_xlas_command_buffer_flags(flags, target):
    """In a process whose XLA_FLAGS keep custom calls out of command buffers, plain calls take
    jaxlib's legacy target (`JAX_TRITON_ROCM_CALL_TARGET` unset); the chain's operands are
    computed in the same program, its output buffer poisoned first by an earlier result."""
    from tests.support.subprocess_utils import last_line, run_python

    code = """
        import jax, jax.numpy as jnp, numpy as np
        from tests.support import kernels
        poison = jnp.full((65536,), jnp.nan, jnp.float32).block_until_ready()
        del poison
        x = jnp.arange(65536, dtype=jnp.float32) / 7
        def chain(a, b):
            for _ in range(6):
                a = kernels.add(a * 0.5, b, block=512)
            return a
        f = jax.jit(chain)
        text = f.lower(x, x).as_text()
        np.testing.assert_array_equal(np.asarray(f(x, x)), np.asarray(jax.jit(
            lambda a, b: [a := a * 0.5 + b for _ in range(6)][-1])(x, x)))
        print("@" + {target!r} + "(" in text, "@triton_kernel_call_ffi(" in text)
    """.format(target=target)
    result = run_python(code, env={"XLA_FLAGS": flags}, unset=(_env.ENV_CALL_TARGET,))
    assert result.returncode == 0, result.stderr[-3000:]
    assert last_line(result) == ("True False" if target == "triton_kernel_call" else "True True")
