"""A call's compiles start when JAX traces it, where the trace can tell the target; the lowering
then finds them in the kernel cache, running or done (docs/design.md, "Compiles start at the
trace"). Cross-compiles for sm_90 on the CPU, under `target_arch`."""

import threading
import time

import jax
import jax.numpy as jnp
import pytest
import triton
from triton.compiler.errors import CompileTimeAssertionFailure

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env, _state
from jax_triton_rocm.compile import _folders
from tests.support import autotune_utils, kernels
from tests.support.lowering_utils import lower_for, spec

X = spec((1024,), jnp.float32)
CONFIGS = len(autotune_utils.ADD_CONFIGS)


def traced(fn, *args, **archs):
    """`fn(*args)` traced (never lowered) under `target_arch(**archs)`, sm_90 by default; returns
    once the compiles it started have ended."""
    with jtr.target_arch(**(archs or {"cuda": "sm_90"})):
        jax.make_jaxpr(fn)(*args)
    _state.COMPILE_POOL.wait()


def compiles() -> int:
    return _state.COMPILED_KERNELS.stats["compiles"]


@pytest.fixture
def slow_compiles(monkeypatch):
    """Each compile made to last 0.3 s longer; yields [the compiles begun, the most running at
    once]."""
    compile_in_usable_cache = _folders.compile_in_usable_cache
    counts, running, lock = [0, 0], [0], threading.Lock()

    def counted(*args, **kwargs):
        with lock:
            counts[0] += 1
            running[0] += 1
            counts[1] = max(counts[1], running[0])
        try:
            time.sleep(0.3)
            return compile_in_usable_cache(*args, **kwargs)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(_folders, "compile_in_usable_cache", counted)
    return counts


def test_a_trace_never_lowered_compiles_for_a_later_lowering_which_compiles_nothing(
        cache_dir):
    traced(kernels.add, X, X)
    assert compiles() == 1
    lower_for(kernels.add, X, X, platform="cuda")
    assert compiles() == 1 and _state.COMPILED_KERNELS.stats["hits"] == 1


def test_an_autotuned_call_starts_every_config(cache_dir):
    traced(autotune_utils.tuned_add, X, X)
    assert compiles() == CONFIGS


def test_the_switch_leaves_the_compiles_to_the_lowering(monkeypatch, cache_dir):
    monkeypatch.setenv(_env.ENV_EARLY_COMPILE, "0")
    traced(kernels.add, X, X)
    assert compiles() == 0
    lower_for(kernels.add, X, X, platform="cuda")
    assert compiles() == 1


def test_nothing_starts_where_the_trace_cannot_tell_the_platform(cache_dir):
    traced(kernels.add, X, X, cuda="sm_90", rocm="gfx942")  # either, and JAX's CPU by default
    assert compiles() == 0 and len(_state.COMPILE_POOL) == 0


def test_a_call_for_xla_s_route_starts_nothing(cache_dir):
    traced(lambda x, y: kernels.add(x, y, xla_native=True), X, X)
    assert compiles() == 0


def test_a_call_that_fails_to_plan_traces_and_fails_at_the_lowering(cache_dir):
    def call(x):
        return jtr.triton_call(x, x, x.size, kernel=kernels.add_kernel, out_shape=x,
                               grid=lambda meta: (meta["BLOCK"] // 0,), BLOCK=256)

    traced(call, X)  # the grid raises here too, and the trace drops it
    with pytest.raises(ValueError, match="grid"):
        lower_for(call, X, platform="cuda")


def test_a_compile_error_is_raised_by_the_lowering_once_and_not_compiled_again(cache_dir):
    def call(x, y):
        return jtr.triton_call(x, y, x.size, kernel=autotune_utils.capped_add_kernel,
                               out_shape=x, grid=(triton.cdiv(x.size, 512),), BLOCK=512)

    traced(call, X, X)
    assert _state.COMPILED_KERNELS.stats["failures"] == 1
    with pytest.raises(CompileTimeAssertionFailure):
        lower_for(call, X, X, platform="cuda")
    assert _state.COMPILED_KERNELS.stats["failures"] == 1


@pytest.mark.parametrize("early", ["1", "0"])
@pytest.mark.parametrize("threads", [1, 2])
def test_compile_threads_bounds_the_pool_and_the_lowering_together(
        monkeypatch, cache_dir, slow_compiles, threads, early):
    monkeypatch.setenv(_env.ENV_COMPILE_THREADS, str(threads))
    # Without early compiles the lowering compiles the first config beside the pool's threads.
    monkeypatch.setenv(_env.ENV_EARLY_COMPILE, early)
    lower_for(autotune_utils.tuned_add, X, X, platform="cuda")
    assert slow_compiles == [CONFIGS, threads]


def test_clear_caches_drops_the_compiles_not_yet_running(monkeypatch, cache_dir, slow_compiles):
    monkeypatch.setenv(_env.ENV_COMPILE_THREADS, "1")
    with jtr.target_arch(cuda="sm_90"):
        jax.make_jaxpr(autotune_utils.tuned_add)(X, X)
    jtr.clear_caches()  # returns once the one running has ended
    assert slow_compiles[0] == 1 and len(_state.COMPILE_POOL) == 0


def test_the_compiles_queued_stay_within_the_kernel_cache_bound(monkeypatch, cache_dir,
                                                                 slow_compiles):
    monkeypatch.setenv(_env.ENV_COMPILE_THREADS, "1")
    monkeypatch.setenv(_env.ENV_KERNEL_CACHE_SIZE, "2")
    traced(autotune_utils.tuned_add, X, X)
    assert slow_compiles[0] == 2


def test_threads_tracing_one_call_at_once_compile_it_once(cache_dir):
    start = threading.Barrier(4)
    errors = []

    def trace():
        try:
            start.wait()
            with jtr.target_arch(cuda="sm_90"):
                jax.make_jaxpr(lambda x, y: kernels.add(x, y))(X, X)
        except Exception as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=trace) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    _state.COMPILE_POOL.wait()
    assert errors == [] and compiles() == 1
