"""The calls of `test_xla_route` run and compared with jax.numpy: on every route (jaxlib's Triton
call and XLA's on whichever GPU JAX sees, marked `gpu`; Triton's interpreter on the CPU), and on
the GPU's default route (jaxlib's call, on NVIDIA and AMD alike), with operands computed in the
same jit on memory poisoned first.

The tests on every route (`every_route`) are written here; tests/cpu/test_gpu_xla_route.py collects
them too, where they run on the interpreter, and here on the GPU routes.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _compat
from tests.cpu.test_xla_route import MULTIPLES_OF_16, SURFACES, TYPED, offset, typed
from tests.support import autotune_utils as au
from tests.support.real_data_kernels import poison_memory
from tests.support.routes import every_route

pytestmark = pytest.mark.filterwarnings("ignore:.*donated buffers.*:UserWarning")


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


@pytest.mark.gpu
@pytest.mark.parametrize("surface", SURFACES)
def test_the_default_route_runs_every_surface(default_route, surface):
    fn, reference, _ = SURFACES[surface]
    x0 = jax.random.normal(jax.random.key(2), (65_537,), jnp.float32)
    y0 = jax.random.normal(jax.random.key(3), (65_537,), jnp.float32)
    program = jax.jit(_computed(fn))
    assert [c.target for c in jtr.kernel_calls(program.lower(x0, y0))] == [_compat.FFI_CALL_NAME]
    poison_memory(1)
    np.testing.assert_allclose(program(x0, y0), _reference(reference, x0, y0), rtol=1e-5,
                               atol=1e-5)


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


@pytest.mark.gpu
def test_a_call_autotuned_once_runs_its_choice_on_the_default_route(tmp_path, monkeypatch,
                                                                    default_route, fresh_caches):
    monkeypatch.setenv("JAX_TRITON_ROCM_AUTOTUNE_DIR", str(tmp_path))
    x0 = jax.random.normal(jax.random.key(7), (1 << 20,), jnp.float32)
    program = _computed(lambda x, y: au.tuned_add(x, y))
    np.testing.assert_allclose(jtr.autotune(program, x0, x0), _reference(
        lambda x, y: x + y, x0, x0), rtol=1e-6)
    jitted = jax.jit(program)
    assert [c.target for c in jtr.kernel_calls(jitted.lower(x0, x0))] == [_compat.FFI_CALL_NAME]
    poison_memory(1)
    np.testing.assert_allclose(jitted(x0, x0), _reference(lambda x, y: x + y, x0, x0),
                               rtol=1e-6)
