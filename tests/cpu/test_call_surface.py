"""jax-triton 0.4's call surface beside 0.3's, checked on the call's spec and on Triton's
interpreter (CPU): `out_type` or `out_shape`, keyword and tuple operands, where the outputs'
pointers go, the two conventions of `input_output_aliases`, and the errors where a call fits
neither (docs/porting.md)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support.kernels import add_kernel
from tests.support.lowering_utils import lower_for
from tests.support.surface_kernels import (constexpr_first_kernel, inc_kernel, out_first_kernel,
                                           store_scalar_kernel, tuple_kernel,
                                           update_and_double_kernel)

CPU = jax.devices("cpu")[0]  # the interpreter runs here, on a GPU machine too
X = jax.device_put(jnp.arange(8, dtype=jnp.float32), CPU)
Y = jax.device_put(jnp.full(8, 10.0, jnp.float32), CPU)


def call_eqn(fn, *args):
    """The one `triton_kernel_p` equation of `fn`'s jaxpr."""
    [eqn] = [e for e in jax.make_jaxpr(fn)(*args).eqns if e.primitive is jtr.triton_kernel_p]
    return eqn


def add(x, y, **kwargs):
    return jtr.triton_call(x, y, x.size, kernel=add_kernel, grid=1, BLOCK=8, **kwargs)


def test_out_type_and_out_shape_give_the_same_call():
    by_shape = call_eqn(lambda x, y: add(x, y, out_shape=x), X, Y).params["spec"]
    by_type = call_eqn(lambda x, y: add(x, y, out_type=jax.typeof(x)), X, Y).params["spec"]
    assert by_shape == by_type
    np.testing.assert_array_equal(add(X, Y, out_type=X), X + Y)


@pytest.mark.parametrize("given,match", [
    (dict(out_shape=X, out_type=X), "both out_type= .* and out_shape="),
    ({}, "needs the outputs' shapes and dtypes: out_type= .* or out_shape=")])
def test_out_type_and_out_shape_are_one_or_the_other(given, match):
    with pytest.raises(TypeError, match=match):
        add(X, Y, **given)


def test_a_keyword_pointer_is_an_operand_and_a_keyword_scalar_stays_static():
    eqn = call_eqn(lambda x, y: jtr.triton_call(x, y_ptr=y, n=x.size, kernel=add_kernel,
                                                out_type=x, grid=1, BLOCK=8), X, Y)
    spec = eqn.params["spec"]
    assert len(eqn.invars) == 2
    assert dict(spec.metaparams) == {"BLOCK": 8}
    assert spec.positional[2] == ("scalar", 8)


def test_with_out_shape_a_keyword_scalar_is_a_constexpr_and_a_keyword_array_an_operand():
    eqn = call_eqn(lambda x, y: jtr.triton_call(x, y_ptr=y, n=x.size, kernel=add_kernel,
                                                out_shape=x, grid=1, BLOCK=8), X, Y)
    assert len(eqn.invars) == 2
    assert dict(eqn.params["spec"].metaparams) == {"BLOCK": 8, "n": 8}


def test_keyword_operands_out_of_order_take_their_parameters():
    out = jtr.triton_call(X, n=X.size, y_ptr=Y, kernel=add_kernel, out_type=X, grid=1, BLOCK=8)
    np.testing.assert_array_equal(out, X + Y)


def test_a_parameter_given_twice_is_named_in_pythons_words():
    with pytest.raises(TypeError, match="got multiple values for argument 'x_ptr'"):
        jtr.triton_call(X, x_ptr=X, kernel=add_kernel, out_type=X, grid=1, BLOCK=8)


