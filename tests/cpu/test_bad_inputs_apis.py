"""Issue 21's bad inputs beyond one row of `test_bad_inputs.py`'s table: the same value through
`triton_call` and `triton_call_lowering` gets the same verdict; inputs only a primitive's lowering
rule can give; a compile error remembered by the kernel cache; good inputs next to the limits the
checks enforce."""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
from jax import export

import jax_triton_rocm as jtr
from tests.support import kernels
from tests.support import library_kernels as lk
from tests.support.lowering_utils import lower_for, spec
from tests.support.two_apis import APIS, X, call_through, lower_through

CPU = jax.devices("cpu")[0]
_names = itertools.count()
_add_kernel = kernels.add_outputs_first_kernel


@pytest.mark.parametrize("api", APIS)
def test_a_symbolic_shape_is_refused_not_exported(api):
    # A fixed grid cannot follow the size the exported function will be called with.
    n, = export.symbolic_shape("n")
    arg = jax.ShapeDtypeStruct((n,), jnp.float32)
    with jtr.target_arch(cuda="sm_90"), pytest.raises(
            ValueError, match=r"(argument|operand) 0 has shape \(n,\), with a symbolic "
                              r"dimension, which triton_call(_lowering)? cannot lower.*grid"):
        export.export(jax.jit(call_through(api)), platforms=["cuda"], disabled_checks=[
            export.DisabledSafetyCheck.custom_call("triton_kernel_call_ffi")])(arg, arg)


