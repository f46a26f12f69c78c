"""`Ref` operands (`jax.new_ref`, jax-triton 0.4's in-place buffers) on every route: jaxlib's
Triton call and XLA's on a GPU (marked `gpu`), Triton's interpreter on the CPU. A Ref is read
before the call and written back after it, so the routes see plain aliasing; `jax.vmap` and
`jax.grad` behave as JAX allows.

This file holds the tests that need no GPU and start no Python process; the others are in
tests/support/every_route/refs.py.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from tests.support.every_route.refs import _through_one_ref_twice, increment
from tests.support.every_route.refs import *  # noqa: F403  (its tests)
from tests.support.lowering_utils import lower_for, spec
from tests.support.surface_kernels import inc_kernel, pair_kernel


def test_a_ref_closed_over_by_vmap_gets_jaxs_own_error():
    outside = jax.new_ref(jnp.zeros(8))
    with pytest.raises(Exception, match="Move the array reference to be an argument"):
        jax.vmap(lambda x: (increment(outside), x)[1])(jnp.zeros((2, 8)))


def test_grad_through_a_ref_call_is_refused_with_the_way_out():
    def f(x):
        ref = jax.new_ref(x)
        increment(ref)
        return ref[...].sum()

    with pytest.raises(NotImplementedError, match="jax.custom_vjp"):
        jax.grad(f)(jnp.zeros(8))


def test_jaxlibs_call_gives_the_same_ref_twice_one_pointer():
    x = spec((1000,), jnp.float32)
    [call] = jtr.kernel_calls(lower_for(_through_one_ref_twice, x, x, platform="cuda"))
    # x, the Ref's one buffer, the result `before`, then n: a trampoline feeds a and b alike.
    assert call.summary()["launches"][0]["parameters"] == ["array", "array", "array", "i32"]


def test_the_same_ref_in_a_tuple_and_outside_runs_on_the_cpu_and_is_refused_by_jaxlibs_call():
    def call(acc, bias):
        ref = jax.new_ref(acc)
        out = jtr.triton_call(ref, (ref, bias), 8, kernel=pair_kernel, out_type=acc, grid=1,
                              BLOCK=8)
        return out, ref[...]

    cpu = jax.devices("cpu")[0]
    acc, bias = jax.device_put(jnp.arange(8.0), cpu), jax.device_put(jnp.ones(8), cpu)
    out, after = jax.jit(call)(acc, bias)
    np.testing.assert_array_equal(out, acc + acc + bias)  # x and acc: one buffer
    np.testing.assert_array_equal(after, acc + acc)
    x = spec((8,), jnp.float32)
    with pytest.raises(NotImplementedError, match=r"one Ref in two places, one of them inside a "
                                                  r"tuple.*'x_ptr' and 'acc_and_bias'.*Pass the "
                                                  r"Ref once"):
        lower_for(call, x, x, platform="cuda")


def test_refs_and_input_output_aliases_are_refused_together():
    with pytest.raises(ValueError, match="cannot be combined with Ref operands"):
        jtr.triton_call(8, jax.new_ref(jnp.zeros(8)), kernel=inc_kernel, out_type=(), grid=1,
                        BLOCK=8, input_output_aliases={1: 0})


def test_the_primitive_sees_plain_aliasing():
    def f(x):
        ref = jax.new_ref(x)
        increment(ref)
        return ref[...]

    [eqn] = [e for e in jax.make_jaxpr(f)(jnp.zeros(8)).eqns
             if e.primitive is jtr.triton_kernel_p]
    spec = eqn.params["spec"]
    assert len(eqn.outvars) == 1 and spec.input_output_aliases == ((0, 0),)
    assert spec.positional == (("scalar", 8), ("input", 0), ("keyword", None))


def test_a_view_of_a_ref_is_updated_in_place():
    ref = jax.new_ref(jnp.zeros(16))
    try:
        view = ref.at[4:12]
    except NotImplementedError:
        pytest.skip("this jax has no views of a Ref (ref.at[...]), which jax 0.12 adds")
    increment(view)
    np.testing.assert_array_equal(ref[...], jnp.zeros(16).at[4:12].add(1))
