"""A string given where a public function wants a sequence or a mapping is refused by name.

Iterating a string takes it apart into characters: `register("cuda")` used to say "'c' is not a
GPU platform". Every public parameter that takes a collection is listed here, with a string.
"""

import itertools

import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from tests.support import kernels
from tests.support import library_kernels as lk
from tests.support.lowering_utils import lower_for, spec

X = spec((1024,), jnp.float32)
_counter = itertools.count()


def test_register_refuses_one_platform_name_given_as_a_string():
    with pytest.raises(TypeError, match=r"register: platforms='cuda' is a string, but platforms "
                                        r"takes a sequence of platform names, e\.g\. \('cuda',\)"):
        jtr.register("cuda")


def test_register_refuses_the_empty_string_too():
    with pytest.raises(TypeError, match=r"platforms='' is a string"):
        jtr.register("")


@pytest.mark.parametrize("keyword,value,match", [
    ("zeroed_outputs", "0", r"zeroed_outputs='0' must be a sequence of output indices"),
    ("input_output_aliases", "01", r"input_output_aliases='01' must be a dict"),
    ("grid", "4", r"grid='4' must be an int, a tuple"),
    ("grid", (4, "2"), r"grid=\(4, '2'\): every size must be a Python int"),
])
def test_triton_call_refuses_a_string_for_a_collection(keyword, value, match):
    def fn(x, y):
        return jtr.triton_call(x, y, 1024, kernel=kernels.add_kernel, out_shape=x,
                               **{"grid": (4,), "BLOCK": 256, keyword: value})

    with pytest.raises(TypeError, match=match):
        lower_for(fn, X, X, platform="cuda")


@pytest.mark.parametrize("keyword,value,match", [
    ("zeroed_outputs", "0", r"triton_call_lowering: zeroed_outputs='0' must be a sequence of "
                            r"result indices"),
    ("input_output_aliases", "00", r"triton_call_lowering: input_output_aliases='00' must be a "
                                   r"dict \{operand index: result index\}"),
    ("constexprs", "n", r"constexprs='n' must be a mapping"),
    ("grid", "4", r"grid='4' must be an int, a tuple"),
])
def test_triton_call_lowering_refuses_a_string_for_a_collection(keyword, value, match):
    def lowering(ctx, x):
        call = {"grid": (4,), "constexprs": {"n": 1024, "BLOCK": 256}, keyword: value}
        return [jtr.triton_call_lowering(ctx, kernels.copy_kernel, x, **call)]

    prim = lk.define(f"test_strings_{next(_counter)}", lambda x: [x], lowering)
    with pytest.raises(TypeError, match=match):
        lower_for(lambda x: prim.bind(x)[0], X, platform="cuda")


@pytest.mark.parametrize("aliases", ["01", {"0": 0}, [(0, 0)]])
def test_loop_batching_rule_refuses_aliases_that_are_not_a_dict_of_ints(aliases):
    with pytest.raises(TypeError, match=r"loop_batching_rule: input_output_aliases=.* must be a "
                                        r"dict \{operand index: result index\}"):
        jtr.loop_batching_rule(jtr.triton_kernel_p, input_output_aliases=aliases)


def test_kernel_calls_refuses_what_is_not_a_lowered_computation():
    with pytest.raises(TypeError, match=r"kernel_calls\(lowered='stablehlo text'\) takes a "
                                        r"jax.stages.Lowered"):
        jtr.kernel_calls("stablehlo text")


def test_kernel_calls_still_reads_a_lowered_computation():
    lowered = lower_for(lambda x, y: kernels.add(x, y), X, X, platform="cuda")
    assert [call.summary()["launches"][0]["kernel"] for call in jtr.kernel_calls(lowered)] == [
        "add_kernel"]

