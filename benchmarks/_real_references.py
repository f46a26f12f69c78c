"""The jax.numpy references of `real_kernels.py`'s kernels: what each kernel's outputs must be,
computed independently of the kernel where JAX can (the layer-norm backward is JAX's own
gradient of the forward pass; dropout's mask is Philox as Triton's `tl.rand` computes it).

Each takes (sizes, step, *arrays), as the case's calls do (`_real_cases.py`), and returns the
outputs in the same order.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

HIGHEST = jax.lax.Precision.HIGHEST
PHILOX_ROUND = (0xD2511F53, 0xCD9E8D57)
PHILOX_KEY = (0x9E3779B9, 0xBB67AE85)
UNIFORM_SCALE = 4.6566127342e-10  # Triton's: the largest with MAX_INT * scale < 1


def _f32(*arrays):
    return [a.astype(jnp.float32) for a in arrays]


def softmax_reference(s, step, x):
    return (jax.nn.softmax(x, axis=-1),)


def layer_norm(x, w, b, eps):
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * w + b


def layer_norm_fwd_reference(s, step, x, w, b):
    xf, wf, bf = _f32(x, w, b)
    mean = xf.mean(axis=-1)
    rstd = jax.lax.rsqrt(((xf - mean[:, None]) ** 2).mean(axis=-1) + s["eps"])
    return layer_norm(xf, wf, bf, s["eps"]).astype(x.dtype), mean, rstd


def layer_norm_bwd_reference(s, step, dy, x, w, mean, rstd):
    # JAX's own gradient of the forward pass (`mean` and `rstd` are the kernel's inputs only).
    xf, wf, dyf = _f32(x, w, dy)
    _, vjp = jax.vjp(functools.partial(layer_norm, eps=s["eps"]), xf, wf, jnp.zeros_like(wf))
    dx, dw, db = vjp(dyf)
    return dx.astype(dy.dtype), dw.astype(w.dtype), db.astype(w.dtype)


def _umulhi(a, b):
    """The high 32 bits of the 64-bit product of uint32 a and b, in 16-bit halves (JAX has no
    uint64 unless x64 is on)."""
    a_lo, a_hi, b_lo, b_hi = a & 0xFFFF, a >> 16, b & 0xFFFF, b >> 16
    lo, mid1, mid2 = a_lo * b_lo, a_hi * b_lo, a_lo * b_hi
    carry = ((lo >> 16) + (mid1 & 0xFFFF) + (mid2 & 0xFFFF)) >> 16
    return a_hi * b_hi + (mid1 >> 16) + (mid2 >> 16) + carry


def philox_uniform(seed: int, offsets):
    """`tl.rand(seed, offsets)` for int32 offsets: Philox 4x32 with 10 rounds, as Triton's
    `triton.language.random` computes it."""
    u32 = functools.partial(jnp.asarray, dtype=jnp.uint32)
    c0, c1 = offsets.astype(jnp.uint32), jnp.zeros(offsets.shape, jnp.uint32)
    c2, c3 = c1, c1
    k0, k1 = u32(seed & 0xFFFFFFFF), u32(seed >> 32)
    round_a, round_b = u32(PHILOX_ROUND[0]), u32(PHILOX_ROUND[1])
    for _ in range(10):
        c0, c1, c2, c3 = (_umulhi(round_b, c2) ^ c1 ^ k0, round_b * c2,
                          _umulhi(round_a, c0) ^ c3 ^ k1, round_a * c0)
        k0, k1 = k0 + u32(PHILOX_KEY[0]), k1 + u32(PHILOX_KEY[1])
    signed = jax.lax.bitcast_convert_type(c0, jnp.int32)
    signed = jnp.where(signed < 0, ~signed, signed)
    return signed.astype(jnp.float32) * jnp.float32(UNIFORM_SCALE)


def dropout_reference(s, step, x):
    offsets = jnp.arange(x.size, dtype=jnp.int32).reshape(x.shape)
    keep = philox_uniform(s["seed"] + step, offsets) > s["p"]
    return (jnp.where(keep, x / jnp.float32(1 - s["p"]), 0.0),)


def matmul_reference(s, step, a, b):
    af, bf = _f32(a, b)
    return (jnp.matmul(af, bf, precision=HIGHEST).astype(a.dtype),)


def matmul_tma_reference(s, step, a, b_t):
    return matmul_reference(s, step, a, b_t.T)


def attention_reference(s, step, q, k, v):
    z, h, n_ctx, _ = q.shape
    qf, kf, vf = _f32(q, k, v)
    scores = jnp.einsum("zhmd,zhnd->zhmn", qf, kf, precision=HIGHEST) * s["sm_scale"]
    if s["causal"]:
        scores = jnp.where(jnp.tril(jnp.ones((n_ctx, n_ctx), bool)), scores, -jnp.inf)
    lse = jax.nn.logsumexp(scores, axis=-1)
    weights = jnp.exp(scores - lse[..., None])
    out = jnp.einsum("zhmn,zhnd->zhmd", weights, vf, precision=HIGHEST)
    return out.astype(q.dtype), lse.reshape(z * h, n_ctx)
