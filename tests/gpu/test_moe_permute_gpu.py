"""examples/moe_permute.py: each step and the gradients against the jnp reference, on the CPU
(Triton's interpreter) and on the GPU.

The checks are in tests/support/moe_checks.py.
"""

import pytest

import jax.numpy as jnp

from tests.support.gpu_utils import gpu_devices
from tests.support.moe_checks import check_forward, check_gradients


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,tol", [(jnp.float32, 1e-5), (jnp.bfloat16, 2e-2)])
def test_every_step_matches_jnp_on_the_gpu(dtype, tol):
    # 5000 tokens: five blocks of the row-id-map passes.
    check_forward(gpu_devices()[0], tokens=5000, experts=64, hidden=1000, k=8, dtype=dtype,
                  tol=tol)


@pytest.mark.gpu
def test_gradients_match_jnp_on_the_gpu():
    check_gradients(gpu_devices()[0], tokens=2048, experts=16, hidden=512, k=4)
