"""Thread-block clusters (`num_ctas`) on the GPU present: where jaxlib launches them (NVIDIA sm_90
and newer, powers of two up to 8) a clustered call gives jnp's result; on every other GPU (older
NVIDIA, any AMD) it is refused at lowering, naming `num_ctas` and the target."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jax_triton_rocm.backends import _vendors
from tests.support import kernels
from tests.support.gpu_utils import gpu_devices, gpu_platform

pytestmark = pytest.mark.gpu


def _launches_clusters() -> bool:
    if gpu_platform() != "cuda":
        return False
    arch = _vendors.normalize_arch("cuda", gpu_devices()[0].compute_capability)
    return int(arch[3:]) >= 90


@pytest.mark.parametrize("num_ctas", [2, 8])
def test_a_clustered_call_matches_jnp_where_clusters_launch_and_is_refused_elsewhere(num_ctas):
    x = jax.device_put(jnp.linspace(-4, 4, 1 << 16, dtype=jnp.float32), gpu_devices()[0])

    def clustered(x):
        y = jnp.sin(x)  # an operand computed earlier in the same jit
        return kernels.add(y, y, block=1024, num_ctas=num_ctas)

    if _launches_clusters():
        np.testing.assert_allclose(jax.jit(clustered)(x), 2 * np.sin(np.asarray(x)), rtol=1e-6)
    else:
        with pytest.raises(ValueError, match=rf"num_ctas={num_ctas}"):
            jax.jit(clustered)(x)
