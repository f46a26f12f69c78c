"""Kernel keys that follow rebound globals, remembered compile failures, and `clear_caches`."""

import threading
import time

import jax.numpy as jnp
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state
from tests.support.lowering_utils import capture_one, run_at_once, spec

X = spec((1024,), jnp.float32)
SCALE = tl.constexpr(1234)
OFFSET = tl.constexpr(4321)


@triton.jit
def scale_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * SCALE)


@triton.jit
def add_offset(x):
    return x + OFFSET


@triton.jit
def offset_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, add_offset(tl.load(x_ptr + offsets)))


def _lowered_ttir(kernel, platform="rocm"):
    def call(x):
        return jtr.triton_call(x, kernel=kernel, out_shape=x, grid=(4,), BLOCK=256)

    return capture_one(call, X, platform=platform).kernels[0]


@pytest.mark.parametrize("kernel,name,new", [
    (scale_kernel, "SCALE", 5678),
    (offset_kernel, "OFFSET", 8765),  # read by a called @triton.jit function
], ids=["used directly", "used by a callee"])
@pytest.mark.parametrize("clear", [False, True], ids=["cached", "after clear_caches"])
def test_rebinding_a_global_constexpr_compiles_a_new_binary(kernel, name, new, clear):
    old = globals()[name]
    before = _lowered_ttir(kernel)
    try:
        globals()[name] = tl.constexpr(new)
        if clear:
            jtr.clear_caches()
        after = _lowered_ttir(kernel)
    finally:
        globals()[name] = old
    # The constant appears in the IR as a float (x is float32): 1234 is "1.234000e+03".
    assert f"{old.value:.6e}" in before.ttir and f"{new:.6e}" not in before.ttir
    assert f"{new:.6e}" in after.ttir, after.ttir
    assert after.key != before.key and after.binary != before.binary
    restored = _lowered_ttir(kernel)
    assert restored.key == before.key


@triton.jit
def broken_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK < 0, "broken_kernel never compiles")
    tl.store(out_ptr, tl.load(x_ptr))


def test_a_failing_kernel_compiles_once_for_16_threads_and_fails_the_same_for_each():
    jtr.clear_caches()
    errors = []

    def lower():
        try:
            _lowered_ttir(broken_kernel, platform="cuda")
        except Exception as err:  # noqa: BLE001  (collected to compare)
            errors.append(err)

    run_at_once([lower] * 16)
    assert len(errors) == 16
    assert len({id(err) for err in errors}) == 1, "every thread must get the remembered error"
    assert "broken_kernel never compiles" in str(errors[0])
    assert _state.COMPILED_KERNELS.stats["failures"] == 1
    with pytest.raises(type(errors[0])):
        _lowered_ttir(broken_kernel, platform="cuda")
    assert _state.COMPILED_KERNELS.stats["failures"] == 1


def test_clear_caches_forgets_a_failure_and_no_per_kernel_lock_outlives_its_compile():
    jtr.clear_caches()
    _state.COMPILE_POOL.wait()
    locks = len(_state.LOCKS)
    with pytest.raises(Exception, match="never compiles"):
        _lowered_ttir(broken_kernel, platform="cuda")
    _state.COMPILE_POOL.wait()  # a compile the trace started ends after the lowering has its error
    assert len(_state.LOCKS) == locks
    jtr.clear_caches()
    with pytest.raises(Exception, match="never compiles"):
        _lowered_ttir(broken_kernel, platform="cuda")
    # Compiled again: the stats were cleared too.
    assert _state.COMPILED_KERNELS.stats["failures"] == 1


def test_a_kept_error_found_after_waiting_for_its_compile_keeps_no_lock_alive():
    # The error a waiting thread finds is the cache's: raising it again must not leave the
    # kernel's lock referenced from the traceback the error keeps.
    kernels, key = _state.COMPILED_KERNELS, "kept-error-after-waiting"
    jtr.clear_caches()  # waits for an earlier test's compiles, which take and drop locks
    locks = len(_state.LOCKS)
    _, held = kernels.claim(key)
    found = []

    def waiter():
        try:
            kernels.claim(key)
        except ValueError as err:
            found.append(err)

    thread = threading.Thread(target=waiter)
    thread.start()
    deadline = time.monotonic() + 10
    while (len(_state.LOCKS) == locks or not held.locked()) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # the waiter is now waiting on the lock
    kernels.finish(key, ValueError("never compiles"))
    held.release()
    del held
    thread.join(10)
    assert found and len(_state.LOCKS) == locks
    jtr.clear_caches()


def test_a_thread_waiting_for_an_item_shares_the_holders_lock_across_clear_caches():
    entered, order = threading.Event(), []
    locks = len(_state.LOCKS)

    def second():
        with _state.LOCKS.item_lock(("kernel", "held-by-a-test")):
            order.append("second")

    with _state.LOCKS.item_lock(("kernel", "held-by-a-test")):
        jtr.clear_caches()
        waiter = threading.Thread(target=lambda: (entered.set(), second()))
        waiter.start()
        entered.wait(10)
        waiter.join(0.5)
        order.append("first")
    waiter.join(10)
    assert order == ["first", "second"]
    assert len(_state.LOCKS) == locks  # the item's lock went with its last user
