"""examples/moe_permute.py: each step and the gradients against the jnp reference, on the CPU
(Triton's interpreter) and on the GPU.

This file holds the tests that need no GPU and start no Python process; the others are in
tests/gpu/test_moe_permute_gpu.py; the checks are in tests/support/moe_checks.py.
"""


import jax

from tests.support.moe_checks import check_forward, check_gradients

CPU = jax.devices("cpu")[0]


def test_every_step_matches_jnp_on_the_cpu():
    # Three blocks of tokens in the row-id-map passes, so the blocks' offsets matter.
    check_forward(CPU, tokens=100, experts=5, hidden=40, k=2, block_size=32)


def test_gradients_match_jnp_on_the_cpu():
    check_gradients(CPU, tokens=24, experts=4, hidden=32, k=2)
