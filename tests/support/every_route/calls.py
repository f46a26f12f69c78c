"""Kernels run through every route a call can take, compared with jax.numpy references: the tests
on every route (`every_route`), collected by tests/cpu/test_routes.py (on Triton's interpreter)
and tests/gpu/test_routes_gpu.py (on the GPU routes).
"""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton

import jax_triton_rocm as jtr
from tests.support import kernels
from tests.support.routes import every_route

# The tests, which a file of tests/cpu and one of tests/gpu import (`import *`).
__all__ = [
    "test_vector_add_matches_jnp",
    "test_eager_call_outside_jit_matches_jnp",
    "test_fused_softmax_matches_jax_nn",
    "test_matmul_matches_jnp",
    "test_int_float_bool_scalars_reach_the_kernel",
    "test_input_output_aliases_with_donation_updates_in_place",
    "test_zeroed_outputs_are_zeroed_before_each_launch",
    "test_two_outputs_in_pytree_order",
    "test_callable_grid_sees_the_metaparameters",
    "test_inside_lax_scan",
    "test_copy_round_trips_every_dtype",
    "test_a_function_given_as_a_constexpr_computes_on_every_route",
    "test_an_empty_grid_launches_nothing_and_returns_zeros_or_the_aliased_input",
]


@every_route
@pytest.mark.parametrize("size", ["aligned", "ragged", "large"])
def test_vector_add_matches_jnp(route, size):
    n = {"aligned": 1024, "ragged": 1000, "large": route.pick(1 << 20, 5000)}[size]
    x, y = route.rand(0, (n,)), route.rand(1, (n,))
    out = jax.jit(kernels.add)(x, y)
    assert out.devices() == x.devices()
    np.testing.assert_allclose(out, x + y, rtol=1e-6)


@every_route
def test_eager_call_outside_jit_matches_jnp(route):
    n = route.pick(4096, 700)
    x, y = route.rand(2, (n,)), route.rand(3, (n,))
    np.testing.assert_allclose(kernels.add(x, y), x + y, rtol=1e-6)


@every_route
def test_fused_softmax_matches_jax_nn(route):
    x = route.rand(4, route.pick((128, 781), (16, 181)))
    np.testing.assert_allclose(jax.jit(kernels.softmax)(x), jax.nn.softmax(x, axis=-1),
                               rtol=1e-5, atol=1e-6)


@every_route
@pytest.mark.parametrize("dtype,tol", [(jnp.float16, 1e-2), (jnp.bfloat16, 2e-2),
                                       (jnp.float32, None)])
def test_matmul_matches_jnp(route, dtype, tol):
    tol = tol or route.pick(1e-2, 1e-5)  # GPUs multiply float32 in TF32
    (m, k), n = route.pick((256, 192), (70, 48)), route.pick(320, 90)
    blocks = route.pick({}, {"block_m": 32, "block_n": 32, "block_k": 16})
    a, b = route.rand(5, (m, k), dtype), route.rand(6, (k, n), dtype)
    out = jax.jit(lambda a, b: kernels.matmul(a, b, **blocks))(a, b)
    assert out.dtype == dtype
    assert kernels.matmul_relative_error(out, a, b) < tol


@every_route
@pytest.mark.parametrize("scale,shift,flip", [(2.5, 3, False), (0.5, -7, True), (1.0, 1, True),
                                              (np.float32(3.0), 2**40, False)])
def test_int_float_bool_scalars_reach_the_kernel(route, scale, shift, flip):
    x = route.rand(7, (3000,))
    out = jax.jit(lambda x: jtr.triton_call(
        x, scale, shift, flip, x.size, kernel=kernels.scale_shift_kernel, out_shape=x,
        grid=(triton.cdiv(x.size, 512),), BLOCK=512))(x)
    ref = x * np.float32(scale) + np.float32(shift)
    np.testing.assert_allclose(out, -ref if flip else ref, rtol=1e-6, atol=1e-6)  # FMA


@every_route
def test_input_output_aliases_with_donation_updates_in_place(route):
    x, y = route.rand(8, (2048,)), route.rand(9, (2048,))
    expected = x + y

    def inplace(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernels.add_inplace_kernel, out_shape=x,
                               grid=(8,), BLOCK=256, input_output_aliases={0: 0})

    np.testing.assert_allclose(jax.jit(inplace)(x, y), expected, rtol=1e-6)
    np.testing.assert_allclose(jax.jit(inplace, donate_argnums=0)(x, y), expected, rtol=1e-6)
    assert x.is_deleted()