def test_an_output_whose_pointer_precedes_an_operand_takes_its_parameter_unfilled():
    def call(x, y):
        return jtr.triton_call(x, y_ptr=y, n=8, kernel=out_first_kernel, out_type=x, grid=1,
                               BLOCK=8)

    eqn = call_eqn(call, X, Y)
    spec = eqn.params["spec"]
    assert len(eqn.invars) == 2  # x and y: no buffer is made for the output
    assert spec.positional[:3] == (("input", 0), ("output", 0), ("input", 1))
    assert spec.input_output_aliases == ()
    np.testing.assert_array_equal(jax.jit(call)(X, Y), X + 2 * Y)


def test_the_0_4_layout_gives_an_aliased_output_no_pointer():
    def call(x):
        return jtr.triton_call(8, x, kernel=inc_kernel, out_type=x, grid=1, BLOCK=8,
                               input_output_aliases={1: 0})

    spec = call_eqn(call, X).params["spec"]
    assert ("output", 0) not in spec.positional and spec.input_output_aliases == ((0, 0),)
    np.testing.assert_array_equal(jax.jit(call)(X), X + 1)


def update_and_double(x, y, **kwargs):
    return jtr.triton_call(x, y, x.size, kernel=update_and_double_kernel, out_type=(x, y),
                           grid=1, BLOCK=8, input_output_aliases={0: 0}, **kwargs)


@pytest.mark.parametrize("zeroed", [(1,), lambda meta: (1,)], ids=["static", "callable"])
def test_results_with_a_pointer_come_first_and_zeroed_outputs_follow_them(zeroed):
    spec = call_eqn(lambda x, y: update_and_double(x, y, zeroed_outputs=zeroed),
                    X, Y).params["spec"]
    # Output 1 has the pointer; output 0 (aliased, no pointer) comes after it in the primitive.
    assert spec.positional[3] == ("output", 0) and spec.input_output_aliases == ((0, 1),)
    assert (spec.zeroed_outputs({}) if callable(zeroed) else spec.zeroed_outputs) == (0,)
    updated, doubled = jax.jit(update_and_double)(X, Y)
    np.testing.assert_array_equal(updated, X + Y)
    np.testing.assert_array_equal(doubled, 2 * Y)


def test_zeroing_an_output_without_a_pointer_zeroes_its_inputs_buffer():
    [call] = jtr.kernel_calls(lower_for(lambda x: jtr.triton_call(
        8, x, kernel=inc_kernel, out_type=x, grid=1, BLOCK=8, input_output_aliases={1: 0},
        zeroed_outputs=(0,)), X, platform="cuda"))
    assert call.message.kernel_call.parameters[1].array.bytes_to_zero == X.nbytes


def test_the_0_3_layout_gives_an_aliased_output_its_own_pointer():
    spec = call_eqn(lambda x, y: add(x, y, out_shape=x, input_output_aliases={0: 0}),
                    X, Y).params["spec"]
    # The first form of the layout: the output's pointer follows the positional arguments.
    assert spec.positional == (("array", 0), ("array", 1), ("scalar", 8))
    assert spec.input_output_aliases == ((0, 0),)
    np.testing.assert_array_equal(add(X, Y, out_shape=X, input_output_aliases={0: 0}), X + Y)


def test_outputs_that_fit_neither_layout_are_an_error_listing_the_parameters():
    with pytest.raises(TypeError, match=r"2 non-constexpr parameter\(s\) get no argument "
                                        r"\(n, out_ptr\), for 3 output\(s\), 3 of them not "
                                        r"aliased.*\(x_ptr, y_ptr, n"):
        jtr.triton_call(X, Y, kernel=add_kernel, out_type=(X, X, X), grid=1, BLOCK=8)


def test_alias_indices_count_operand_leaves_with_out_type_and_arrays_with_out_shape():
    by_type = jtr.triton_call(8, X, kernel=inc_kernel, out_type=X, grid=1, BLOCK=8,
                              input_output_aliases={1: 0})
    by_shape = jtr.triton_call(8, X, kernel=inc_kernel, out_shape=X, grid=1, BLOCK=8,
                               input_output_aliases={0: 0})
    np.testing.assert_array_equal(by_type, X + 1)
    np.testing.assert_array_equal(by_shape, X + 1)


