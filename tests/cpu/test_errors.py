"""Every error a user can cause: a clear message naming the argument, the value and the fix."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from tests.support import kernels
from tests.support.lowering_utils import lower_for, spec

X = jnp.zeros((1024,), jnp.float32)


def _add(*args, kernel=kernels.add_kernel, out_shape=X, grid=(4,), **kw):
    return jtr.triton_call(*args, kernel=kernel, out_shape=out_shape, grid=grid, **kw)


def test_dtype_triton_cannot_take_names_the_argument_and_the_dtype():
    z = jnp.zeros((1024,), jnp.complex64)
    with pytest.raises(TypeError, match=r"argument 1 has dtype complex64.*Supported dtypes"):
        _add(X, z, 1024, BLOCK=256)


def test_output_dtype_triton_cannot_take_is_named():
    with pytest.raises(TypeError, match="output 0 has dtype complex64"):
        _add(X, X, 1024, out_shape=jax.ShapeDtypeStruct((4,), jnp.complex64), BLOCK=256)


def test_too_many_operands():
    with pytest.raises(TypeError, match=r"Too many operands for kernel add_kernel"):
        _add(X, X, 1024, X, X, BLOCK=256)


def test_too_few_operands_names_the_parameters_left_empty():
    with pytest.raises(TypeError, match=r"add_kernel: 3 non-constexpr parameter\(s\) get no "
                                        r"argument \(y_ptr, n, out_ptr\), for 1 output.*"
                                        r"Missing, among others: 'n' \(the kernel counts"):
        _add(X, BLOCK=256)


def test_empty_out_shape():
    with pytest.raises(ValueError, match=r"out_shape=\(\) is empty"):
        _add(X, X, 1024, BLOCK=256, out_shape=())


def test_unknown_keyword_lists_the_kernels_parameters():
    with pytest.raises(TypeError, match=r"Unknown keyword argument\(s\) 'BLOK'.*BLOCK"):
        _add(X, X, 1024, BLOK=256)


def test_unhashable_metaparameter_is_named():
    with pytest.raises(TypeError, match=r"BLOCK=\[256\] must be hashable.*tuple"):
        _add(X, X, 1024, BLOCK=[256])


def test_missing_constexpr_says_how_to_pass_it():
    with pytest.raises(TypeError, match=r"Missing constexpr 'BLOCK'.*BLOCK=\.\.\."):
        _add(X, X, 1024)


@pytest.mark.parametrize("grid,match", [
    ((), "is empty"),
    ((0,), "no program runs .* nothing writes output 0"),
    ((4, -1), r"a size is negative \(-1\)"),
    ((1, 1, 1, 1), "has 4 dimensions"),
    ((2.5,), "must be a Python int"),
    ("abc", "must be an int, a tuple"),
])
def test_bad_grid(grid, match):
    with pytest.raises((ValueError, TypeError), match=match):
        _add(X, X, 1024, grid=grid, BLOCK=256)


def test_bad_callable_grid_is_reported_at_lowering():
    with pytest.raises(ValueError, match=r"grid\(meta\)=\(0, -1\): a size is negative"):
        lower_for(lambda x, y: _add(x, y, 1024, grid=lambda meta: (0, -1), BLOCK=256),
                  X, X, platform="cuda")


@pytest.mark.parametrize("value", [2**64, -(2**63) - 1])
def test_scalar_out_of_range(value):
    with pytest.raises(OverflowError, match=rf"argument 2 = {value} is out of range"):
        _add(X, X, value, BLOCK=256)


def test_numpy_scalar_jaxlib_cannot_pass():
    with pytest.raises(TypeError, match="NumPy float16 scalar"):
        _add(X, X, np.float16(1.0), BLOCK=256)


def test_kernel_that_is_not_a_triton_function():
    with pytest.raises(TypeError, match=r"kernel must be a Triton kernel .*@triton.jit.*function"):
        _add(X, X, 1024, kernel=lambda *a: None, BLOCK=256)


def test_grad_points_at_custom_vjp():
    with pytest.raises(NotImplementedError, match="jax.custom_vjp"):
        jax.grad(lambda x: kernels.add(x, x).sum())(X)


def test_linear_transpose_points_at_custom_vjp():
    transpose = jax.linear_transpose(lambda x: kernels.add(x, x), X)
    with pytest.raises(NotImplementedError, match=r"jax.linear_transpose of triton_call \(kernel "
                                                  r"add_kernel\).*jax.custom_vjp"):
        transpose(X)


def test_num_warps_must_be_a_power_of_two():
    with pytest.raises(ValueError, match=r"num_warps=3 must be a power of two"):
        _add(X, X, 1024, BLOCK=256, num_warps=3)


def test_aliasing_buffers_of_different_shapes():
    with pytest.raises(ValueError, match=r"input 0 .* and output 0 .* same shape and dtype"):
        _add(X, X, 1024, BLOCK=256, out_shape=jnp.zeros((8,)), input_output_aliases={0: 0})


def test_alias_index_out_of_range_counts_arrays_only():
    with pytest.raises(ValueError, match=r"input index 5 is not one of the 2 array arguments"):
        _add(X, X, 1024, BLOCK=256, input_output_aliases={5: 0})


def test_zeroed_output_index_out_of_range():
    with pytest.raises(ValueError, match=r"zeroed_outputs=\(3,\): 3 is not an output index"):
        _add(X, X, 1024, BLOCK=256, zeroed_outputs=(3,))


def test_jax_triton_custom_call_target_name_is_refused_with_advice():
    with pytest.raises(TypeError, match="picks the custom-call target"):
        _add(X, X, 1024, BLOCK=256, custom_call_target_name="triton_kernel_call")


def test_lowering_for_cuda_without_the_cuda_plugin_names_the_install(monkeypatch):
    monkeypatch.setattr(_vendors, "plugin_features", lambda platform: None)
    jtr.register(platforms=("cuda",))
    with pytest.raises(RuntimeError, match=r"needs JAX's CUDA plugin.*pip install -U 'jax\[cuda13\]'"):
        jax.jit(kernels.add).trace(X, X).lower(lowering_platforms=("cuda",))


def test_errors_do_not_poison_later_calls():
    with pytest.raises(TypeError):
        _add(X, X, 1024)
    call = lower_for(kernels.add, spec((1024,), jnp.float32), spec((1024,), jnp.float32),
                     platform="cuda")
    assert len(jtr.kernel_calls(call)) == 1