@every_route
def test_zeroed_outputs_are_zeroed_before_each_launch(route):
    n = route.pick(8192, 4096)
    x = route.rand(10, (n,))

    @jax.jit
    def total(x):
        return jtr.triton_call(x, x.size, kernel=kernels.atomic_sum_kernel,
                               out_shape=jax.ShapeDtypeStruct((1,), jnp.float32),
                               grid=(n // 1024,), BLOCK=1024, zeroed_outputs=(0,))

    for _ in range(3):  # a reused, unzeroed buffer would accumulate
        np.testing.assert_allclose(total(x)[0], jnp.sum(x), rtol=1e-4)


@every_route
def test_two_outputs_in_pytree_order(route):
    x, y = route.rand(11, (5000,)), route.rand(12, (5000,))
    # Outputs fill the kernel's pointers in out_shape's pytree order (dict keys sorted).
    out = jax.jit(lambda x, y: jtr.triton_call(
        x, y, x.size, kernel=kernels.sum_and_diff_kernel,
        out_shape={"a_sum": x, "b_diff": x}, grid=(triton.cdiv(5000, 256),), BLOCK=256))(x, y)
    np.testing.assert_allclose(out["a_sum"], x + y, rtol=1e-6)
    np.testing.assert_allclose(out["b_diff"], x - y, rtol=1e-6)


@every_route
def test_callable_grid_sees_the_metaparameters(route):
    x, y = route.rand(13, (3333,)), route.rand(14, (3333,))
    seen = []

    def grid(meta):
        seen.append(meta["BLOCK"])
        return (triton.cdiv(x.size, meta["BLOCK"]),)

    out = jax.jit(lambda x, y: jtr.triton_call(x, y, x.size, kernel=kernels.add_kernel,
                                               out_shape=x, grid=grid, BLOCK=128))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    assert seen and set(seen) == {128}


@every_route
def test_inside_lax_scan(route):
    x, steps = route.rand(15, (route.pick(1024, 512),)), route.pick(10, 5)

    def body(carry, _):
        return kernels.add(carry, x), None

    out, _ = jax.jit(lambda c: jax.lax.scan(body, c, None, length=steps))(jnp.zeros_like(x))
    np.testing.assert_allclose(out, steps * x, rtol=1e-5)


@every_route
@pytest.mark.parametrize("dtype", ["int8", "int32", "uint16", "int64", "float16", "bfloat16",
                                   "float64", "float8_e4m3fn", "float8_e5m2", "bool"])
def test_copy_round_trips_every_dtype(route, dtype):
    jax.config.update("jax_enable_x64", True)
    try:
        x = route.put(jnp.asarray(np.arange(1000) % 7).astype(jnp.dtype(dtype)))
        np.testing.assert_array_equal(np.asarray(jax.jit(kernels.copy)(x)).view(np.uint8),
                                      np.asarray(x).view(np.uint8))
    finally:
        jax.config.update("jax_enable_x64", False)


@every_route
@pytest.mark.parametrize("act,expected", [
    (triton.language.exp, np.exp), (triton.language.abs, np.abs),
    (triton.language.sigmoid, lambda x: 1 / (1 + np.exp(-x))), (kernels.doubled, lambda x: 2 * x),
], ids=["tl.exp", "tl.abs", "tl.sigmoid", "a jit function"])
def test_a_function_given_as_a_constexpr_computes_on_every_route(route, act, expected):
    x = route.rand(11, (route.pick(5000, 700),))
    out = jax.jit(lambda x: jtr.triton_call(x, kernel=kernels.activation_kernel, out_type=x,
                                            grid=(triton.cdiv(x.size, 256),), n=x.size,
                                            ACT=act, BLOCK=256))(x)
    np.testing.assert_allclose(out, expected(np.asarray(x)), rtol=1e-5, atol=1e-6)


@every_route
def test_an_empty_grid_launches_nothing_and_returns_zeros_or_the_aliased_input(route):
    route.expect(None)  # no route emits a kernel call: checked below
    x, y = route.rand(16, (1000,)), route.rand(17, (1000,))
    zeroed, aliased = jax.jit(lambda x, y: jtr.triton_call(
        x, y, 0, kernel=kernels.sum_and_diff_kernel, out_shape=(x, y),
        grid=lambda meta: (triton.cdiv(0, meta["BLOCK"]),), BLOCK=256,
        input_output_aliases={1: 1}, zeroed_outputs=(0,)))(x, y)
    np.testing.assert_array_equal(zeroed, np.zeros(1000, np.float32))
    np.testing.assert_array_equal(aliased, y)
    empty = route.put(jnp.zeros((0,), jnp.float32))
    assert jax.jit(kernels.add)(empty, empty).shape == (0,)
    assert route.emitted["jaxlib"] == route.emitted["xla"] == 0
