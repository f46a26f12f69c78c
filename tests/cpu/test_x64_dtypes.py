"""Float arrays and outputs of a dtype JAX holds as another while 64-bit types are off (float64,
complex128; and int64 outputs: `jax.dtypes.canonicalize_dtype`) are refused where the call is
made, on every platform, naming the argument, the dtype and the fix; integer inputs convert as
`jnp.asarray` converts them; with 64-bit types on they run."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from tests.support.kernels import add_kernel
from tests.support.lowering_utils import lower_for, spec

N = 1024
F32_OUT = jax.ShapeDtypeStruct((N,), jnp.float32)


def add(x, y, out_shape):
    return jtr.triton_call(x, y, N, kernel=add_kernel, out_shape=out_shape, grid=(4,),
                           BLOCK=256)


INPUT_FIX = (r"argument {position} has dtype {given}, which JAX holds as {held} while 64-bit "
             r"types are off \(jax_enable_x64=False, the default\): JAX would convert it, and "
             r"the kernel would read {held}, not the {given} values given\. Make it {held} "
             r"\(jnp\.asarray\(x, jnp\.{held}\)\), or enable 64-bit types "
             r"\(jax\.config\.update\('jax_enable_x64', True\)\) to keep {given}\.")


@pytest.mark.parametrize("position", [0, 1])
def test_a_float64_numpy_input_is_refused_naming_its_position(position):
    args = [np.ones(N, np.float32), np.ones(N, np.float32)]
    args[position] = np.ones(N, np.float64)
    with pytest.raises(TypeError, match=INPUT_FIX.format(position=position, given="float64",
                                                         held="float32")):
        add(*args, F32_OUT)


def test_an_int64_numpy_input_converts_as_jnp_asarray_converts_it():
    out = add(np.arange(N), np.arange(N), jax.ShapeDtypeStruct((N,), jnp.int32))
    np.testing.assert_array_equal(out, 2 * np.arange(N, dtype=np.int32))


def test_a_float64_output_is_refused_before_any_callback():
    x = np.ones(N, np.float32)
    with pytest.raises(TypeError, match=(
            r"out_shape leaf 0 has dtype float64, which JAX holds as float32 .*the kernel would "
            r"write float64 elements into the float32 buffer JAX allocates\. Make it float32 "
            r"\(jax\.ShapeDtypeStruct\(\(1024,\), jnp\.float32\)\)")):
        add(x, x, jax.ShapeDtypeStruct((N,), np.float64))


def test_out_type_is_checked_as_out_shape_is():
    x = jnp.ones(N, jnp.float32)
    with pytest.raises(TypeError, match=r"out_type leaf 0 has dtype float64"):
        jtr.triton_call(x, x, N, kernel=add_kernel, out_type=jax.ShapeDtypeStruct((N,), np.float64),
                        grid=(4,), BLOCK=256)


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_a_float64_input_is_refused_when_lowered_for_a_gpu(platform):
    x64 = np.ones(N, np.float64)
    with pytest.raises(TypeError, match=r"argument 0 has dtype float64"):
        lower_for(lambda y: add(x64, y, F32_OUT), spec((N,), jnp.float32), platform=platform)


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_a_float64_output_is_refused_when_lowered_for_a_gpu(platform):
    with pytest.raises(TypeError, match=r"out_shape leaf 0 has dtype float64"):
        lower_for(lambda x: add(x, x, jax.ShapeDtypeStruct((N,), np.float64)),
                  spec((N,), jnp.float32), platform=platform)


def test_float64_runs_with_64_bit_types_on():
    x = np.linspace(0, 1, N, dtype=np.float64)
    with jax.enable_x64(True):
        out = add(x, x, jax.ShapeDtypeStruct((N,), np.float64))
        assert out.dtype == np.float64
        np.testing.assert_array_equal(np.asarray(out), x + x)

