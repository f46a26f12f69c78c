"""examples/moe_permute.py's checks: each step and the gradients against the jnp reference on a
device, for tests/cpu/test_moe_permute.py (Triton's interpreter) and
tests/gpu/test_moe_permute_gpu.py."""

import numpy as np

import jax
import jax.numpy as jnp

from tests.support import real_data_kernels


moe = real_data_kernels.moe_example()


def _problem(device, tokens, experts, hidden, k, dtype=jnp.float32):
    mask, probs = moe.top_k_routing(jax.random.key(tokens), tokens, experts, k)
    mask = mask.at[0].set(0)  # a token routed nowhere
    x = jax.random.normal(jax.random.key(tokens + 1), (tokens, hidden), jnp.float32).astype(dtype)
    return [jax.device_put(a, device) for a in (mask, probs, x)]


def check_forward(device, tokens, experts, hidden, k, dtype=jnp.float32, tol=1e-6,
                   block_size=moe.BLOCK_TOKENS):
    mask, probs, x = _problem(device, tokens, experts, hidden, k, dtype)
    num_out = tokens * k  # one more row than routed pairs (token 0 is not routed): stays zero
    row_id_map = jax.jit(moe.make_row_id_map, static_argnums=1)(mask, block_size)
    np.testing.assert_array_equal(row_id_map, moe.make_row_id_map_reference(mask))
    rows, row_probs = jax.jit(moe.permute, static_argnums=3)(x, row_id_map, probs, num_out)
    expected_rows, expected_probs = moe.permute_reference(x, mask, probs, num_out)
    np.testing.assert_array_equal(rows, expected_rows)
    np.testing.assert_array_equal(row_probs, expected_probs)
    out = jax.jit(moe.unpermute)(rows, row_id_map, probs)
    np.testing.assert_allclose(np.asarray(out, np.float32),
                               np.asarray(moe.unpermute_reference(rows, mask, probs), np.float32),
                               rtol=tol, atol=tol)


def check_gradients(device, tokens, experts, hidden, k):
    mask, probs, x = _problem(device, tokens, experts, hidden, k)
    weights = jax.device_put(jax.random.normal(jax.random.key(7), x.shape), device)

    def loss(x, probs, row_id_map):
        rows, row_probs = moe.permute(x, row_id_map, probs, tokens * k)
        return jnp.sum(moe.unpermute(rows * 1.5, row_id_map, probs) * weights) + jnp.sum(
            row_probs ** 2)

    def loss_reference(x, probs):
        rows, row_probs = moe.permute_reference(x, mask, probs, tokens * k)
        return jnp.sum(moe.unpermute_reference(rows * 1.5, mask, probs) * weights) + jnp.sum(
            row_probs ** 2)

    row_id_map = jax.jit(moe.make_row_id_map)(mask)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, probs, row_id_map)
    expected = jax.jit(jax.grad(loss_reference, argnums=(0, 1)))(x, probs)
    for got, want in zip(grads, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
