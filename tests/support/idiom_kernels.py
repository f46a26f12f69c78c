"""Kernels written with the idioms of Triton's own tutorials, and their calls (issue 27): host
descriptors whose block shapes each autotune config's `pre_hook` sets, an attention forward whose
configs are pruned on a keyword scalar, a softmax with a `num_stages` parameter, and an add whose
output sits among its inputs. Shared by the CPU tests (test_idioms.py) and the GPU ones."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor as TritonDescriptor

import jax_triton_rocm as jtr


def set_block_shapes(nargs):
    """A config's pre_hook, as Hopper tutorials write it: each descriptor's block from the
    config's tiles; a call without descriptors is left alone."""
    if not isinstance(nargs["a_desc"], TritonDescriptor):
        return
    nargs["a_desc"].block_shape = [nargs["BLOCK_M"], nargs["BLOCK_K"]]
    nargs["b_desc"].block_shape = [nargs["BLOCK_K"], nargs["BLOCK_N"]]


MATMUL_TILES = [(64, 64, 32), (128, 64, 64), (32, 32, 64)]  # TMA boxes as wide as the blocks
MATMUL_CONFIGS = [
    triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k}, num_warps=4, num_stages=3,
                  pre_hook=set_block_shapes) for m, n, k in MATMUL_TILES]


@triton.autotune(configs=MATMUL_CONFIGS, key=["M", "N", "K"])
@triton.jit
def desc_matmul_kernel(a_desc, b_desc, c_ptr, M, N, K, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """c = a @ b, reading a and b through host descriptors in tiles of the config's blocks."""
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    acc = tl.zeros((BLOCK_M, BLOCK_N), tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc,
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def desc_matmul(a, b, kernel=desc_matmul_kernel):
    """a @ b in float32; the descriptors start with a placeholder block, as the tutorials' do."""
    (m, k), n = a.shape, b.shape[1]
    return jtr.triton_call(
        jtr.TensorDescriptor.from_array(a, [1, 1]), jtr.TensorDescriptor.from_array(b, [1, 1]),
        kernel=kernel, out_type=jax.ShapeDtypeStruct((m, n), jnp.float32), M=m, N=n, K=k,
        grid=lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"])))


def prune_invalid_configs(configs, named_args, **kwargs):
    """The attention tutorial's prune: no query block longer than the sequence (N_CTX comes by
    keyword, so in kwargs)."""
    return [c for c in configs if c.kwargs["BLOCK_M"] <= kwargs["N_CTX"]]


ATTENTION_CONFIGS = [triton.Config({"BLOCK_M": m, "BLOCK_N": n}, num_warps=4)
                     for m, n in [(16, 16), (32, 16), (64, 32), (128, 32)]]


@triton.autotune(configs=ATTENTION_CONFIGS, key=["N_CTX", "HEAD_DIM"],
                 prune_configs_by={"early_config_prune": prune_invalid_configs})
@triton.jit
def attention_kernel(q_ptr, k_ptr, v_ptr, sm_scale, out_ptr, N_CTX, HEAD_DIM: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """out = softmax(q kᵀ sm_scale) v for each of the (batch × head, N_CTX, HEAD_DIM) blocks of
    the contiguous q, k, v; online softmax over key blocks of BLOCK_N."""
    base = tl.program_id(1) * N_CTX * HEAD_DIM
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    q = tl.load(q_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :],
                mask=rows[:, None] < N_CTX, other=0.0)
    m_i = tl.full((BLOCK_M,), -float("inf"), tl.float32)
    l_i = tl.zeros((BLOCK_M,), tl.float32)
    acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        cols = start + tl.arange(0, BLOCK_N)
        kv = base + cols[:, None] * HEAD_DIM + dims[None, :]
        k = tl.load(k_ptr + kv, mask=cols[:, None] < N_CTX, other=0.0)
        v = tl.load(v_ptr + kv, mask=cols[:, None] < N_CTX, other=0.0)
        s = tl.where(cols[None, :] < N_CTX, tl.dot(q, tl.trans(k)) * sm_scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(out_ptr + base + rows[:, None] * HEAD_DIM + dims[None, :],
             (acc / l_i[:, None]).to(out_ptr.dtype.element_ty), mask=rows[:, None] < N_CTX)


def attention(q, k, v, sm_scale, kernel=attention_kernel):
    """Attention over q, k, v of shape (batch × head, n_ctx, head_dim), launched as the tutorial
    launches it: the sequence length by keyword."""
    bh, n_ctx, head_dim = q.shape
    return jtr.triton_call(q, k, v, sm_scale, kernel=kernel, out_type=q, N_CTX=n_ctx,
                           HEAD_DIM=head_dim,
                           grid=lambda meta: (triton.cdiv(meta["N_CTX"], meta["BLOCK_M"]), bh))


def attention_reference(q, k, v, sm_scale):
    scores = jnp.einsum("bqd,bkd->bqk", q.astype(jnp.float32), k.astype(jnp.float32))
    return jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores * sm_scale, axis=-1),
                      v.astype(jnp.float32))


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK: tl.constexpr, num_stages: tl.constexpr):
    """Row softmax, a persistent grid stepping over the rows in a pipelined loop of
    `num_stages` (the tutorial's parameter, named like triton_call's own argument)."""
    step = tl.num_programs(0)
    for row in tl.range(tl.program_id(0), n_rows, step, num_stages=num_stages):
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=cols < n_cols, other=-float("inf"))
        numerator = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * out_row_stride + cols, numerator / tl.sum(numerator, axis=0),
                 mask=cols < n_cols)


def softmax(x, num_stages: int = 2, programs: int = 4, **call):
    """Softmax over x's rows; the output's pointer comes first, the input by keyword."""
    n_rows, n_cols = x.shape
    return jtr.triton_call(
        kernel=softmax_kernel, out_type=x, grid=(programs,), in_ptr=x, in_row_stride=n_cols,
        out_row_stride=n_cols, n_rows=n_rows, n_cols=n_cols,
        BLOCK=triton.next_power_of_2(n_cols), constexprs={"num_stages": num_stages}, **call)


@triton.jit
def middle_out_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """out = x + y, with the output's pointer between the inputs and the length."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + tl.load(y_ptr + offsets, mask=mask), mask=mask)
