"""The CUBIN jaxlib's call carries without its copy of the PTX text (the default) runs as the
one with it (`JAX_TRITON_ROCM_KEEP_PTX_TEXT=1`): the same bits, on an operand computed earlier
in the same jit. On ROCm both are the HSACO as compiled, and the test checks the same."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.support import kernels
from tests.support.gpu_utils import gpu_platform
from tests.support.lowering_utils import captured_lowerings

pytestmark = pytest.mark.gpu


def _scaled_softmax(x):
    return kernels.softmax(jnp.tanh(x) * 3.0)


def test_the_carried_cubin_with_and_without_its_ptx_text_gives_the_same_bits(
        monkeypatch, default_route, fresh_caches):
    x = jax.random.normal(jax.random.key(7), (64, 128), jnp.float32)
    poison = jnp.full((1 << 22,), jnp.nan, jnp.float32).block_until_ready()
    del poison  # freed memory holds NaNs: a kernel that reads what it did not write shows it
    results, carried = {}, {}
    for keep in ("1", "0"):
        monkeypatch.setenv("JAX_TRITON_ROCM_KEEP_PTX_TEXT", keep)
        jax.clear_caches()  # JAX's lowering cache does not see the variable; the package's does
        with captured_lowerings() as captured:
            results[keep] = np.asarray(jax.jit(_scaled_softmax)(x))
        (lowered,) = captured
        carried[keep] = (lowered.calls[0].kernel.object_file, lowered.kernels[0].binary)
    kept, built = carried["1"]
    left_out, _ = carried["0"]
    if kept is not None:  # the plugin loads the binary from module_image (jax 0.11.1+)
        assert kept == built
        assert (left_out != built) == (gpu_platform() == "cuda")
    np.testing.assert_array_equal(results["0"], results["1"])
    np.testing.assert_allclose(results["0"], jax.nn.softmax(jnp.tanh(x) * 3.0, axis=-1),
                               rtol=1e-5, atol=1e-6)
