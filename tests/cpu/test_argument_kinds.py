"""Arguments that do not line up with a kernel's parameters (issue 27): the parameter a call most
likely forgot is named, and a scalar on a parameter the kernel dereferences (or a pointer on one
it counts with) fails at lowering naming both, on every route; the parameters' roles are read
from the kernel's source (`_roles`), and a wrong guess refuses nothing (`_kinds`)."""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl
from jax.extend.core import Primitive
from jax.interpreters import mlir

import jax_triton_rocm as jtr
from jax_triton_rocm.checks import _kinds
from tests.support import idiom_kernels as ik
from tests.support import kernels, surface_kernels
from tests.support.lowering_utils import lower_for, spec

X = spec((64,), jnp.float32)


def _lower_on(route, fn, *args):
    """`fn(*args)` lowered for the CPU (Triton's interpreter), sm_90 or gfx942."""
    if route == "cpu":
        return jax.jit(fn).trace(*args).lower(lowering_platforms=("cpu",))
    return lower_for(fn, *args, platform={"sm_90": "cuda", "gfx942": "rocm"}[route])


# The parameter a call forgot.

@pytest.mark.parametrize("outputs", ["out_shape", "out_type"])
def test_a_forgotten_scalar_is_named_where_outputs_would_have_filled_it(outputs):
    with pytest.raises(TypeError, match=r"add_kernel: 2 non-constexpr parameter\(s\) get no "
                                        r"argument \(n, out_ptr\).*Most likely missing: 'n' \(the "
                                        r"kernel counts with it at kernels.py:\d+: offsets < n\)"):
        lower_for(lambda x, y: jtr.triton_call(x, y, kernel=kernels.add_kernel, grid=1,
                                               BLOCK=64, **{outputs: x}), X, X, platform="cuda")


@triton.jit
def scaled_add_kernel(x_ptr, n, w_ptr, scale, out_ptr, BLOCK: tl.constexpr):
    """out = x + scale * w."""
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + scale * tl.load(w_ptr + offsets, mask=mask), mask=mask)


def test_a_forgotten_pointer_is_named():
    with pytest.raises(TypeError, match=r"Most likely missing: 'w_ptr' \(the kernel dereferences "
                                        r"it at test_argument_kinds.py:\d+: tl.load\(w_ptr"):
        lower_for(lambda x: jtr.triton_call(x, 64, 2.0, kernel=scaled_add_kernel, out_shape=x,
                                            grid=1, BLOCK=64), X, platform="cuda")


def test_one_of_two_like_parameters_is_named_as_either():
    with pytest.raises(TypeError, match=r"Most likely missing: one of 'x_ptr' \(.*\) or "
                                        r"'y_ptr' \(.*\); without either"):
        lower_for(lambda x: jtr.triton_call(x, 64, kernel=kernels.add_kernel, out_shape=x,
                                            grid=1, BLOCK=64), X, platform="cuda")


# Parameters left out, filled by their defaults.

@triton.jit
def _maybe_biased_kernel(x_ptr, out_ptr, bias_ptr=None, BLOCK: tl.constexpr = 64):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    if bias_ptr is not None:
        x += tl.load(bias_ptr + offsets)
    tl.store(out_ptr + offsets, x)


@pytest.mark.parametrize("route,xla_native", [("sm_90", False), ("sm_90", True),
                                              ("gfx942", False), ("cpu", False)])
def test_a_pointer_parameter_defaulting_to_none_may_be_left_out_as_in_triton(route, xla_native):
    def call(x):
        return jtr.triton_call(x, kernel=_maybe_biased_kernel, out_shape=x, grid=(1,),
                               xla_native=xla_native)

    if route == "cpu":
        x = jax.device_put(jnp.arange(64, dtype=jnp.float32), jax.devices("cpu")[0])
        np.testing.assert_array_equal(jax.jit(call)(x), x)  # no bias added
    else:
        [lowered] = jtr.kernel_calls(_lower_on(route, call, X))
        assert (lowered.native is not None) == xla_native


@pytest.mark.parametrize("convention", ["out_shape", "out_type", "operands"])
def test_a_pointer_defaulting_to_none_is_left_to_its_default_in_every_call_form(convention):
    def call(x):
        if convention == "operands":
            return jtr.triton_call(kernel=_maybe_biased_kernel, operands={"x_ptr": x},
                                   out_shape=x, grid=(1,))
        return jtr.triton_call(x, kernel=_maybe_biased_kernel, grid=(1,), **{convention: x})

    x = jax.device_put(jnp.arange(64, dtype=jnp.float32), jax.devices("cpu")[0])
    np.testing.assert_array_equal(jax.jit(call)(x), x)


# A scalar on a pointer parameter, a pointer on a scalar one.

