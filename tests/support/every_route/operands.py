"""jax-triton 0.4's operands on every route (`every_route`), collected by
tests/cpu/test_operand_routes.py (on Triton's interpreter) and tests/gpu/test_operand_routes_gpu.py
(on the GPU routes).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton

import jax_triton_rocm as jtr
from tests.support.routes import every_route
from tests.support.surface_kernels import (add_inplace_kernel, constexpr_first_kernel,
                                           desc_block_kernel, device_desc_copy_kernel,
                                           out_first_kernel, tuple_kernel, update_and_double_kernel)

# The tests, which a file of tests/cpu and one of tests/gpu import (`import *`).
__all__ = [
    "test_keyword_operands_around_a_constexpr",
    "test_an_output_whose_pointer_precedes_an_operands",
    "test_nested_tuples_of_mixed_dtypes",
    "test_an_aliased_output_before_one_with_a_pointer",
    "test_the_0_4_alias_layout_updates_in_place_and_zeroes_through_the_input",
    "test_a_host_descriptor_reads_its_block_and_pads",
    "test_descriptors_built_inside_the_kernel",
]


@every_route
def test_keyword_operands_around_a_constexpr(route):
    x, y = route.rand(0, (3000,)), route.rand(1, (3000,))
    out = jax.jit(lambda x, y: jtr.triton_call(
        x, n=x.size, y_ptr=y, kernel=constexpr_first_kernel, out_type=x,
        grid=(triton.cdiv(x.size, 512),), BLOCK=512))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)


@every_route
def test_an_output_whose_pointer_precedes_an_operands(route):
    x = route.rand(2, (3000,))
    y = 2 * x + 1  # computed in the same jit, not a program input

    @jax.jit
    def call(x):
        y = 2 * x + 1
        return jtr.triton_call(x, y_ptr=y, n=x.size, kernel=out_first_kernel, out_type=x,
                               grid=(triton.cdiv(x.size, 512),), BLOCK=512)

    np.testing.assert_allclose(call(x), x + 2 * y, rtol=1e-6)


@every_route
def test_nested_tuples_of_mixed_dtypes(route):
    route.expect("jaxlib" if route.name == "xla" else route.name)
    x, y = route.rand(3, (3000,), jnp.float16), route.rand(4, (3000,))
    out = jax.jit(lambda x, y: jtr.triton_call(
        3.0, ((x, 1), y), x.size, None, kernel=tuple_kernel, out_type=y,
        grid=(triton.cdiv(x.size, 512),), BLOCK=512))(x, y)
    np.testing.assert_allclose(out, 3.0 * (x.astype(jnp.float32) + y), rtol=1e-5)


@every_route
def test_an_aliased_output_before_one_with_a_pointer(route):
    # The primitive's results with a pointer come first, as jaxlib hands out buffers.
    x, y = route.rand(7, (3000,)), route.rand(8, (3000,))
    updated, doubled = jax.jit(lambda x, y: jtr.triton_call(
        x * 1, y, x.size, kernel=update_and_double_kernel, out_type=(x, y),
        grid=(triton.cdiv(x.size, 512),), BLOCK=512, input_output_aliases={0: 0}))(x, y)
    np.testing.assert_allclose(updated, x + y, rtol=1e-6)
    np.testing.assert_allclose(doubled, 2 * y, rtol=1e-6)


@every_route
@pytest.mark.parametrize("zeroed", [(), (0,)])
def test_the_0_4_alias_layout_updates_in_place_and_zeroes_through_the_input(route, zeroed):
    # Only jaxlib's call zeroes an output that shares its input's buffer.
    route.expect("jaxlib" if route.name == "xla" and zeroed else route.name)
    x, y = route.rand(5, (3000,)), route.rand(6, (3000,))

    @jax.jit
    def call(x, y):
        y = y * 3  # an operand computed in the same jit
        return jtr.triton_call(x, y, x.size, kernel=add_inplace_kernel, out_type=y,
                               grid=(triton.cdiv(x.size, 512),), BLOCK=512,
                               input_output_aliases={1: 0}, zeroed_outputs=zeroed)

    np.testing.assert_allclose(call(x, y), x if zeroed else x + 3 * y, rtol=1e-6)


def _descriptor_copy(base, padding, round_f32_to_tf32=False):
    """Rows 16..31 of a 20-row view of `base`: 4 read, 12 padded."""
    desc = jtr.TensorDescriptor(base, (20, base.shape[1]), (base.shape[1], 1),
                                (16, base.shape[1]), padding=padding,
                                round_f32_to_tf32=round_f32_to_tf32)
    return jtr.triton_call(desc, kernel=desc_block_kernel, grid=1, M=16, N=base.shape[1],
                           out_type=jax.ShapeDtypeStruct((16, base.shape[1]), base.dtype))


DTYPES = [jnp.float32, jnp.float16, jnp.bfloat16, jnp.float8_e5m2, jnp.int32, jnp.int8,
          jnp.uint16]


# NaN padding needs a float of 16 bits or more (TMA fills no other).
PADDED = [pytest.param(dtype, padding, id=f"{np.dtype(dtype).name}-{padding}")
          for dtype in DTYPES for padding in ("zero", "nan")
          if padding == "zero" or (jnp.issubdtype(dtype, jnp.floating)
                                   and np.dtype(dtype).itemsize >= 2)]


@every_route
@pytest.mark.parametrize("dtype,padding", PADDED)
def test_a_host_descriptor_reads_its_block_and_pads(route, dtype, padding):
    route.expect("jaxlib" if route.name == "xla" else route.name)
    n = 64 if np.dtype(dtype).itemsize > 1 else 128  # a row spans a multiple of 16 bytes
    base = (route.rand(7, (40, n)) * 8).astype(dtype)

    out = np.asarray(jax.jit(lambda b: _descriptor_copy(b * 1, padding))(base)).astype(
        np.float32)
    np.testing.assert_array_equal(out[:4], np.asarray(base[16:20]).astype(np.float32))
    fill = np.nan if padding == "nan" else 0
    np.testing.assert_array_equal(out[4:], np.full((12, n), fill, np.float32))


@every_route
@pytest.mark.parametrize("shape", [(32, 32), (8, 64), (16, 128)])
def test_descriptors_built_inside_the_kernel(route, shape):
    route.expect(None)  # XLA's call takes it unless Triton asks for global scratch (sm_90+)
    x = route.rand(8, shape)
    out = jax.jit(lambda x: jtr.triton_call(x * 1, kernel=device_desc_copy_kernel,
                                            out_type=x, grid=1, M=shape[0], N=shape[1]))(x)
    np.testing.assert_array_equal(out, x)
