"""The per-kernel record (`_state.KERNEL_RECORDS`), kept on the kernel object: one staleness rule
for all that is derived from a kernel object (its roles, references, interpreter twin,
trampolines, the kernel taken apart, its lowered calls, plans and layouts), nothing kept alive
by it, and `clear_caches()` emptying it."""

import copy
import gc
import weakref

import jax
import jax.numpy as jnp

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state
from tests.support import kernels
from tests.support.lowering_utils import lower_for, spec

# JAX's backends started here: a plugin's failure to start, logged with its traceback, would
# otherwise keep the frames of the first lowering (and the kernel in them) in the captured log.
jax.devices()
SOURCE = ("@triton.jit\ndef k(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):\n"
          "    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
          "    tl.store(out_ptr + i, tl.load(x_ptr + i) + tl.load(y_ptr + i))\n")


def _fresh_kernel():
    return kernels.kernel_from_source(SOURCE)


def test_a_derived_value_is_kept_for_the_same_kernel_and_source(fresh_caches):
    kernel, made = _fresh_kernel(), []
    for _ in range(2):
        _state.KERNEL_RECORDS.derived(kernel, "x", lambda: made.append(1) or len(made))
    assert made == [1]


def test_the_record_is_kept_on_the_kernel_object(fresh_caches):
    kernel = _fresh_kernel()
    _state.KERNEL_RECORDS.record(kernel)["a"] = 1
    assert getattr(kernel, _state.RECORD_ATTRIBUTE).values == {"a": 1}


def test_an_edited_source_derives_everything_again(fresh_caches):
    kernel = _fresh_kernel()
    _state.KERNEL_RECORDS.record(kernel)["a"] = 1
    _state.KERNEL_RECORDS.record(kernel)["b"] = 2
    kernel._unsafe_update_src(kernel.src.replace("+ tl.load(y_ptr", "- tl.load(y_ptr"))
    assert _state.KERNEL_RECORDS.record(kernel) == {}


def test_changed_settings_derive_again(fresh_caches):
    kernel = _fresh_kernel()
    _state.KERNEL_RECORDS.record(kernel)["a"] = 1
    kernel.debug = not kernel.debug
    assert _state.KERNEL_RECORDS.record(kernel).get("a") is None


def test_a_copy_carrying_the_record_gets_nothing_of_it(fresh_caches):
    kernel = _fresh_kernel()
    _state.KERNEL_RECORDS.record(kernel)["a"] = 1
    other = copy.copy(kernel)  # the attribute comes along, with the original's id in it
    assert _state.KERNEL_RECORDS.record(other).get("a") is None
    assert _state.KERNEL_RECORDS.record(kernel).get("a") == 1


def test_an_object_that_takes_no_attribute_derives_each_time(fresh_caches):
    kernel, made = object(), []
    for _ in range(2):
        _state.KERNEL_RECORDS.derived(kernel, "x", lambda: made.append(1) or len(made))
    assert made == [1, 1]


def _lower_everywhere(kernel) -> None:
    def add(x, y, **kwargs):
        return jtr.triton_call(x, y, x.size, kernel=kernel, out_shape=x, grid=(16,), BLOCK=256,
                               **kwargs)

    x = spec((4096,), jnp.float32)
    lower_for(add, x, x, platform="cuda")
    lower_for(add, x, x, platform="rocm")
    lower_for(lambda a, b: add(a, b, xla_native=True), x, x, platform="cuda")


def test_a_dropped_kernel_is_freed_with_what_was_derived_from_it(fresh_caches):
    kernel = _fresh_kernel()
    _lower_everywhere(kernel)
    assert len(_state.LOWERED_CALLS) == 3 and len(_state.PLANS) == 3
    assert len(_state.CALL_LAYOUTS) >= 1
    records = len(_state.KERNEL_RECORDS)  # the kernel's, its trampolines', ...
    dropped = weakref.ref(kernel)
    del kernel
    # Triton keeps the last @jit function of each name (`_triton_jit_function_registry`), and
    # JAX its traces: a newer kernel of the name, and JAX's caches emptied, leave the package's.
    newest = _fresh_kernel()
    jax.clear_caches()
    gc.collect()
    assert dropped() is None
    assert len(_state.LOWERED_CALLS) == 0 and len(_state.PLANS) == 0
    assert len(_state.KERNEL_RECORDS) < records
    del newest


def test_clear_caches_empties_every_record():
    kernel = _fresh_kernel()
    _lower_everywhere(kernel)
    _state.KERNEL_RECORDS.record(kernel)["a"] = 1
    assert len(_state.LOWERED_CALLS) >= 3 and len(_state.CALL_LAYOUTS) >= 1
    jtr.clear_caches()
    assert getattr(kernel, _state.RECORD_ATTRIBUTE).values == {}
    assert len(_state.LOWERED_CALLS) == len(_state.PLANS) == len(_state.CALL_LAYOUTS) == 0
    assert _state.KERNEL_RECORDS.record(kernel).get("a") is None


def test_the_five_id_keyed_caches_are_one_record():
    assert not any(hasattr(_state, name) for name in (
        "PARAMETER_ROLES", "GLOBAL_REFERENCES", "INTERPRETED_TWINS", "TRAMPOLINES",
        "UNWRAPPED_KERNELS"))
    assert _state.KERNEL_RECORDS in _state.CACHES
