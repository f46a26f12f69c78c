"""The calls of `test_xla_route` run and compared with jax.numpy: on every route (jaxlib's Triton
call and XLA's on whichever GPU JAX sees, marked `gpu`; Triton's interpreter on the CPU), and on
the GPU's default route (jaxlib's call, on NVIDIA and AMD alike), with operands computed in the
same jit on memory poisoned first.

The tests on every route (`every_route`) are in tests/support/every_route/xla_surfaces.py;
tests/cpu/test_gpu_xla_route.py collects them too, where they run on the interpreter, and this
file on the GPU routes.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _compat
from tests.support import autotune_utils as au
from tests.support.every_route.xla_surfaces import SURFACES, _computed, _reference
from tests.support.real_data_kernels import poison_memory
from tests.support.every_route.xla_surfaces import *  # noqa: F403  (its tests)


pytestmark = pytest.mark.filterwarnings("ignore:.*donated buffers.*:UserWarning")


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