_tuned = triton.autotune([triton.Config({"BLOCK": 128}, num_warps=0),
                          triton.Config({"BLOCK": 256})], key=["n"])(_add_kernel)


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("options,error,match", [
    (dict(num_ctas=3), ValueError, r"num_ctas=3 on sm_90 .*must be a power of two up to 8"),
    (dict(input_output_alias={0: 0}), TypeError,
     r"'input_output_alias'.*\(did you mean input_output_aliases\?\)"),
    (dict(grid=lambda meta: (1024 // meta["BLOCKSIZE"],)), ValueError,
     r"grid\(meta\) \(.*\) read 'BLOCKSIZE', which is not among the values it is given: "
     r"BLOCK=256, n=1024"),
    (dict(BLOCK=300), Exception, r"(?s)power of 2.*kernel add_outputs_first_kernel was compiled for sm_90 "
                                 r"with the constexprs n=1024, BLOCK=300"),
    (dict(kernel=_tuned, grid=lambda meta: (1024 // meta["BLOCK"],)), ValueError,
     r"num_warps=0 in autotune config \(BLOCK: 128.*\) of kernel add_outputs_first_kernel must be a "
     r"positive int"),
    (dict(BLOCK=len), TypeError, r"BLOCK'?\]?=<built-in function len> is a Python "
                                 r"builtin_function_or_method, and a kernel's constexpr is a value"),
], ids=["num_ctas=3", "misspelt keyword", "grid reading a missing key", "BLOCK=300",
        "Config(num_warps=0)", "a Python function as a constexpr"])
def test_both_apis_refuse_the_same_value(api, options, error, match):
    with pytest.raises(error, match=match):
        lower_through(api, **options)


@pytest.mark.parametrize("platform", ["cuda", "cpu"])
def test_operands_given_as_one_tuple_are_refused(platform):
    def lowering(ctx, x, y):
        return jtr.triton_call_lowering(ctx, _add_kernel, (x,), y, grid=(4,),
                                        constexprs={"n": 1024, "BLOCK": 256})

    prim = lk.define(f"bad_input_{next(_names)}", lambda x, y: [x], lowering)
    with pytest.raises(TypeError, match=r"array_args\[0\] is a tuple of 1 value\(s\), not one "
                                        r"operand\. Pass the operands one by one, unpacked"):
        if platform == "cpu":
            jax.jit(lambda x, y: prim.bind(x, y)[0]).trace(X, X).lower(lowering_platforms=("cpu",))
        else:
            lower_for(lambda x, y: prim.bind(x, y)[0], X, X, platform=platform)


@pytest.mark.parametrize("platform", ["cuda", "cpu"])
def test_abstract_values_given_as_operands_are_refused(platform):
    call = call_through("triton_call_lowering", operands=lambda ctx: ctx.avals_in)
    with pytest.raises(TypeError, match=r"array_args\[0\] is ShapedArray\(float32\[1024\]\) "
                                        r"\(ShapedArray\), not an operand.*not ctx.avals_in"):
        if platform == "cpu":
            jax.jit(call).trace(X, X).lower(lowering_platforms=("cpu",))
        else:
            lower_for(call, X, X, platform=platform)


def test_constexprs_naming_a_pointer_parameter_say_to_drop_it():
    def lowering(ctx, x, y):
        return jtr.triton_call_lowering(ctx, _add_kernel, x, y, grid=(4,),
                                        constexprs={"n": 1024, "BLOCK": 256, "y_ptr": 0})

    prim = lk.define(f"bad_input_{next(_names)}", lambda x, y: [x], lowering)
    with pytest.raises(TypeError, match=r"constexprs names y_ptr, n, not tl.constexpr in the "
                                        r"kernel.*drop from constexprs any that should receive"):
        lower_for(lambda x, y: prim.bind(x, y)[0], X, X, platform="cuda")


def _our_notes(err: BaseException) -> list[str]:
    return [n for n in getattr(err, "__notes__", ()) if n.startswith("jax_triton_rocm:")]


@pytest.mark.parametrize("kernel", ["plain", "autotuned"])
def test_a_remembered_compile_error_carries_each_note_once(kernel):
    # The kernel cache raises the same error object at every later lowering.
    options = dict(BLOCK=300)
    if kernel == "autotuned":
        options = dict(kernel=triton.autotune([triton.Config({"BLOCK": 300}),
                                               triton.Config({"BLOCK": 600})], key=["n"])(
            _add_kernel), grid=lambda meta: (4,))
    errors = []
    for _ in range(3):
        with pytest.raises(Exception, match="power of 2") as caught:
            lower_through("triton_call", **options)
        errors.append(caught.value)
    assert errors[0] is errors[-1]  # remembered, not compiled again
    notes = _our_notes(errors[-1])
    assert len(notes) == len(set(notes)) == (2 if kernel == "autotuned" else 1), notes


def test_a_rocm_grid_at_hips_thread_limit_lowers():
    # 16777215 programs of 256 threads: 4294967040 threads, within HIP's 2**32 - 1.
    (call,) = jtr.kernel_calls(lower_through("triton_call", "rocm", grid=(2**24 - 1,)))
    assert call.summary()["launches"][0]["grid"] == (2**24 - 1, 1, 1)


def test_a_grid_beyond_hips_thread_limit_lowers_for_cuda():
    # CUDA counts blocks, not threads: x may be up to 2**31 - 1 whatever the block (here
    # 2**26 programs of 128 threads, 2**33 threads).
    (call,) = jtr.kernel_calls(lower_through("triton_call", "cuda", grid=(2**26,)))
    assert call.summary()["launches"][0]["grid"] == (2**26, 1, 1)


@pytest.mark.parametrize("platform,dtype", [("rocm", jnp.float8_e4m3fnuz),
                                            ("cuda", jnp.float8_e4m3fn),
                                            ("cuda", jnp.float8_e5m2)])
def test_an_fp8_dtype_the_target_takes_is_copied(platform, dtype):
    array = spec((1024,), dtype)
    (call,) = jtr.kernel_calls(lower_for(lambda x: jtr.triton_call(
        x, kernel=kernels.unmasked_copy_kernel, out_shape=x, grid=(4,), BLOCK=256), array, platform=platform))
    assert call.summary()["launches"][0]["grid"] == (4, 1, 1)


def test_a_big_endian_numpy_array_is_refused_naming_it_and_the_fix():
    x = np.arange(1024, dtype=">f4")
    with pytest.raises(TypeError, match=r"argument 1 is a NumPy array of dtype '>f4', in the "
                                        r"other byte order .*x.astype\(x.dtype.newbyteorder"):
        jtr.triton_call(np.arange(1024, dtype=np.float32), x, 1024, kernel=kernels.add_kernel,
                        out_shape=X, grid=(4,), BLOCK=256)


@pytest.mark.parametrize("platform", ["cuda", "cpu"])
def test_a_tuple_given_for_a_pointer_is_named_when_the_kernel_fails(platform):
    def call(x):
        return jtr.triton_call((x,), kernel=kernels.unmasked_copy_kernel, out_shape=x, grid=(1,),
                               BLOCK=1024)

    with pytest.raises(Exception) as raised:
        if platform == "cpu":
            jax.block_until_ready(jax.jit(call)(jax.device_put(jnp.ones(1024), CPU)))
        else:
            lower_for(call, X, platform=platform)
    text = "\n".join([str(raised.value), *getattr(raised.value, "__notes__", ())])
    assert "parameter(s) x_ptr are given a tuple, which the kernel receives as a Triton tuple" \
        in text and "pass them unpacked: triton_call(*operands, ...)" in text
