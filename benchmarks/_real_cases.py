"""The cases of `real_kernels.py`: each kernel of `_real_kernels.py` with its sizes, its inputs,
its call through the package, its launch by Triton's launcher from PyTorch, its jax.numpy
reference (`_real_references.py`) and the tolerance the comparison allows.

Every call function takes (sizes, step, *state, *consts) and returns a tuple of outputs whose
first is the next step's state (the chain feeds it back) and whose others the chain keeps, so
that neither XLA nor JAX may drop a call. `step` is the call's index in the chain (dropout
seeds with it). The package calls are written as a user of the package writes them: the
kernel's own parameter order, inputs by keyword where outputs come first, runtime scalars as
Python scalars; the PyTorch launches as Triton's own users write them, `kernel[grid](...)`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import triton

import jax_triton_rocm as jtr

import _real_kernels as K
import _real_references as R


@dataclasses.dataclass(frozen=True)
class Case:
    """One kernel (or, for the layer-norm backward, the two launches of one step)."""

    name: str
    title: str  # what it computes, at the sizes measured on the GPU
    full: dict  # sizes and launch settings measured on the GPU
    small: dict  # the same at sizes Triton's interpreter runs in about a second
    inputs: Callable  # (sizes, key) -> (state, consts): jax arrays
    package: Callable  # (sizes, step, *arrays) -> outputs, through jtr.triton_call
    torch: Callable  # (sizes, step, *tensors) -> outputs, by Triton's launcher from PyTorch
    reference: Callable  # (sizes, step, *arrays) -> outputs, in jax.numpy
    tolerance: tuple[float, float]  # (atol, rtol), outputs compared as float32
    needs_tma: bool = False  # runs for real on an NVIDIA sm_90+ GPU only


def _out(shape, dtype) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype))


def _torch():
    import torch

    return torch


def _normal(key, shape, dtype, scale=1.0, shift=0.0):
    return (shift + scale * jax.random.normal(key, shape, jnp.float32)).astype(dtype)


# Softmax: output pointer first, a persistent grid.

def softmax_inputs(s, key):
    return (_normal(key, (s["rows"], s["cols"]), jnp.float32),), ()


def softmax_package(s, step, x):
    rows, cols = x.shape
    out = jtr.triton_call(in_ptr=x, in_row_stride=cols, out_row_stride=cols, n_rows=rows,
                          n_cols=cols, kernel=K.softmax_kernel, out_type=_out(x.shape, x.dtype),
                          grid=(min(rows, s["programs"]),), num_warps=s["num_warps"],
                          num_stages=s["num_stages"], BLOCK=s["BLOCK"],
                          NUM_STAGES=s["num_stages"])
    return (out,)


def softmax_torch(s, step, x):
    out = _torch().empty_like(x)
    K.softmax_kernel[(min(x.shape[0], s["programs"]),)](
        out, x, x.stride(0), out.stride(0), x.shape[0], x.shape[1], BLOCK=s["BLOCK"],
        NUM_STAGES=s["num_stages"], num_warps=s["num_warps"], num_stages=s["num_stages"])
    return (out,)


# Layer norm forward: outputs in the middle, runtime stride, N and eps.

def layer_norm_fwd_inputs(s, key):
    kx, kw, kb = jax.random.split(key, 3)
    n = s["N"]
    return ((_normal(kx, (s["M"], n), jnp.float16),),
            (_normal(kw, (n,), jnp.float16, 0.1, 1.0), _normal(kb, (n,), jnp.float16, 0.1)))


def layer_norm_fwd_package(s, step, x, w, b):
    m, n = x.shape
    return jtr.triton_call(x, W=w, B=b, stride=n, N=n, eps=s["eps"],
                           kernel=K.layer_norm_fwd_kernel,
                           out_type=(_out(x.shape, x.dtype), _out((m,), jnp.float32),
                                     _out((m,), jnp.float32)),
                           grid=(m,), num_warps=s["num_warps"], num_stages=s["num_stages"],
                           BLOCK_SIZE=s["BLOCK"])


def layer_norm_fwd_torch(s, step, x, w, b):
    torch = _torch()
    m, n = x.shape
    y = torch.empty_like(x)
    mean = torch.empty((m,), dtype=torch.float32, device=x.device)
    rstd = torch.empty((m,), dtype=torch.float32, device=x.device)
    K.layer_norm_fwd_kernel[(m,)](x, y, w, b, mean, rstd, x.stride(0), n, s["eps"],
                                  BLOCK_SIZE=s["BLOCK"], num_warps=s["num_warps"],
                                  num_stages=s["num_stages"])
    return y, mean, rstd


# Layer norm backward: dx with dw, db partial sums under locks, then their reduction.

def layer_norm_bwd_inputs(s, key):
    kdy, kx, kw = jax.random.split(key, 3)
    m, n = s["M"], s["N"]
    x = _normal(kx, (m, n), jnp.float16)
    xf = x.astype(jnp.float32)
    mean = xf.mean(axis=-1)
    rstd = jax.lax.rsqrt(((xf - mean[:, None]) ** 2).mean(axis=-1) + s["eps"])
    return ((_normal(kdy, (m, n), jnp.float16),),
            (x, _normal(kw, (n,), jnp.float16, 0.1, 1.0), mean, rstd))


def layer_norm_bwd_package(s, step, dy, x, w, mean, rstd):
    m, n = x.shape
    group = s["GROUP"]
    dx, dw_partial, db_partial, _ = jtr.triton_call(
        DY=dy, X=x, W=w, Mean=mean, Rstd=rstd, stride=n, N=n,
        kernel=K.layer_norm_bwd_dx_kernel,
        out_type=(_out(x.shape, x.dtype), _out((group, n), jnp.float32),
                  _out((group, n), jnp.float32), _out((2 * group,), jnp.int32)),
        zeroed_outputs=(3,), grid=(m,), num_warps=s["num_warps"], num_stages=s["num_stages"],
        GROUP_SIZE_M=group, BLOCK_SIZE_N=s["BLOCK"])
    dw, db = jtr.triton_call(dw_partial, db_partial, M=group, N=n,
                             kernel=K.layer_norm_bwd_dwdb_kernel,
                             out_type=(_out(w.shape, w.dtype), _out(w.shape, w.dtype)),
                             grid=(triton.cdiv(n, s["BLOCK_N"]),),
                             num_warps=s["dwdb_warps"], num_stages=s["num_stages"],
                             BLOCK_SIZE_M=s["BLOCK_M"], BLOCK_SIZE_N=s["BLOCK_N"])
    return dx, dw, db


def layer_norm_bwd_torch(s, step, dy, x, w, mean, rstd):
    torch = _torch()
    m, n = x.shape
    group = s["GROUP"]
    dx = torch.empty_like(dy)
    dw_partial = torch.empty((group, n), dtype=torch.float32, device=x.device)
    db_partial = torch.empty((group, n), dtype=torch.float32, device=x.device)
    lock = torch.zeros((2 * group,), dtype=torch.int32, device=x.device)
    K.layer_norm_bwd_dx_kernel[(m,)](dx, dy, dw_partial, db_partial, x, w, mean, rstd, lock,
                                     x.stride(0), n, GROUP_SIZE_M=group, BLOCK_SIZE_N=s["BLOCK"],
                                     num_warps=s["num_warps"], num_stages=s["num_stages"])
    dw, db = torch.empty_like(w), torch.empty_like(w)
    K.layer_norm_bwd_dwdb_kernel[(triton.cdiv(n, s["BLOCK_N"]),)](
        dw_partial, db_partial, dw, db, group, n, BLOCK_SIZE_M=s["BLOCK_M"],
        BLOCK_SIZE_N=s["BLOCK_N"], num_warps=s["dwdb_warps"], num_stages=s["num_stages"])
    return dx, dw, db


# Dropout: seeded (the step's seed), Philox uniforms from tl.rand.


def dropout_inputs(s, key):
    return (_normal(key, s["shape"], jnp.float32),), ()


def dropout_package(s, step, x):
    out = jtr.triton_call(x, n_elements=x.size, p=s["p"], seed=s["seed"] + step,
                          kernel=K.dropout_kernel, out_type=_out(x.shape, x.dtype),
                          grid=(triton.cdiv(x.size, s["BLOCK"]),), num_warps=s["num_warps"],
                          num_stages=s["num_stages"], BLOCK=s["BLOCK"])
    return (out,)


def dropout_torch(s, step, x):
    out = _torch().empty_like(x)
    K.dropout_kernel[(triton.cdiv(x.numel(), s["BLOCK"]),)](
        x, out, x.numel(), s["p"], s["seed"] + step, BLOCK=s["BLOCK"], num_warps=s["num_warps"],
        num_stages=s["num_stages"])
    return (out,)


# Matmul: fp16, blocked, grouped tiles; and the same through host-side tensor descriptors.

def matmul_inputs(s, key):
    ka, kb = jax.random.split(key)
    m, n, k = s["M"], s["N"], s["K"]
    b_shape = (n, k) if s.get("b_transposed") else (k, n)
    return ((_normal(ka, (m, k), jnp.float16),),
            (_normal(kb, b_shape, jnp.float16, k ** -0.5),))


def _matmul_grid(s, m, n):
    return (triton.cdiv(m, s["BLOCK_M"]) * triton.cdiv(n, s["BLOCK_N"]),)


def _tiles(s):
    return dict(BLOCK_M=s["BLOCK_M"], BLOCK_N=s["BLOCK_N"], BLOCK_K=s["BLOCK_K"],
                GROUP_M=s["GROUP_M"], num_warps=s["num_warps"], num_stages=s["num_stages"])


def matmul_package(s, step, a, b):
    (m, k), n = a.shape, b.shape[1]
    out = jtr.triton_call(a, b, M=m, N=n, K=k, stride_am=k, stride_ak=1, stride_bk=n,
                          stride_bn=1, stride_cm=n, stride_cn=1, kernel=K.matmul_kernel,
                          out_type=_out((m, n), a.dtype), grid=_matmul_grid(s, m, n),
                          **_tiles(s))
    return (out,)


def matmul_torch(s, step, a, b):
    (m, k), n = a.shape, b.shape[1]
    c = _torch().empty((m, n), dtype=a.dtype, device=a.device)
    K.matmul_kernel[_matmul_grid(s, m, n)](a, b, c, m, n, k, a.stride(0), a.stride(1),
                                           b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                           **_tiles(s))
    return (c,)


def matmul_tma_package(s, step, a, b_t):
    (m, k), n = a.shape, b_t.shape[0]
    a_desc = jtr.TensorDescriptor.from_array(a, [s["BLOCK_M"], s["BLOCK_K"]])
    b_desc = jtr.TensorDescriptor.from_array(b_t, [s["BLOCK_N"], s["BLOCK_K"]])
    out = jtr.triton_call(a_desc, b_desc, M=m, N=n, K=k, stride_cm=n,
                          kernel=K.matmul_tma_kernel, out_type=_out((m, n), a.dtype),
                          grid=_matmul_grid(s, m, n), **_tiles(s))
    return (out,)


def matmul_tma_torch(s, step, a, b_t):
    from triton.tools.tensor_descriptor import TensorDescriptor

    (m, k), n = a.shape, b_t.shape[0]
    c = _torch().empty((m, n), dtype=a.dtype, device=a.device)
    a_desc = TensorDescriptor.from_tensor(a, [s["BLOCK_M"], s["BLOCK_K"]])
    b_desc = TensorDescriptor.from_tensor(b_t, [s["BLOCK_N"], s["BLOCK_K"]])
    K.matmul_tma_kernel[_matmul_grid(s, m, n)](a_desc, b_desc, c, m, n, k, c.stride(0),
                                               **_tiles(s))
    return (c,)


# Attention forward: flash-style, fp16, causal; the output and LSE after a runtime scale.

def attention_inputs(s, key):
    shape = (s["Z"], s["H"], s["N_CTX"], s["HEAD_DIM"])
    kq, kk, kv = jax.random.split(key, 3)
    return ((_normal(kq, shape, jnp.float16),),
            (_normal(kk, shape, jnp.float16), _normal(kv, shape, jnp.float16)))


def _attention_grid(s, z, h, n_ctx):
    return (triton.cdiv(n_ctx, s["BLOCK_M"]), z * h)


def _attention_meta(s, head_dim):
    return dict(HEAD_DIM=head_dim, BLOCK_M=s["BLOCK_M"], BLOCK_N=s["BLOCK_N"],
                CAUSAL=s["causal"], num_warps=s["num_warps"], num_stages=s["num_stages"])


def attention_package(s, step, q, k, v):
    z, h, n_ctx, head_dim = q.shape
    sz, sh, sm, _ = jtr.strides_from_shape(q.shape)
    strides = {f"stride_{t}{axis}": value for t, last in (("q", "m"), ("k", "n"), ("v", "n"),
                                                          ("o", "m"))
               for axis, value in (("z", sz), ("h", sh), (last, sm))}
    return jtr.triton_call(q, k, v, s["sm_scale"], **strides, H=h, N_CTX=n_ctx,
                           kernel=K.attention_fwd_kernel,
                           out_type=(_out(q.shape, q.dtype), _out((z * h, n_ctx), jnp.float32)),
                           grid=_attention_grid(s, z, h, n_ctx), **_attention_meta(s, head_dim))


def attention_torch(s, step, q, k, v):
    torch = _torch()
    z, h, n_ctx, head_dim = q.shape
    out = torch.empty_like(q)
    lse = torch.empty((z * h, n_ctx), dtype=torch.float32, device=q.device)
    K.attention_fwd_kernel[_attention_grid(s, z, h, n_ctx)](
        q, k, v, s["sm_scale"], out, lse, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
        *out.stride()[:3], h, n_ctx, **_attention_meta(s, head_dim))
    return out, lse


FP16_TOLERANCE = (2e-2, 1e-2)
MATMUL_SIZES = dict(M=4096, N=4096, K=4096, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8,
                    num_warps=8, num_stages=3)
MATMUL_SMALL = dict(M=48, N=48, K=48, BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2,
                    num_warps=4, num_stages=2)

CASES = (
    Case("softmax", "softmax 4096x8192 f32, output first, persistent grid",
         dict(rows=4096, cols=8192, BLOCK=8192, programs=264, num_warps=8, num_stages=2),
         dict(rows=10, cols=100, BLOCK=128, programs=4, num_warps=4, num_stages=2),
         softmax_inputs, softmax_package, softmax_torch, R.softmax_reference, (1e-6, 1e-4)),
    Case("layernorm", "layer-norm forward 4096x8192 fp16, outputs in the middle",
         dict(M=4096, N=8192, BLOCK=8192, eps=1e-5, num_warps=8, num_stages=3),
         dict(M=6, N=100, BLOCK=32, eps=1e-5, num_warps=4, num_stages=3),
         layer_norm_fwd_inputs, layer_norm_fwd_package, layer_norm_fwd_torch,
         R.layer_norm_fwd_reference, FP16_TOLERANCE),
    Case("layernorm_bwd", "layer-norm backward 4096x8192 fp16, locks + partial sums (2 kernels)",
         dict(M=4096, N=8192, GROUP=64, BLOCK=8192, BLOCK_M=32, BLOCK_N=128, eps=1e-5,
              num_warps=8, dwdb_warps=4, num_stages=3),
         dict(M=12, N=100, GROUP=4, BLOCK=128, BLOCK_M=2, BLOCK_N=32, eps=1e-5, num_warps=4,
              dwdb_warps=4, num_stages=3),
         layer_norm_bwd_inputs, layer_norm_bwd_package, layer_norm_bwd_torch,
         R.layer_norm_bwd_reference, (5e-2, 1e-2)),
    Case("dropout", "dropout 4096x8192 f32, p=0.5, a seed per call",
         dict(shape=(4096, 8192), p=0.5, seed=1234, BLOCK=1024, num_warps=4, num_stages=3),
         dict(shape=(6, 100), p=0.5, seed=1234, BLOCK=128, num_warps=4, num_stages=3),
         dropout_inputs, dropout_package, dropout_torch, R.dropout_reference, (1e-6, 1e-5)),
    Case("matmul", "matmul 4096^3 fp16, 128x256x64 tiles",
         MATMUL_SIZES, MATMUL_SMALL,
         matmul_inputs, matmul_package, matmul_torch, R.matmul_reference, FP16_TOLERANCE),
    Case("attention", "attention forward, causal, fp16, Z=2 H=16 N=4096 D=64",
         dict(Z=2, H=16, N_CTX=4096, HEAD_DIM=64, BLOCK_M=128, BLOCK_N=64, causal=True,
              sm_scale=0.125, num_warps=4, num_stages=3),
         dict(Z=1, H=2, N_CTX=40, HEAD_DIM=16, BLOCK_M=16, BLOCK_N=16, causal=True,
              sm_scale=0.25, num_warps=4, num_stages=2),
         attention_inputs, attention_package, attention_torch, R.attention_reference,
         FP16_TOLERANCE),
    Case("matmul_tma", "matmul 4096^3 fp16 through host TMA descriptors (A, B^T)",
         dict(MATMUL_SIZES, b_transposed=True), dict(MATMUL_SMALL, b_transposed=True),
         matmul_inputs, matmul_tma_package, matmul_tma_torch, R.matmul_tma_reference,
         FP16_TOLERANCE, needs_tma=True),
)
BY_NAME = {case.name: case for case in CASES}
