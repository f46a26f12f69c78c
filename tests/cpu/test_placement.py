"""Where a call's arrays and outputs land among a kernel's parameters: a call that would make the
kernel read memory nobody wrote (an input on a parameter it stores to, an output on one it only
loads from) is refused, naming both parameters and the fix, in jax-triton 0.3's and 0.4's forms;
the forms docs/porting.md shows instead (the input by name, or an aliased output buffer) compute
the right numbers, whatever constexpr of the call picks the parameters (`if A_IS_OUT:`). A
kernel that stores into a plain input array is refused too (tests/cpu/test_ir_writes.py reads
what the compiled kernel writes)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
import jax_triton_rocm.compat as jt
from tests.support.lowering_utils import lower_for

N = 16


@triton.jit
def softmax_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(in_ptr + offsets, mask=offsets < n, other=-float("inf"))
    e = tl.exp(x - tl.max(x, 0))
    tl.store(out_ptr + offsets, e / tl.sum(e, 0), mask=offsets < n)


def x_values():
    return jnp.arange(N, dtype=jnp.float32) / 4


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


OUT = jax.ShapeDtypeStruct((N,), jnp.float32)
REFUSED = (r"Kernel softmax_kernel would read memory nobody wrote: argument 0 \(float32\[16\]\), "
           r"an input, fills parameter 'out_ptr', which the kernel stores to "
           r"\(test_placement.py:\d+: tl.store\(out_ptr \+ offsets.*\), and output 0 lands on "
           r"parameter 'in_ptr', which it only loads from \(test_placement.py:\d+: "
           r"tl.load\(in_ptr \+ offsets.*\)\)\..*Pass the input by name, so that the output "
           r"fills 'out_ptr': triton_call\(\.\.\., in_ptr=x, {convention}=\.\.\.\) \(or "
           r"operands=\{{'in_ptr': x\}}\); or, .* alias it to the output "
           r"\(input_output_aliases=\{{0: 0\}}\) and pass the input for 'in_ptr' too\.")


@pytest.mark.parametrize("convention", ["out_type", "out_shape"])
def test_input_on_a_stored_parameter_and_output_on_a_loaded_one_is_refused(convention):
    with pytest.raises(TypeError, match=REFUSED.format(convention=convention)):
        jtr.triton_call(x_values(), kernel=softmax_kernel, grid=(1,), n=N, BLOCK=N,
                        **{convention: OUT})


@pytest.mark.parametrize("platform", ["cpu", "cuda", "rocm"])
def test_the_refusal_comes_at_the_lowering_for_every_platform(platform):
    with pytest.raises(TypeError, match=r"would read memory nobody wrote"):
        lower_for(lambda x: jtr.triton_call(x, kernel=softmax_kernel, out_type=OUT, grid=(1,),
                                            n=N, BLOCK=N), OUT, platform=platform)


LEGAL = {
    "0.4, the input by name": lambda x: jtr.triton_call(
        kernel=softmax_kernel, in_ptr=x, out_type=OUT, grid=(1,), n=N, BLOCK=N),
    "0.3, the input by name": lambda x: jtr.triton_call(
        kernel=softmax_kernel, in_ptr=x, out_shape=OUT, grid=(1,), n=N, BLOCK=N),
    "0.3, operands=": lambda x: jtr.triton_call(
        kernel=softmax_kernel, operands={"in_ptr": x}, out_shape=OUT, grid=(1,), n=N, BLOCK=N),
    "0.4, an aliased output buffer": lambda x: jtr.triton_call(
        jnp.zeros(N, jnp.float32), x, kernel=softmax_kernel, out_type=OUT, grid=(1,), n=N,
        BLOCK=N, input_output_aliases={0: 0}),
    "0.3, an aliased output buffer": lambda x: jtr.triton_call(
        jnp.zeros(N, jnp.float32), x, N, kernel=softmax_kernel, out_shape=OUT, grid=(1,),
        BLOCK=N, input_output_aliases={0: 0}),
}


@pytest.mark.parametrize("form", list(LEGAL))
def test_the_documented_forms_compute_the_kernels_result(form):
    x = x_values()
    np.testing.assert_allclose(np.asarray(LEGAL[form](x)), softmax(np.asarray(x)), rtol=1e-6)


@triton.jit
def scale_in_place_kernel(x_ptr, scale_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) * tl.load(scale_ptr + offsets))


def test_a_scratch_store_into_an_input_beside_a_written_output_is_refused():
    @triton.jit
    def scale_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets)
        tl.store(x_ptr + offsets, x * 0)  # a scratch write to the input's copy
        tl.store(out_ptr + offsets, x * 3)

    with pytest.raises(TypeError, match=(
            r"Kernel scale_kernel stores to parameter 'x_ptr' \(test_placement.py:\d+: "
            r"tl.store\(x_ptr \+ offsets, x \* 0\).*\), which argument 0 \(float32\[16\]\), a "
            r"plain array, fills, beside the call's outputs")):
        jtr.triton_call(x_values(), kernel=scale_kernel, out_type=OUT, grid=(1,), BLOCK=N)


def test_an_output_the_kernel_loads_and_stores_is_not_refused():
    @triton.jit
    def accumulate_kernel(x_ptr, total_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets)
        tl.store(total_ptr + offsets, tl.load(total_ptr + offsets) + x)

    x = x_values()
    out = jtr.triton_call(x, kernel=accumulate_kernel, out_type=OUT, grid=(1,), BLOCK=N,
                          zeroed_outputs=(0,))
    np.testing.assert_allclose(np.asarray(out), np.asarray(x))


def test_a_ref_on_a_stored_parameter_is_not_refused():
    x = x_values()

    @jax.jit
    def scaled(x):
        ref = jax.new_ref(x)
        jtr.triton_call(ref, x, kernel=scale_in_place_kernel, out_type=(), grid=(1,), BLOCK=N)
        return ref[...]

    np.testing.assert_allclose(np.asarray(scaled(x)), np.asarray(x) ** 2)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def test_output_passed_also_as_an_input_names_the_extra_argument():
    x, out = x_values(), jnp.zeros(N, jnp.float32)
    with pytest.raises(TypeError, match=(
            r"Kernel copy_kernel's parameter 'n' receives output 0, but is also given as a "
            r"keyword \(n=16\): the call gives 2 positional argument\(s\) and 1 output\(s\), "
            r"placed after them, which fill the parameters \(x_ptr, out_ptr, n\), 1 more than "
            r"the 2 before 'n'\. Most likely the output is passed as an input too: argument 1 "
            r"\(float32\[16\], the shape and dtype of output 0\)\. If so, drop it from the "
            r"positional arguments .*input_output_aliases=\{1: 0\}")):
        jtr.triton_call(x, out, kernel=copy_kernel, out_shape=out, grid=(1,), n=N, BLOCK=N)


@pytest.mark.parametrize("fixed", [
    lambda x, out: jtr.triton_call(x, kernel=copy_kernel, out_shape=out, grid=(1,), n=N,
                                   BLOCK=N),
    lambda x, out: jtr.triton_call(x, out, kernel=copy_kernel, out_shape=out, grid=(1,), n=N,
                                   BLOCK=N, input_output_aliases={1: 0}),
], ids=["the extra argument dropped", "the output aliased"])
def test_the_fixes_the_collision_names_compute_the_kernels_result(fixed):
    x = x_values()
    np.testing.assert_allclose(np.asarray(fixed(x, jnp.zeros(N, jnp.float32))), np.asarray(x))


@triton.jit
def scaled_sum_kernel(a_ptr, b_ptr, c_ptr, out_ptr, stride, scale: tl.constexpr,
                      BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK) * stride
    total = tl.load(a_ptr + offsets) + tl.load(b_ptr + offsets) + tl.load(c_ptr + offsets)
    tl.store(out_ptr + offsets, total * scale)


def test_collision_without_an_array_like_the_output_names_the_last_arguments():
    # A 0.3-style call: every array positionally, the output also in the positional list, and
    # the values after the pointers by keyword; the output has no input's shape here.
    a, out = jnp.ones(N, jnp.float32), jax.ShapeDtypeStruct((N,), jnp.int32)
    with pytest.raises(TypeError, match=(
            r"parameter 'stride' receives output 0, but is also given as a keyword \(stride=1\): "
            r".*1 more than the 4 before 'stride'\. Drop the extra value\(s\) \(argument 3\), or "
            r"pass 'stride' positionally instead of by keyword\.")):
        jtr.triton_call(a, a, a, a, kernel=scaled_sum_kernel, out_shape=out, grid=(1,),
                        stride=1, scale=2.0, BLOCK=N)


def test_the_lowering_api_refuses_a_result_on_a_parameter_the_kernel_only_loads():
    from tests.support import library_kernels

    def lowering(ctx, x):
        return jtr.triton_call_lowering(ctx, softmax_kernel, x, grid=(1,),
                                        constexprs={"n": N, "BLOCK": N})

    softmax_p = library_kernels.define("test_placement_softmax", lambda x: x, lowering,
                                       multiple_results=False)
    with pytest.raises(TypeError, match=(
            r"triton_call_lowering: kernel softmax_kernel would read memory nobody wrote: "
            r"operand 0 \(float32\[16\]\), an input, fills parameter 'out_ptr', which the "
            r"kernel stores to .*, and output 0 lands on parameter 'in_ptr', which it only loads "
            r"from .*The operands fill the pointer parameters in order")):
        jax.jit(softmax_p.bind).lower(x_values())


@triton.jit
def chosen_output_kernel(a_ptr, b_ptr, n, A_IS_OUT: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    if A_IS_OUT:
        tl.store(a_ptr + offsets, tl.load(b_ptr + offsets, mask=offsets < n) * 2,
                 mask=offsets < n)
    else:
        tl.store(b_ptr + offsets, tl.load(a_ptr + offsets, mask=offsets < n) * 2,
                 mask=offsets < n)


@triton.jit
def _store_chosen(a_ptr, b_ptr, offsets, A_IS_OUT: tl.constexpr):
    if not A_IS_OUT:
        tl.store(b_ptr + offsets, tl.load(a_ptr + offsets) * 2)
    else:
        tl.store(a_ptr + offsets, tl.load(b_ptr + offsets) * 2)


@triton.jit
def chosen_in_a_callee_kernel(a_ptr, b_ptr, n, A_IS_OUT: tl.constexpr, BLOCK: tl.constexpr):
    _store_chosen(a_ptr, b_ptr, tl.arange(0, BLOCK), A_IS_OUT)


@triton.jit
def chosen_by_expression_kernel(a_ptr, b_ptr, n, A_IS_OUT: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    target = a_ptr if A_IS_OUT == 1 and BLOCK > 0 else b_ptr
    source = b_ptr if A_IS_OUT == 1 and BLOCK > 0 else a_ptr
    tl.store(target + offsets, tl.load(source + offsets) * 2)


CHOSEN = [chosen_output_kernel, chosen_in_a_callee_kernel, chosen_by_expression_kernel]
CHOSEN_IDS = ["an if", "an if in a callee", "a conditional expression"]


@pytest.mark.parametrize("kernel", CHOSEN, ids=CHOSEN_IDS)
@pytest.mark.parametrize("api", [jtr, jt], ids=["triton_call", "compat"])
def test_a_store_a_constexpr_of_the_call_places_on_an_input_is_refused(kernel, api):
    with pytest.raises(TypeError, match=(
            r"Kernel \w+ would read memory nobody wrote: argument 0 \(float32\[16\]\), an "
            r"input, fills parameter 'a_ptr', which the kernel stores to \(test_placement.py:"
            r"\d+: .* \(compiled with A_IS_OUT=True(, BLOCK=16)?\)\), and output 0 lands on "
            r"parameter 'b_ptr', which it only loads from .*triton_call\(\.\.\., b_ptr=x, "
            r"out_type=")):
        api.triton_call(x_values(), kernel=kernel, out_type=OUT, grid=(1,), n=N,
                        A_IS_OUT=True, BLOCK=N)


@pytest.mark.parametrize("kernel", CHOSEN, ids=CHOSEN_IDS)
def test_the_placements_a_constexpr_of_the_call_makes_right_compute_the_result(kernel):
    x = x_values()
    as_written = jtr.triton_call(x, kernel=kernel, out_type=OUT, grid=(1,), n=N,
                                 A_IS_OUT=False, BLOCK=N)
    by_name = jtr.triton_call(kernel=kernel, b_ptr=x, out_type=OUT, grid=(1,), n=N,
                              A_IS_OUT=True, BLOCK=N)
    for out in (as_written, by_name):
        np.testing.assert_allclose(np.asarray(out), np.asarray(x) * 2)


def test_a_store_into_a_plain_input_of_a_call_without_outputs_is_refused():
    with pytest.raises(TypeError, match=(
            r"Kernel scale_in_place_kernel stores to parameter 'x_ptr' .*which argument 0 "
            r"\(float32\[16\]\), a plain array, fills, and the call has no outputs")):
        jtr.triton_call(x_values(), x_values(), kernel=scale_in_place_kernel, out_type=(),
                        grid=(1,), BLOCK=N, has_side_effect=True)