@pytest.mark.parametrize("route", ["cpu", "sm_90", "gfx942"])
@pytest.mark.parametrize("outputs", ["out_shape", "out_type"])
def test_a_positional_port_of_an_output_among_inputs_names_both_parameters(route, outputs):
    call = lambda x, y: jtr.triton_call(x, y, x.size, kernel=ik.middle_out_add_kernel,  # noqa
                                        grid=1, BLOCK=64, **{outputs: x})
    with pytest.raises(TypeError) as caught:
        _lower_on(route, call, X, X)
    message = str(caught.value)
    assert "middle_out_add_kernel: the call's arguments do not line up" in message
    assert "parameter 'out_ptr' gets the scalar 64 (i32), but the kernel dereferences it" in message
    assert "parameter 'n' gets output 0 (float32[64]), a pointer, but the kernel counts" in message
    causes, cause = [], caught.value.__cause__
    while cause is not None:
        causes.append(str(cause))
        cause = cause.__cause__
    assert any("invalid operands" in text for text in causes)  # Triton's own words, chained


@pytest.mark.parametrize("route, xla_native", [("sm_90", None), ("sm_90", False),
                                               ("gfx942", None)])
def test_the_gpu_routes_refuse_it_at_each_lowering(route, xla_native):
    """The GPU routes ask where the kernel fails to compile; the kernel cache then remembers the
    failure, and the next lowering is refused the same way."""
    call = lambda x, y: jtr.triton_call(x, y, x.size, kernel=ik.middle_out_add_kernel,  # noqa
                                        grid=1, BLOCK=64, out_shape=x, xla_native=xla_native)
    for _ in range(2):
        with pytest.raises(TypeError, match="middle_out_add_kernel: the call's arguments do not "
                                            "line up with its parameters: parameter 'out_ptr'"):
            _lower_on(route, call, X, X)


def test_the_same_kernel_called_right_runs():
    x = jax.device_put(jnp.arange(64.0), jax.devices("cpu")[0])
    out = jax.jit(lambda x: jtr.triton_call(x, x, kernel=ik.middle_out_add_kernel, out_type=x,
                                            grid=1, BLOCK=64, n=x.size))(x)
    np.testing.assert_array_equal(out, 2 * x)


@triton.jit
def offset_first_kernel(offset, x_ptr, out_ptr, BLOCK: tl.constexpr):
    """out = x[offset:offset + BLOCK], with the offset written before the pointer it moves."""
    tl.store(out_ptr + tl.arange(0, BLOCK), tl.load(offset + x_ptr + tl.arange(0, BLOCK)))


def test_a_wrong_guess_of_a_role_refuses_nothing():
    assert _kinds.roles(offset_first_kernel).of("offset") == "pointer"  # the guess is wrong
    x = jax.device_put(jnp.arange(64.0), jax.devices("cpu")[0])
    out = jax.jit(lambda x: jtr.triton_call(3, x, kernel=offset_first_kernel, grid=1, BLOCK=8,
                                            out_type=jax.ShapeDtypeStruct((8,), x.dtype)))(x)
    np.testing.assert_array_equal(out, x[3:11])


def test_a_library_rule_names_the_scalar_it_left_out_of_constexprs():
    def rule(ctx, x):
        return jtr.triton_call_lowering(ctx, kernels.add_kernel, x, grid=1,
                                        constexprs={"BLOCK": 64})

    prim = Primitive("forgot_n")
    prim.def_abstract_eval(lambda x: x)
    mlir.register_lowering(prim, rule, platform="cuda")
    with pytest.raises(TypeError, match=r"name the extra scalars in constexprs \(most likely "
                                        r"'n' \(the kernel counts with it at kernels.py"):
        lower_for(prim.bind, X, platform="cuda")


# Roles, as read from the source.

def test_roles_follow_local_names_and_called_functions():
    found = _kinds.roles(surface_kernels.out_first_kernel)  # loads through a @triton.jit helper
    assert [found.of(name) for name in ("x_ptr", "out_ptr", "y_ptr", "n", "BLOCK")] == [
        "pointer", "pointer", "pointer", "scalar", "scalar"]
    matmul = _kinds.roles(kernels.matmul_kernel)
    assert [matmul.of(name) for name in ("a_ptr", "b_ptr", "c_ptr", "M", "N", "K")] == [
        "pointer"] * 3 + ["scalar"] * 3


@triton.jit
def annotated_kernel(x_ptr, scale, count: tl.int32, unused, out_ptr):
    tl.store(out_ptr, tl.load(x_ptr) * scale)


def test_roles_take_annotations_and_leave_unused_parameters_unknown():
    found = _kinds.roles(annotated_kernel)
    assert [found.of(name) for name in ("scale", "count", "unused")] == ["scalar", "scalar", None]
    assert re.fullmatch(r"the kernel counts with it at test_argument_kinds.py:\d+: count: i32",
                        found.shown("count"))


def test_a_tuple_parameter_has_no_role_but_its_pointers_do_not_confuse_others():
    found = _kinds.roles(surface_kernels.tuple_kernel)
    assert [found.of(name) for name in ("scale", "xy", "n", "bias", "out_ptr")] == [
        "scalar", None, "scalar", "pointer", "pointer"]
