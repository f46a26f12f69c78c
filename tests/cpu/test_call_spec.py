"""One call spec, checked by one checker for `triton_call` and `triton_call_lowering` alike.

Each behaviour runs through both APIs: the same value gets the same verdict, and the messages
are worded for the API that was called.
"""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.kernel._spec import KernelCallSpec
from tests.support import kernels
from tests.support.lowering_utils import lower_for
from tests.support.two_apis import APIS, X, lower_through


@pytest.mark.parametrize("api", APIS)
def test_a_bool_is_not_an_alias_index(api):
    # True == 1 would alias the second operand.
    with pytest.raises(ValueError, match=r"input_output_aliases=\{True: 0\}: input index True"):
        lower_through(api, input_output_aliases={True: 0})


@pytest.mark.parametrize("api", APIS)
def test_numpy_integers_are_alias_indices(api):
    text = lower_through(api, input_output_aliases={np.int64(1): np.int32(0)}).as_text()
    assert "output_operand_alias" in text and "operand_index = 1" in text


@pytest.mark.parametrize("api", APIS)
def test_numpy_integers_are_zeroed_output_indices(api):
    (call,) = jtr.kernel_calls(lower_through(api, zeroed_outputs=(np.int64(0),)))
    params = call.message.kernel_call.parameters
    assert params[-1].array.bytes_to_zero == 1024 * 4


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("option,value,error,match", [
    ("debug", "yes", TypeError, r"debug='yes' must be a bool"),
    ("enable_fp_fusion", "no", TypeError, r"enable_fp_fusion='no' must be a bool"),
    ("name", 5, TypeError, r"name=5 must be a str"),
    ("maxnreg", -5, ValueError, r"maxnreg=-5 must be .*255"),
    ("num_warps", 3, ValueError, r"num_warps=3 must be a power of two"),
    ("zeroed_outputs", (3,), ValueError, r"zeroed_outputs=\(3,\): 3 is not an? \w+ index"),
])
def test_both_apis_refuse_the_same_value(api, option, value, error, match):
    with pytest.raises(error, match=match):
        lower_through(api, **{option: value})


@pytest.mark.parametrize("api,match", [
    ("triton_call", r"^input_output_aliases=\{5: 0\}: input index 5 is not one of the 2 array "
                    r"arguments \(0\.\.1\) \(indices count arrays only"),
    ("triton_call_lowering", r"^triton_call_lowering: input_output_aliases=\{5: 0\}: input "
                             r"index 5 is not one of the primitive's 2 operands \(0\.\.1\)\.$"),
])
def test_messages_are_worded_for_the_api_called(api, match):
    with pytest.raises(ValueError, match=match):
        lower_through(api, input_output_aliases={5: 0})


def test_the_primitive_carries_one_frozen_spec():
    x = jnp.ones(1024, jnp.float32)
    jaxprs = [jax.make_jaxpr(lambda x: kernels.add(x, x, block=256))(x) for _ in range(2)]
    (first,), (second,) = ([e for e in j.eqns if e.primitive is jtr.triton_kernel_p]
                           for j in jaxprs)
    assert set(first.params) == {"spec"}
    call = first.params["spec"]
    assert isinstance(call, KernelCallSpec)
    assert call == second.params["spec"] and hash(call) == hash(second.params["spec"])
    assert call.grid == (4, 1, 1) and call.name == "add_kernel" and call.num_ctas is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        call.grid = (8, 1, 1)


def test_a_grid_given_as_a_list_is_checked_once_into_a_tuple():
    (call,) = jtr.kernel_calls(lower_for(
        lambda x, y: jtr.triton_call(x, y, x.size, kernel=kernels.add_kernel, out_shape=x,
                                     grid=[4], BLOCK=256), X, X, platform="cuda"))
    assert call.summary()["launches"][0]["grid"] == (4, 1, 1)


def test_a_spec_hashes_its_kernel_by_identity_without_parsing_its_source(monkeypatch):
    # Hashing a Triton kernel parses its source: slow, and not safe across threads on 3.11.
    call = jax.make_jaxpr(lambda x: kernels.add(x, x))(jnp.ones(64)).eqns[0].params["spec"]

    def parse_refused(self):
        raise AssertionError("the kernel's source was parsed")

    monkeypatch.setattr(type(call.kernel), "__hash__", parse_refused)
    assert hash(call) == hash(dataclasses.replace(call))
    assert call == dataclasses.replace(call)
    other = dataclasses.replace(call, kernel=kernels.elementwise_kernel("x + y"))
    assert call != other
