"""`Ref` operands on every route (`every_route`), collected by tests/cpu/test_refs.py (on
Triton's interpreter) and tests/gpu/test_refs_gpu.py (on the GPU routes).
"""

import jax
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support.surface_kernels import (accumulate_kernel, inc_kernel, pair_kernel,
                                           tuned_pair_inc_kernel)
from tests.support.routes import every_route

# The tests, which a file of tests/cpu and one of tests/gpu import (`import *`).
__all__ = [
    "test_a_ref_is_updated_in_place",
    "test_a_ref_beside_an_allocated_output",
    "test_a_ref_in_a_tuple",
    "test_refs_of_an_autotuned_kernel_are_updated_once",
    "test_refs_under_vmap_as_arguments_and_made_inside",
    "test_the_same_ref_twice_is_one_buffer_as_in_triton",
]


def increment(ref):
    n = ref.shape[0]
    return jtr.triton_call(n, ref, kernel=inc_kernel, out_type=(),
                           grid=(triton.cdiv(n, 256),), BLOCK=256)


@every_route
@pytest.mark.parametrize("jit", [False, True])
def test_a_ref_is_updated_in_place(route, jit):
    x = route.rand(0, (1000,))
    ref = jax.new_ref(x)
    assert (jax.jit(increment) if jit else increment)(ref) == ()
    np.testing.assert_array_equal(ref[...], x + 1)


@every_route
def test_a_ref_beside_an_allocated_output(route):
    x, acc = route.rand(1, (1000,)), route.rand(2, (1000,))
    acc_ref = jax.new_ref(acc)
    out = jax.jit(lambda x, r: jtr.triton_call(x, r, x.size, kernel=accumulate_kernel,
                                               out_type=x, grid=(4,), BLOCK=256))(x, acc_ref)
    np.testing.assert_array_equal(out, x + acc)
    np.testing.assert_array_equal(acc_ref[...], acc + x)


@every_route
def test_a_ref_in_a_tuple(route):
    route.expect("jaxlib" if route.name == "xla" else route.name)
    x, acc, bias = route.rand(3, (1000,)), route.rand(4, (1000,)), route.rand(5, (1000,))
    acc_ref = jax.new_ref(acc)
    out = jtr.triton_call(x, (acc_ref, bias), x.size, kernel=pair_kernel, out_type=x,
                          grid=(4,), BLOCK=256)
    np.testing.assert_allclose(out, x + acc + bias, rtol=1e-6)
    np.testing.assert_array_equal(acc_ref[...], acc + x)


@every_route
def test_refs_of_an_autotuned_kernel_are_updated_once(route):
    # jaxlib times every config on the buffers, restoring the aliased ones between trials.
    route.expect("jaxlib" if route.name == "xla" else route.name)
    a, b = route.rand(6, (1000,)), route.rand(7, (1000,))
    a_ref, b_ref = jax.new_ref(a), jax.new_ref(b)
    jax.jit(lambda p, q: jtr.triton_call(
        (p, q), 1000, kernel=tuned_pair_inc_kernel, out_type=(),
        grid=lambda meta: (triton.cdiv(1000, meta["BLOCK"]),)))(a_ref, b_ref)
    np.testing.assert_array_equal(a_ref[...], a + 1)
    np.testing.assert_array_equal(b_ref[...], b + 2)


@every_route
def test_refs_under_vmap_as_arguments_and_made_inside(route):
    xs = route.rand(8, (3, 1000))

    def made_inside(x):
        ref = jax.new_ref(x)
        increment(ref)
        return ref[...]

    np.testing.assert_array_equal(jax.vmap(made_inside)(xs), xs + 1)
    refs = jax.new_ref(xs)
    jax.vmap(increment)(refs)
    np.testing.assert_array_equal(refs[...], xs + 1)


@triton.jit
def _through_two_pointers_kernel(x_ptr, a_ptr, b_ptr, n, before_ptr, BLOCK: tl.constexpr):
    """before = x; a += 1 through a_ptr; then b *= 2 through b_ptr. Given one buffer for a and
    b, it ends (a + 1) * 2, as Triton's launcher gives the same tensor twice."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(before_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)
    tl.store(a_ptr + offsets, tl.load(a_ptr + offsets, mask=mask) + 1, mask=mask)
    tl.store(b_ptr + offsets, tl.load(b_ptr + offsets, mask=mask) * 2, mask=mask)


def _through_one_ref_twice(x, acc):
    ref = jax.new_ref(acc)
    before = jtr.triton_call(x, ref, ref, x.size, kernel=_through_two_pointers_kernel,
                             out_type=x, grid=(triton.cdiv(x.size, 256),), BLOCK=256)
    return before, ref[...]


@every_route
def test_the_same_ref_twice_is_one_buffer_as_in_triton(route):
    x, acc = route.rand(9, (1000,)), route.rand(10, (1000,))
    before, after = jax.jit(_through_one_ref_twice)(x, acc)
    np.testing.assert_array_equal(before, x)
    np.testing.assert_array_equal(after, (acc + 1) * 2)
