"""Bounded memory: every cache keeps at most its bound, a forgotten entry is computed again with
the same result, and `clear_caches()` lets every kernel and compiled binary be freed."""

import gc
import weakref

import jax
import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env, _state
from jax_triton_rocm.compile._compile import CompiledKernel
from tests.support import kernels
from tests.support.lowering_utils import lower_for, lower_one, spec

X = spec((4096,), jnp.float32)
CPU = jax.devices("cpu")[0]


def _compiled_kernels_alive() -> int:
    return sum(isinstance(o, CompiledKernel) for o in gc.get_objects())


def _use_everywhere(kernel) -> None:
    """Lowers `kernel` on every route and runs it on the CPU, so every cache sees it."""
    def add(x, y, **kwargs):
        return jtr.triton_call(x, y, x.size, kernel=kernel, out_shape=x, grid=(16,), BLOCK=256,
                               **kwargs)

    lower_for(add, X, X, platform="cuda")
    lower_for(add, X, X, platform="rocm")
    lower_for(lambda x, y: add(x, y, xla_native=True), X, X, platform="cuda")
    x = jax.device_put(jnp.ones(4096, jnp.float32), CPU)
    jax.block_until_ready(jax.jit(add)(x, x))


def test_clear_caches_lets_every_kernel_and_binary_be_freed():
    jtr.clear_caches()
    gc.collect()
    binaries = _compiled_kernels_alive()
    functions = []
    for op in ("x + y", "x - y", "x * y"):
        kernel = kernels.elementwise_kernel(op)
        _use_everywhere(kernel)
        functions.append(weakref.ref(kernel))
        del kernel
    # Triton 3.9 keeps the last @jit function of each name in a registry of its own
    # (triton.runtime.jit._triton_jit_function_registry); a fourth of the name takes its place.
    newest = kernels.elementwise_kernel("x")
    gc.collect()
    assert _compiled_kernels_alive() >= binaries + 3
    assert all(ref() is not None for ref in functions)  # the caches hold them
    jtr.clear_caches()
    gc.collect()
    assert [ref() for ref in functions] == [None, None, None]
    assert _compiled_kernels_alive() == binaries
    del newest


def _lower_block(block: int):
    return lower_one(lambda x, y: kernels.add(x, y, block=block, xla_native=False), X, X,
                     platform="cuda")


def test_the_kernel_cache_keeps_its_bound_and_compiles_a_forgotten_kernel_again(monkeypatch,
                                                                                fresh_caches):
    monkeypatch.setenv(_env.ENV_KERNEL_CACHE_SIZE, "2")
    monkeypatch.setenv(_env.ENV_CALL_CACHE_SIZE, "2")  # no lowered call to serve it either
    first = _lower_block(128).message.kernel_call.kernel.module_image.object_file
    for block in (256, 512, 1024):
        _lower_block(block)
    assert len(_state.COMPILED_KERNELS) == 2 and _state.COMPILED_KERNELS.stats["compiles"] == 4
    assert len(_state.KERNEL_IMAGES) == 2  # the images kept for the kernel: the same bound
    jax.clear_caches()
    again = _lower_block(128).message.kernel_call.kernel.module_image.object_file
    assert _state.COMPILED_KERNELS.stats["compiles"] == 5
    assert again == first


def test_the_lowered_call_memo_keeps_its_bound_and_encodes_a_forgotten_call_again(monkeypatch,
                                                                                 fresh_caches):
    monkeypatch.setenv(_env.ENV_CALL_CACHE_SIZE, "2")
    first = _lower_block(128).opaque
    for block in (256, 512, 1024):
        _lower_block(block)
    assert len(_state.LOWERED_CALLS) == 2
    jax.clear_caches()
    assert _lower_block(128).opaque == first


@pytest.mark.usefixtures("fresh_caches")
def test_item_locks_do_not_grow_with_the_kernels_lowered():
    _lower_block(128)
    _state.COMPILE_POOL.wait()  # a compile the trace started releases its lock as it ends
    locks = len(_state.LOCKS)
    for block in (256, 512, 1024):
        _lower_block(block)
        lower_for(lambda x, y: kernels.add(x, y, block=block), X, X, platform="rocm")
    _state.COMPILE_POOL.wait()
    assert len(_state.LOCKS) == locks


@pytest.mark.parametrize("value", ["0", "lots", "-3"])
def test_a_cache_size_that_is_not_a_positive_integer_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(_env.ENV_KERNEL_CACHE_SIZE, value)
    with pytest.raises(ValueError, match=rf"JAX_TRITON_ROCM_KERNEL_CACHE_SIZE='{value}' must be "
                                         r"a positive integer"):
        lower_for(lambda x, y: kernels.add(x, y, block=64), X, X, platform="cuda")


def test_a_changed_bound_takes_effect_at_the_next_put(monkeypatch):
    cache = _state.BoundedCache(_env.ENV_CALL_CACHE_SIZE)
    monkeypatch.setenv(_env.ENV_CALL_CACHE_SIZE, "3")
    for key in range(3):
        cache.put(key, key)
    monkeypatch.setenv(_env.ENV_CALL_CACHE_SIZE, "1")
    cache.put(3, 3)
    assert len(cache) == 1 and cache.get(3) == 3
    monkeypatch.setenv(_env.ENV_CALL_CACHE_SIZE, "2")
    cache.put(4, 4)
    assert len(cache) == 2
    monkeypatch.setenv(_env.ENV_CALL_CACHE_SIZE, "two")
    with pytest.raises(ValueError) as expected:
        _env.cache_size(_env.ENV_CALL_CACHE_SIZE)
    for key in (5, 6):  # at each put while the value is bad, as the reader says it
        with pytest.raises(ValueError) as raised:
            cache.put(key, key)
        assert str(raised.value) == str(expected.value)
    assert len(cache) == 2
