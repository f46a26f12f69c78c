"""The per-kernel record (`_state.KERNEL_RECORDS`): one staleness rule for all that is derived
from a kernel object (its roles, references, interpreter twin, trampolines, the kernel taken
apart)."""

from jax_triton_rocm.base import _state
from tests.support import kernels


def _fresh_kernel():
    return kernels.kernel_from_source(
        "@triton.jit\ndef k(x_ptr, BLOCK: tl.constexpr):\n    tl.store(x_ptr, 1.0)\n")


def test_a_derived_value_is_kept_for_the_same_kernel_and_source(fresh_caches):
    kernel, made = _fresh_kernel(), []
    for _ in range(2):
        _state.KERNEL_RECORDS.derived(kernel, "x", lambda: made.append(1) or len(made))
    assert made == [1]


def test_an_edited_source_derives_everything_again(fresh_caches):
    kernel = _fresh_kernel()
    _state.KERNEL_RECORDS.keep(kernel, "a", 1)
    _state.KERNEL_RECORDS.keep(kernel, "b", 2)
    kernel._unsafe_update_src(kernel.src.replace("1.0", "2.0"))
    assert _state.KERNEL_RECORDS.find(kernel, "a") is None
    assert _state.KERNEL_RECORDS.find(kernel, "b") is None


def test_changed_settings_derive_again(fresh_caches):
    kernel = _fresh_kernel()
    _state.KERNEL_RECORDS.keep(kernel, "a", 1)
    kernel.debug = not kernel.debug
    assert _state.KERNEL_RECORDS.find(kernel, "a") is None


def test_another_object_under_a_reused_id_gets_nothing(fresh_caches):
    kernel, other = _fresh_kernel(), _fresh_kernel()
    _state.KERNEL_RECORDS.keep(kernel, "a", 1)
    record = _state.KERNEL_RECORDS.get(id(kernel))
    _state.KERNEL_RECORDS.put(id(other), record)  # as if `other` had kernel's id
    assert _state.KERNEL_RECORDS.find(other, "a") is None


def test_the_five_id_keyed_caches_are_one_record():
    assert not any(hasattr(_state, name) for name in (
        "PARAMETER_ROLES", "GLOBAL_REFERENCES", "INTERPRETED_TWINS", "TRAMPOLINES",
        "UNWRAPPED_KERNELS"))
    assert _state.KERNEL_RECORDS in _state.CACHES

