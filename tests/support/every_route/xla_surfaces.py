"""The calls of every call surface that tests/cpu/test_xla_route.py lowers for XLA's route, and
the tests that run them and compare with jax.numpy on every route (`every_route`), collected by
tests/cpu/test_gpu_xla_route.py (on Triton's interpreter) and tests/gpu/test_xla_route_gpu.py (on
the GPU routes).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support import kernels
from tests.support import library_kernels as lk
from tests.support.real_data_kernels import poison_memory
from tests.support.routes import every_route
from tests.support.surface_kernels import (add_inplace_kernel, constexpr_first_kernel, inc_kernel,
                                           out_first_kernel, update_and_double_kernel)

# The tests, which a file of tests/cpu and one of tests/gpu import (`import *`).
__all__ = [
    "test_every_surface_matches_jnp",
    "test_scalars_of_every_type_reach_the_kernel",
    "test_an_int_multiple_of_16_is_the_value_the_kernel_uses",
    "test_each_value_of_a_runtime_scalar_is_the_one_the_kernel_uses",
]


def block_grid(n, block=256):
    return (triton.cdiv(n, block),)


def positional_add(x, y):
    return kernels.add(x, y)


def positional_alias(x, y):
    return jtr.triton_call(x * 2, y, x.size, kernel=kernels.add_inplace_kernel, out_shape=x,
                           grid=block_grid(x.size), BLOCK=256, input_output_aliases={0: 0})


def output_first(x, y):
    return jtr.triton_call(x, y_ptr=y, n=x.size, kernel=out_first_kernel, out_type=x,
                           grid=block_grid(x.size), BLOCK=256)


def keywords_around_a_constexpr(x, y):
    return jtr.triton_call(x, n=x.size, y_ptr=y, kernel=constexpr_first_kernel, out_type=x,
                           grid=block_grid(x.size), BLOCK=256)


def aliased_output_before_a_pointer(x, y):
    updated, doubled = jtr.triton_call(x * 1, y, x.size, kernel=update_and_double_kernel,
                                       out_type=(x, y), grid=block_grid(x.size), BLOCK=256,
                                       input_output_aliases={0: 0})
    return updated + doubled


def zero_four_alias(x, y):
    return jtr.triton_call(x, y * 3, x.size, kernel=add_inplace_kernel, out_type=y,
                           grid=block_grid(x.size), BLOCK=256, input_output_aliases={1: 0})


def a_ref(x, y):
    ref = jax.new_ref(x + y)
    jtr.triton_call(x.size, ref, kernel=inc_kernel, out_type=(), grid=block_grid(x.size),
                    BLOCK=256)
    return ref[...]


def library_outputs_between_inputs(x, y):
    total, diff = lk.sum_diff(x, y)
    return total * 10 + diff


# name -> (the call, its jax.numpy reference, the aliases its custom call may carry)
SURFACES = {
    "0.3 positional, runtime length": (positional_add, lambda x, y: x + y, 0),
    "0.3 input_output_aliases": (positional_alias, lambda x, y: 2 * x + y, 1),
    "0.4 output pointer first": (output_first, lambda x, y: x + 2 * y, 0),
    "0.4 keyword operands around a constexpr": (keywords_around_a_constexpr,
                                                 lambda x, y: x + y, 0),
    "0.4 aliased output before one with a pointer": (aliased_output_before_a_pointer,
                                                      lambda x, y: x + y + 2 * y, 1),
    "0.4 alias layout": (zero_four_alias, lambda x, y: x + 3 * y, 1),
    "a Ref": (a_ref, lambda x, y: x + y + 1, 1),
    "triton_call_lowering, outputs between inputs": (library_outputs_between_inputs,
                                                     lambda x, y: (x + y) * 10 + (x - y), 0),
}


@triton.jit
def typed_scalars_kernel(x_ptr, a, b, c, d, e, f, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    value = x * a + b + c.to(tl.float32) + d.to(tl.float32) + e.to(tl.float32)
    tl.store(out_ptr + offsets, tl.where(f, value, -value))


TYPED = (2.5, np.float64(1e-300), 2**40, 2**63 + 5, np.uint32(7), True)


def typed(x, values=TYPED):
    return jtr.triton_call(x, *values, kernel=typed_scalars_kernel, out_shape=x, grid=(4,),
                           BLOCK=256)


@triton.jit
def offset_kernel(x_ptr, k, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + k.to(tl.float32))


# Ints of Triton's divisible-by-16 class, of each integer type it specialises and of several
# scales: i32 (negative, scale 64), i64 (128), u64 as NumPy's (16) and as a Python int whose
# product by its scale would wrap in 64 bits (128).
MULTIPLES_OF_16 = {"i32": -4160, "i64": 2**36, "u64": np.uint64(2**40 + 16),
                   "u64 above 2**63": 2**63 + 2**62}


def offset(x, k):
    return jtr.triton_call(x, k, kernel=offset_kernel, out_shape=x, grid=(x.size // 256,),
                           BLOCK=256)


def _computed(fn):
    """`fn` on operands computed from the program's inputs, in the same jit."""
    def program(x0, y0):
        return fn(jnp.sin(x0), y0 * 2.0 - 1.0)

    return program


def _reference(reference, x0, y0):
    return reference(jnp.sin(x0), y0 * 2.0 - 1.0)


@every_route
@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_matches_jnp(route, surface):
    fn, reference, _ = SURFACES[surface]
    n = route.pick(100_003, 1000)
    x0, y0 = route.rand(0, (n,)), route.rand(1, (n,))
    if route.on_gpu:
        poison_memory(1)
    got = jax.jit(_computed(fn))(x0, y0)
    np.testing.assert_allclose(got, _reference(reference, x0, y0), rtol=1e-5, atol=1e-5)


def _typed_reference(x, values):
    a, b, c, d, e, f = values
    value = x * np.float32(a) + np.float32(b) + np.float32(c) + np.float32(d) + np.float32(e)
    return value if f else -value


@every_route
@pytest.mark.parametrize("values", [TYPED, (-1.5, np.float64(3.0), -2**40, 2**64 - 1,
                                            np.uint32(2**32 - 1), False)],
                         ids=["positive", "extremes"])
def test_scalars_of_every_type_reach_the_kernel(route, values):
    x = route.rand(4, (1024,))
    got = jax.jit(lambda x: typed(jnp.cos(x), values))(x)
    np.testing.assert_allclose(got, _typed_reference(np.cos(np.asarray(x)), values),
                               rtol=1e-5)


@every_route
@pytest.mark.parametrize("k", MULTIPLES_OF_16.values(), ids=MULTIPLES_OF_16)
def test_an_int_multiple_of_16_is_the_value_the_kernel_uses(route, k):
    """On XLA's route such an int travels divided by its scale (a power of two, 16 to 128) and
    the trampoline multiplies it back."""
    x = route.rand(7, (route.pick(1 << 16, 512),))
    if route.on_gpu:
        poison_memory(1)
    got = jax.jit(lambda x: offset(jnp.cos(x), k))(x)
    np.testing.assert_allclose(got, np.cos(np.asarray(x)) + np.float32(k), rtol=1e-6)


@every_route
def test_each_value_of_a_runtime_scalar_is_the_one_the_kernel_uses(route):
    from tests.support import kernels

    x, y = route.rand(5, (1100,)), route.rand(6, (1100,))
    for n in range(1000, route.pick(1020, 1004)):
        got = jax.jit(lambda a, b, n=n: kernels.add(a[:n] * 1, b[:n] * 1))(x, y)
        np.testing.assert_allclose(got, x[:n] + y[:n], rtol=1e-6)