@pytest.mark.parametrize("out,aliases,match", [
    ("out_type", {0: 0}, r"input index 0 is argument 0, a scalar \(with out_type= .*every "
                         r"operand leaf.*; indices count arrays only"),
    ("out_shape", {1: 0}, r"input index 1 is not one of the 1 array arguments \(0\.\.0\) "
                          r"\(indices count arrays only.*; with out_type= .*scalars included")])
def test_an_alias_index_that_is_no_array_states_both_conventions(out, aliases, match):
    with pytest.raises(ValueError, match=match):
        jtr.triton_call(8, X, kernel=inc_kernel, grid=1, BLOCK=8,
                        input_output_aliases=aliases, **{out: X})


def test_nested_tuple_operands_with_mixed_dtypes_a_scalar_before_them_and_none():
    xh = X.astype(jnp.float16)

    def call(xh, y, bias=None):
        return jtr.triton_call(3.0, ((xh, 1), y), 8, bias, kernel=tuple_kernel, out_type=y,
                               grid=1, BLOCK=8)

    eqn = call_eqn(call, xh, Y)
    assert eqn.params["spec"].positional[1] == (
        "tuple", (("tuple", (("input", 0), ("scalar", 1))), ("input", 1)))
    np.testing.assert_array_equal(jax.jit(call)(xh, Y), 3.0 * (X + Y))
    np.testing.assert_array_equal(jax.jit(call)(xh, Y, Y), 3.0 * (X + Y) + Y)


def test_a_tuple_is_typed_and_specialised_as_tritons_launcher_does():
    from triton.backends.compiler import BaseBackend
    from jax_triton_rocm.kernel import _layout

    spec = call_eqn(lambda xh, y: jtr.triton_call(3.0, ((xh, 1), y), 8, None,
                                                  kernel=tuple_kernel, out_type=y, grid=1,
                                                  BLOCK=8), X.astype(jnp.float16), Y).params["spec"]
    bound = _layout.lay_out_arguments(
        tuple_kernel, BaseBackend, positional=spec.positional,
        in_avals=(jax.ShapeDtypeStruct((8,), jnp.float16), Y), out_avals=(Y,),
        constexprs=dict(spec.metaparams))
    assert bound.signature["xy"] == (("*fp16", "constexpr"), "*fp32")
    assert bound.constexprs[(1, 0, 1)] == 1 and bound.constexprs[(3,)] is None
    assert [(s.position, s.path) for s in bound.sources][:3] == [(0, ()), (1, (0, 0)), (1, (1,))]


def test_a_positional_constexpr_is_no_operand_leaf():
    # With out_type, alias indices count operand leaves: x (0), y (1), n (2); BLOCK is none.
    out = jtr.triton_call(X, 8, Y, X.size, kernel=constexpr_first_kernel, out_type=X, grid=1,
                          input_output_aliases={1: 0})
    np.testing.assert_array_equal(out, X + Y)


def test_a_dict_operand_is_refused_naming_the_parameter():
    with pytest.raises(TypeError, match=r"argument 1\[1\] has type dict"):
        jtr.triton_call(3.0, (X, {"y": Y}), 8, None, kernel=tuple_kernel, out_type=Y, grid=1,
                        BLOCK=8)


def test_a_list_operand_is_refused_saying_tuple_or_array():
    with pytest.raises(TypeError, match=r"argument 1 is a list \(8 elements\).*tuple\(\.\.\.\) "
                                        r"or jnp.asarray"):
        jtr.triton_call(X, [1.0] * 8, 8, kernel=add_kernel, out_type=X, grid=1, BLOCK=8)


def test_an_array_for_a_constexpr_parameter_by_keyword_is_refused():
    with pytest.raises(TypeError, match="parameter 'BLOCK' is a tl.constexpr, but keyword "
                                        "argument BLOCK= holds an array"):
        jtr.triton_call(X, Y, 8, kernel=add_kernel, out_type=X, grid=1, BLOCK=X)


