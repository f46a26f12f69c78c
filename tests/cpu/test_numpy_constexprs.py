"""NumPy scalars as constexprs: they compile on a cold Triton cache, and to the same kernel as the
Python scalars they equal, through `triton_call` and `triton_call_lowering` alike."""


import jax
import jax.numpy as jnp
import numpy as np

from tests.support.numpy_constexpr_calls import NUMPY_VALUES, N, affine_call, affine_primitive


def test_numpy_constexprs_run_in_the_interpreter_on_the_cpu():
    x = jax.device_put(jnp.linspace(0, 1, N, dtype=jnp.float32), jax.devices("cpu")[0])
    for fn in (affine_call, affine_primitive):
        out = jax.jit(lambda x, fn=fn: fn(x, NUMPY_VALUES))(x)
        np.testing.assert_allclose(out, -2.5 * np.asarray(x))
