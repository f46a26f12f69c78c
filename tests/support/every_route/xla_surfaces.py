"""The calls of tests/cpu/test_xla_route.py run and compared with jax.numpy on every route
(`every_route`), collected by tests/cpu/test_gpu_xla_route.py (on Triton's interpreter) and
tests/gpu/test_xla_route_gpu.py (on the GPU routes).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.cpu.test_xla_route import MULTIPLES_OF_16, SURFACES, TYPED, offset, typed
from tests.support.real_data_kernels import poison_memory
from tests.support.routes import every_route

# The tests, which a file of tests/cpu and one of tests/gpu import (`import *`).
__all__ = [
    "test_every_surface_matches_jnp",
    "test_scalars_of_every_type_reach_the_kernel",
    "test_an_int_multiple_of_16_is_the_value_the_kernel_uses",
    "test_each_value_of_a_runtime_scalar_is_the_one_the_kernel_uses",
]


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