@pytest.mark.parametrize("value,triton_type", [(42.0, "fp32"), (1e-30, "fp32"),
                                               (float("inf"), "fp32"), (0.0, "fp32"),
                                               (1e300, "fp64"), (1e-40, "fp64")])
def test_a_float_is_fp32_where_float32_holds_it_else_fp64(value, triton_type):
    from jax_triton_rocm.kernel import _spec

    assert _spec.scalar(value, what="x").triton_type == triton_type


def test_a_float_beyond_float32_reaches_the_kernel_whole():
    with jax.enable_x64(True), jax.default_device(CPU):
        out = jtr.triton_call(1e300, kernel=store_scalar_kernel,
                              out_type=jax.ShapeDtypeStruct((1,), jnp.float64), grid=1)
        assert float(out[0]) == 1e300


def _tuple_call(scale):
    return lambda xh, y: jtr.triton_call(3.0, ((xh, scale), y), y.size, None,
                                         kernel=tuple_kernel, out_type=y, grid=1, BLOCK=8)


def test_a_tuples_scalars_count_by_type_and_value_in_the_spec_and_plan():
    from jax_triton_rocm.routes import _lowering

    xh = X.astype(jnp.float16)
    specs = [call_eqn(_tuple_call(scale), xh, Y).params["spec"] for scale in (2, 2.0)]
    assert specs[0] != specs[1]
    keys = [_lowering.plan_key(spec, (xh, Y), (Y,)) for spec in specs]
    assert keys[0] != keys[1]
    with_options = call_eqn(lambda x, y: jtr.triton_call(
        3.0, ((x, 2), y), y.size, None, kernel=tuple_kernel, out_type=y, grid=1, BLOCK=8,
        backend_options={"max_num_imprecise_acc_default": 8}), xh, Y).params["spec"]
    assert _lowering.plan_key(with_options, (xh, Y), (Y,)) != keys[0]


def test_a_plan_with_tuple_scalars_serves_another_shape():
    def lower(n):
        xh, y = jnp.zeros(n, jnp.float16), jnp.zeros(n, jnp.float32)
        [call] = jtr.kernel_calls(lower_for(_tuple_call(2), xh, y, platform="cuda"))
        return [p.WhichOneof("value") for p in call.message.kernel_call.parameters]

    # The runtime scalar n differs; the tuple's pointers and its 2 (an i32) are the same.
    assert lower(8) == lower(24) == ["f32", "array", "i32", "array", "i32", "array"]


def test_an_fp8_dtype_the_target_does_not_take_is_named_inside_a_tuple_too():
    fnuz = jax.ShapeDtypeStruct((8,), jnp.float8_e4m3fnuz)  # not an sm_90 dtype
    with pytest.raises(
            TypeError, match=r"parameter xy is float8_e4m3fnuz \(Triton's fp8e4b8\), which Triton "
                             r"does not compile for sm_90"):
        lower_for(_tuple_call(1), fnuz, Y, platform="cuda")


@triton.jit
def _no_parameter_kernel():
    tl.device_print("a kernel with no parameters ran", tl.program_id(0))


@pytest.mark.parametrize("outputs", ["out_type", "out_shape"])
def test_a_kernel_with_no_parameters_runs_under_jit_as_triton_launches_it(outputs, capfd):
    assert jax.jit(lambda: jtr.triton_call(kernel=_no_parameter_kernel, grid=(1,),
                                           **{outputs: ()}))() == ()
    jax.effects_barrier()
    assert "a kernel with no parameters ran" in capfd.readouterr().out


def test_a_kernel_with_no_parameters_is_kept_in_a_gpu_lowering():
    lowered = lower_for(lambda: jtr.triton_call(kernel=_no_parameter_kernel, out_type=(),
                                                grid=(1,)), platform="cuda")
    assert len(jtr.kernel_calls(lowered)) == 1
    assert "has_side_effect = true" in lowered.as_text()
