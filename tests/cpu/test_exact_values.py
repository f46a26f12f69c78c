"""Values that Python calls equal but that compile or pass differently: 2 and 2.0, True and 1,
0.0 and -0.0. The memos keyed on a call's values (the lowered call, a plain kernel's plan, the
call-time argument check, the spec JAX keys its caches on) keep each apart."""

import math
import struct

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state
from jax_triton_rocm.kernel import _spec
from tests.support.lowering_utils import capture_one, spec

X = spec((1024,), jnp.float32)


pytestmark = pytest.mark.usefixtures("fresh_caches")


@triton.jit
def scale_kernel(x_ptr, out_ptr, S: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * S)


@triton.jit
def positional_scale_kernel(x_ptr, S: tl.constexpr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * S)


@triton.jit
def shift_kernel(x_ptr, shift, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + shift, mask=mask)


def _by_keyword(value):
    return capture_one(lambda x: jtr.triton_call(
        x, kernel=scale_kernel, out_shape=x, grid=(4,), S=value, BLOCK=256, xla_native=False),
        X, platform="cuda")


def _by_position(value, length=1024):
    return capture_one(lambda x: jtr.triton_call(
        x, value, kernel=positional_scale_kernel, out_shape=x, grid=(4,), BLOCK=256,
        xla_native=False), spec((length,), jnp.float32), platform="cuda")


@pytest.mark.parametrize("first,second", [(2, 2.0), (True, 1), (0.0, -0.0)],
                         ids=["int and float", "bool and int", "zero and negative zero"])
def test_metaparameters_equal_in_python_compile_apart(first, second):
    kernels = [_by_keyword(value).kernels[0] for value in (first, second)]
    assert _state.COMPILED_KERNELS.stats["compiles"] == 2
    assert kernels[0].key != kernels[1].key


@pytest.mark.parametrize("first,second", [(2.0, 2), (0.0, -0.0)],
                         ids=["float and int", "zero and negative zero"])
def test_positional_constexprs_equal_in_python_compile_apart_at_a_new_shape(first, second):
    # the second call is at a new shape: the plan, not the lowered call, would answer it
    kernels = [_by_position(first).kernels[0], _by_position(second, 2048).kernels[0]]
    assert kernels[0].key != kernels[1].key


def _shift_params(shift):
    lowered = capture_one(lambda x: jtr.triton_call(
        x, shift, x.size, kernel=shift_kernel, out_shape=x, grid=(4,), BLOCK=256), X,
        platform="cuda")
    return lowered.calls[0].params


def test_a_runtime_negative_zero_after_zero_passes_its_sign_bit():
    _shift_params(0.0)
    [_, shift, _, _] = _shift_params(-0.0)
    assert shift.kind == "f32" and math.copysign(1.0, shift.value) == -1.0
    assert struct.pack("<f", shift.value) == b"\x00\x00\x00\x80"


def test_a_runtime_float_after_an_equal_int_is_passed_as_a_float():
    _shift_params(3)
    [_, shift, _, _] = _shift_params(3.0)
    assert shift.kind == "f32" and isinstance(shift.value, float)


def _spec_of(value):
    jaxpr = jax.make_jaxpr(lambda x: jtr.triton_call(
        x, value, x.size, kernel=shift_kernel, out_shape=x, grid=(4,), BLOCK=256))(
        jnp.ones((1024,), jnp.float32))
    return jaxpr.eqns[0].params["spec"]


@pytest.mark.parametrize("first,second", [(2, 2.0), (True, 1), (0.0, -0.0),
                                          (np.float32(1.0), 1.0)])
def test_the_spec_tells_them_apart(first, second):
    a, b = _spec_of(first), _spec_of(second)
    assert a != b and _spec_of(first) == a and hash(_spec_of(first)) == hash(a)


def test_exact_keys_keep_nan_payloads_and_sequences_item_by_item():
    nan, other_nan = struct.unpack("<d", b"\x00" * 6 + b"\xf8\x7f")[0], -math.nan
    assert _spec.exact_key(nan) == _spec.exact_key(nan)
    assert _spec.exact_key(nan) != _spec.exact_key(other_nan)
    assert _spec.exact_key((1, 2.0)) != _spec.exact_key((1, 2))
    assert _spec.exact_key([1]) != _spec.exact_key((1,))
