"""Mixture-of-experts token permutation: JAX primitives whose lowerings call Triton kernels.

What a library such as TransformerEngine ships, written from its description:
1. From a [tokens, experts] routing mask build the row-id map, in three kernels: a cumulative sum
   of each expert's mask over blocks of tokens, the global offsets of those blocks, then per token
   its destinations, sorted, with their experts and count. Row t of the map (2 * experts + 1
   int32s) holds its n destination rows, then their experts, then n; unused entries are -1.
2. Permute: copy each token (and its routing probability) to its destination rows, expert-major.
3. Unpermute: each token is the sum of its rows, weighted by the merging probabilities.

Each step is a primitive of this module, registered for cuda, rocm and cpu, whose lowering calls
`jax_triton_rocm.triton_call_lowering` (on the CPU the kernels run in Triton's interpreter).
`permute` and `unpermute` have `custom_vjp`s: permute's gradient is unpermute, and unpermute's is a
permute scaled by the merging probabilities.

Run `python examples/moe_permute.py` to check every step against the jnp reference (on the GPU if
there is one, else on the CPU).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl
from jax.extend.core import Primitive
from jax.interpreters import mlir

from jax_triton_rocm import triton_call_lowering

BLOCK_TOKENS = 1024  # tokens per program of the row-id-map passes
PLATFORMS = ("cuda", "rocm", "cpu")


def _primitive(name, abstract_eval, lowering):
    """A primitive with several results, lowered by `lowering` on every platform."""
    prim = Primitive(name)
    prim.multiple_results = True
    # Outside jit, run the primitive as a one-equation jitted computation.
    prim.def_impl(lambda *args, **params: jax.jit(functools.partial(prim.bind, **params))(*args))
    prim.def_abstract_eval(abstract_eval)
    for platform in PLATFORMS:
        mlir.register_lowering(prim, lowering, platform=platform)
    return prim


def _map_width(num_experts):
    return 2 * num_experts + 1


# 1. The row-id map.

@triton.jit
def _row_id_map_pass_1(routing_map_ptr, row_id_map_ptr, workspace_ptr, num_tokens,
                       num_experts: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    # Program (expert, token block): each routed token's 1-based rank within the block, and the
    # block's count.
    expert = tl.program_id(0)
    block = tl.program_id(1)
    tokens = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_range = tokens < num_tokens
    routed = tl.load(routing_map_ptr + tokens * num_experts + expert, mask=in_range,
                     other=0).to(tl.int32)
    rank = tl.cumsum(routed, 0) * routed
    tl.store(row_id_map_ptr + tokens * (2 * num_experts + 1) + expert, rank, mask=in_range)
    tl.store(workspace_ptr + expert * tl.num_programs(1) + block, tl.sum(routed, 0))


@triton.jit
def _row_id_map_pass_2(row_id_map_ptr, workspace_ptr, num_tokens, num_experts: tl.constexpr,
                       WORKSPACE_LOAD_WIDTH: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    # In place: ranks become destination rows, offset by every block before this one in
    # expert-major order.
    expert = tl.program_id(0)
    block = tl.program_id(1)
    n_counts = num_experts * tl.num_programs(1)
    index = tl.arange(0, WORKSPACE_LOAD_WIDTH)
    counts = tl.load(workspace_ptr + index, mask=index < n_counts, other=0)
    before = tl.sum(tl.where(index < expert * tl.num_programs(1) + block, counts, 0), 0)
    tokens = block * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_range = tokens < num_tokens
    where = row_id_map_ptr + tokens * (2 * num_experts + 1) + expert
    rank = tl.load(where, mask=in_range, other=0)
    tl.store(where, tl.where(rank > 0, rank - 1 + before, -1), mask=in_range)


@triton.jit
def _row_id_map_pass_3(row_id_map_ptr, num_experts: tl.constexpr, LOAD_SIZE: tl.constexpr):
    # In place, one program per token: its destinations sorted (with their experts), then count.
    row = row_id_map_ptr + tl.program_id(0) * (2 * num_experts + 1)
    experts = tl.arange(0, LOAD_SIZE)
    valid = experts < num_experts
    dest = tl.load(row + experts, mask=valid, other=-1)
    # Sort one key holding both destination and expert; unrouted entries sort last.
    unrouted = 2**62
    key = tl.where(dest >= 0, dest.to(tl.int64) * LOAD_SIZE + experts, unrouted)
    key = tl.sort(key, 0)
    count = tl.sum((dest >= 0).to(tl.int32), 0)
    routed = experts < count
    tl.store(row + experts, tl.where(routed, key // LOAD_SIZE, -1).to(tl.int32), mask=valid)
    tl.store(row + num_experts + experts, tl.where(routed, key % LOAD_SIZE, -1).to(tl.int32),
             mask=valid)
    tl.store(row + 2 * num_experts, count)


def _pass_1_abstract(routing_map, *, block_size):
    tokens, experts = routing_map.shape
    blocks = triton.cdiv(tokens, block_size)
    return [jax.core.ShapedArray((tokens, _map_width(experts)), jnp.int32),
            jax.core.ShapedArray((experts * blocks,), jnp.int32)]


def _pass_1_lowering(ctx, routing_map, *, block_size):
    tokens, experts = ctx.avals_in[0].shape
    return triton_call_lowering(
        ctx, _row_id_map_pass_1, routing_map, grid=(experts, triton.cdiv(tokens, block_size)),
        constexprs={"num_tokens": tokens, "num_experts": experts, "BLOCK_SIZE": block_size})


def _pass_2_lowering(ctx, row_id_map, workspace, *, block_size):
    tokens, width = ctx.avals_in[0].shape
    experts = width // 2
    return triton_call_lowering(
        ctx, _row_id_map_pass_2, row_id_map, workspace,
        grid=(experts, triton.cdiv(tokens, block_size)),
        input_output_aliases={0: 0},  # the kernel writes through row_id_map_ptr
        constexprs={"num_tokens": tokens, "num_experts": experts, "BLOCK_SIZE": block_size,
                    "WORKSPACE_LOAD_WIDTH": triton.next_power_of_2(ctx.avals_in[1].size)})


def _pass_3_lowering(ctx, row_id_map):
    tokens, width = ctx.avals_in[0].shape
    experts = width // 2
    return triton_call_lowering(
        ctx, _row_id_map_pass_3, row_id_map, grid=(tokens,), input_output_aliases={0: 0},
        constexprs={"num_experts": experts, "LOAD_SIZE": triton.next_power_of_2(experts)})


row_id_map_pass_1_p = _primitive("moe_row_id_map_pass_1", _pass_1_abstract, _pass_1_lowering)
row_id_map_pass_2_p = _primitive("moe_row_id_map_pass_2", lambda m, w, **_: [m],
                                 _pass_2_lowering)
row_id_map_pass_3_p = _primitive("moe_row_id_map_pass_3", lambda m: [m], _pass_3_lowering)


def make_row_id_map(routing_map, block_size=BLOCK_TOKENS):
    """The [tokens, 2 * experts + 1] int32 row-id map of a [tokens, experts] 0/1 routing mask;
    `block_size` tokens (a power of two) per program of the first two passes."""
    row_id_map, workspace = row_id_map_pass_1_p.bind(routing_map.astype(jnp.int32),
                                                     block_size=block_size)
    (row_id_map,) = row_id_map_pass_2_p.bind(row_id_map, workspace, block_size=block_size)
    return row_id_map_pass_3_p.bind(row_id_map)[0]


# 2 and 3. Permute and unpermute, autotuned over the block of the hidden dimension.

_HIDDEN_BLOCKS = [triton.Config({"BLOCK_SIZE": size}) for size in (128, 256, 512, 1024)]


@triton.autotune(configs=_HIDDEN_BLOCKS, key=["hidden_size"])
@triton.jit
def _permute_kernel(input_ptr, row_id_map_ptr, probs_ptr, output_ptr, permuted_probs_ptr,
                    num_experts: tl.constexpr, hidden_size: tl.constexpr, SCALE: tl.constexpr,
                    BLOCK_SIZE: tl.constexpr):
    # Program (token, hidden block): copies the block to each of the token's rows.
    token = tl.program_id(0)
    hidden = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_range = hidden < hidden_size
    x = tl.load(input_ptr + token * hidden_size + hidden, mask=in_range)
    row = row_id_map_ptr + token * (2 * num_experts + 1)
    for i in range(tl.load(row + 2 * num_experts)):
        dest = tl.load(row + i)
        prob = tl.load(probs_ptr + token * num_experts + tl.load(row + num_experts + i))
        value = (x.to(tl.float32) * prob).to(x.dtype) if SCALE else x
        tl.store(output_ptr + dest * hidden_size + hidden, value, mask=in_range)
        if tl.program_id(1) == 0:
            tl.store(permuted_probs_ptr + dest, prob)


@triton.autotune(configs=_HIDDEN_BLOCKS, key=["hidden_size"])
@triton.jit
def _unpermute_kernel(input_ptr, row_id_map_ptr, merging_probs_ptr, output_ptr,
                      num_experts: tl.constexpr, hidden_size: tl.constexpr,
                      WITH_MERGING_PROBS: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    # Program (token, hidden block): the sum of the token's rows, weighted, in float32.
    token = tl.program_id(0)
    hidden = tl.program_id(1) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    in_range = hidden < hidden_size
    row = row_id_map_ptr + token * (2 * num_experts + 1)
    total = tl.zeros((BLOCK_SIZE,), tl.float32)
    for i in range(tl.load(row + 2 * num_experts)):
        dest = tl.load(row + i)
        value = tl.load(input_ptr + dest * hidden_size + hidden, mask=in_range).to(tl.float32)
        if WITH_MERGING_PROBS:
            expert = tl.load(row + num_experts + i)
            value = value * tl.load(merging_probs_ptr + token * num_experts + expert)
        total += value
    tl.store(output_ptr + token * hidden_size + hidden,
             total.to(output_ptr.dtype.element_ty), mask=in_range)


def _hidden_grid(tokens, hidden):
    return lambda meta: (tokens, triton.cdiv(hidden, meta["BLOCK_SIZE"]))


def _permute_abstract(x, row_id_map, probs, *, num_out_tokens, scale):
    del row_id_map, probs, scale
    return [jax.core.ShapedArray((num_out_tokens, x.shape[1]), x.dtype),
            jax.core.ShapedArray((num_out_tokens,), jnp.float32)]


def _permute_lowering(ctx, x, row_id_map, probs, *, num_out_tokens, scale):
    del num_out_tokens
    tokens, hidden = ctx.avals_in[0].shape
    return triton_call_lowering(
        ctx, _permute_kernel, x, row_id_map, probs, grid=_hidden_grid(tokens, hidden),
        # Rows no token is routed to (fewer routed pairs than num_out_tokens) read as zeros.
        zeroed_outputs=(0, 1),
        constexprs={"num_experts": ctx.avals_in[2].shape[1], "hidden_size": hidden,
                    "SCALE": scale})


def _unpermute_abstract(permuted, row_id_map, merging_probs, *, with_merging_probs):
    del row_id_map, with_merging_probs
    return [jax.core.ShapedArray((merging_probs.shape[0], permuted.shape[1]), permuted.dtype)]


def _unpermute_lowering(ctx, permuted, row_id_map, merging_probs, *, with_merging_probs):
    hidden = ctx.avals_in[0].shape[1]
    tokens, experts = ctx.avals_in[2].shape
    return triton_call_lowering(
        ctx, _unpermute_kernel, permuted, row_id_map, merging_probs,
        grid=_hidden_grid(tokens, hidden),
        constexprs={"num_experts": experts, "hidden_size": hidden,
                    "WITH_MERGING_PROBS": with_merging_probs})


permute_p = _primitive("moe_permute", _permute_abstract, _permute_lowering)
unpermute_p = _primitive("moe_unpermute", _unpermute_abstract, _unpermute_lowering)


def _routed(row_id_map, num_experts):
    """Per token and slot: destination, expert (both 0 where unused) and whether it is used."""
    dest = row_id_map[:, :num_experts]
    used = dest >= 0
    return jnp.where(used, dest, 0), jnp.where(used, row_id_map[:, num_experts:-1], 0), used


def _scatter_per_expert(values, experts, used, shape):
    tokens = jnp.arange(shape[0])[:, None]
    return jnp.zeros(shape, jnp.float32).at[tokens, experts].add(jnp.where(used, values, 0))


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def permute(x, row_id_map, probs, num_out_tokens):
    """Tokens [T, H] and their probabilities [T, E] float32 to expert-major rows.

    Returns ([num_out_tokens, H], [num_out_tokens] float32): row r holds the token routed to it,
    and its probability for that expert; num_out_tokens is the number of routed pairs (T * k
    under top-k routing); rows beyond them are zero.
    """
    return tuple(permute_p.bind(x, row_id_map, probs, num_out_tokens=num_out_tokens,
                                scale=False))


def _permute_fwd(x, row_id_map, probs, num_out_tokens):
    return permute(x, row_id_map, probs, num_out_tokens), (row_id_map, probs)


def _permute_bwd(num_out_tokens, residuals, cotangents):
    del num_out_tokens
    row_id_map, probs = residuals
    d_rows, d_probs = cotangents
    (d_x,) = unpermute_p.bind(d_rows, row_id_map, probs, with_merging_probs=False)
    dest, experts, used = _routed(row_id_map, probs.shape[1])
    return d_x, None, _scatter_per_expert(d_probs[dest], experts, used, probs.shape)


permute.defvjp(_permute_fwd, _permute_bwd)


@jax.custom_vjp
def unpermute(rows, row_id_map, merging_probs):
    """Expert-major rows back to tokens [T, H]: each token the sum of its rows weighted by
    `merging_probs` [T, E] float32."""
    return unpermute_p.bind(rows, row_id_map, merging_probs, with_merging_probs=True)[0]


def _unpermute_fwd(rows, row_id_map, merging_probs):
    return unpermute(rows, row_id_map, merging_probs), (rows, row_id_map, merging_probs)


def _unpermute_bwd(residuals, d_out):
    rows, row_id_map, merging_probs = residuals
    d_rows, _ = permute_p.bind(d_out, row_id_map, merging_probs, num_out_tokens=rows.shape[0],
                               scale=True)
    dest, experts, used = _routed(row_id_map, merging_probs.shape[1])
    dots = jnp.einsum("th,teh->te", d_out.astype(jnp.float32), rows[dest].astype(jnp.float32))
    return d_rows, None, _scatter_per_expert(dots, experts, used, merging_probs.shape)


unpermute.defvjp(_unpermute_fwd, _unpermute_bwd)


# The jnp reference of each step.

def destinations_reference(routing_map):
    """[T, E]: the destination row of each routed (token, expert) pair, -1 where not routed."""
    routed = routing_map.astype(jnp.int32)
    counts = routed.sum(axis=0)
    offsets = jnp.cumsum(counts) - counts
    return jnp.where(routed > 0, jnp.cumsum(routed, axis=0) - 1 + offsets, -1)


def make_row_id_map_reference(routing_map):
    dest = destinations_reference(routing_map)
    experts = jnp.arange(dest.shape[1])
    key = jnp.sort(jnp.where(dest >= 0, dest * dest.shape[1] + experts, jnp.iinfo(jnp.int32).max),
                   axis=1)
    used = key != jnp.iinfo(jnp.int32).max
    return jnp.concatenate([jnp.where(used, key // dest.shape[1], -1),
                            jnp.where(used, key % dest.shape[1], -1),
                            used.sum(axis=1, keepdims=True, dtype=jnp.int32)], axis=1)


def permute_reference(x, routing_map, probs, num_out_tokens):
    dest = destinations_reference(routing_map)
    tokens = jnp.broadcast_to(jnp.arange(x.shape[0])[:, None], dest.shape)
    target = jnp.where(dest >= 0, dest, num_out_tokens)  # out of range: dropped
    rows = jnp.zeros((num_out_tokens, x.shape[1]), x.dtype).at[target].set(x[tokens], mode="drop")
    permuted_probs = jnp.zeros((num_out_tokens,), jnp.float32).at[target].set(probs, mode="drop")
    return rows, permuted_probs


def unpermute_reference(rows, routing_map, merging_probs):
    dest = destinations_reference(routing_map)
    weights = jnp.where(dest >= 0, merging_probs, 0)
    gathered = rows[jnp.maximum(dest, 0)].astype(jnp.float32)
    return jnp.einsum("te,teh->th", weights, gathered).astype(rows.dtype)


def top_k_routing(key, tokens, experts, k):
    """A [T, E] 0/1 mask with k experts per token, and softmax probabilities [T, E] float32."""
    logits = jax.random.normal(key, (tokens, experts), jnp.float32)
    _, chosen = jax.lax.top_k(logits, k)
    mask = jnp.zeros((tokens, experts), jnp.int32).at[jnp.arange(tokens)[:, None], chosen].set(1)
    return mask, jax.nn.softmax(logits, axis=-1)


def main() -> None:
    tokens, experts, hidden, k = 300, 8, 96, 2
    mask, probs = top_k_routing(jax.random.key(0), tokens, experts, k)
    x = jax.random.normal(jax.random.key(1), (tokens, hidden), jnp.float32)
    row_id_map = jax.jit(make_row_id_map)(mask)
    np.testing.assert_array_equal(row_id_map, make_row_id_map_reference(mask))
    rows, row_probs = jax.jit(permute, static_argnums=3)(x, row_id_map, probs, tokens * k)
    expected_rows, expected_probs = permute_reference(x, mask, probs, tokens * k)
    np.testing.assert_allclose(rows, expected_rows)
    np.testing.assert_allclose(row_probs, expected_probs)
    out = jax.jit(unpermute)(rows, row_id_map, probs)
    np.testing.assert_allclose(out, unpermute_reference(rows, mask, probs), rtol=1e-5, atol=1e-6)
    print(f"moe_permute: {tokens} tokens, {experts} experts, top-{k}, hidden {hidden} on "
          f"{jax.devices()[0].platform}: row-id map, permute and unpermute match jnp")


if __name__ == "__main__":
    main()
