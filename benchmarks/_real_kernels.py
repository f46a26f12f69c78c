"""The Triton kernels of `real_kernels.py`: real workloads, written here, with the parameter
layouts their authors use (outputs wherever the author put them, sizes, strides and factors as
runtime scalars, constexprs for the tiles).

Not a script: `_real_cases.py` calls them through the package and through Triton's launcher.
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2_E = tl.constexpr(1.4426950408889634)
LN_2 = tl.constexpr(0.6931471805599453)


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                   BLOCK: tl.constexpr, NUM_STAGES: tl.constexpr):
    """Row softmax on a persistent grid: program p takes rows p, p + programs, ...; a row fits
    in one block."""
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=NUM_STAGES):
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
        shifted = x - tl.max(x, axis=0)
        numerator = tl.exp(shifted)
        tl.store(out_ptr + row * out_row_stride + cols,
                 numerator / tl.sum(numerator, axis=0), mask=mask)


@triton.jit
def layer_norm_fwd_kernel(X, Y, W, B, Mean, Rstd, stride, N, eps, BLOCK_SIZE: tl.constexpr):
    """One program per row: mean and variance in float32 over blocks of the row, then
    y = (x - mean) * rstd * w + b; the row's mean and 1/std are kept for the backward pass."""
    row = tl.program_id(0)
    X += row * stride
    Y += row * stride
    total = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        total += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(total, axis=0) / N
    squares = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
        centred = tl.where(cols < N, x - mean, 0.0)
        squares += centred * centred
    rstd = 1 / tl.sqrt(tl.sum(squares, axis=0) / N + eps)
    tl.store(Mean + row, mean)
    tl.store(Rstd + row, rstd)
    for start in range(0, N, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < N
        w = tl.load(W + cols, mask=mask)
        b = tl.load(B + cols, mask=mask)
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + cols, ((x - mean) * rstd * w + b).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def layer_norm_bwd_dx_kernel(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N,
                             GROUP_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr):
    """dx of one row, and its dw, db terms added into row `row % GROUP_SIZE_M` of the float32
    partial sums DW, DB [GROUP_SIZE_M, N] under that group's spin lock. `Lock` holds
    GROUP_SIZE_M locks and then GROUP_SIZE_M counts, and must start zeroed: the first row of a
    group (count 0) stores its terms, the others add to them, so DW and DB need no zeroing."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    group = row % GROUP_SIZE_M
    lock = Lock + group
    count = Lock + GROUP_SIZE_M + group
    DW = DW + group * N + cols
    DB = DB + group * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = tl.where(mask, (x - mean) * rstd, 0.0)
    wdy = tl.where(mask, w * dy, 0.0)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    tl.store(DX + cols, ((wdy - (xhat * c1 + c2)) * rstd).to(DX.dtype.element_ty), mask=mask)
    partial_dw = dy * xhat
    partial_db = dy
    while tl.atomic_cas(lock, 0, 1) == 1:
        pass
    if tl.load(count) == 0:
        tl.atomic_xchg(count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()  # every thread's stores land before the lock is given back
    tl.atomic_xchg(lock, 0)


@triton.jit
def layer_norm_bwd_dwdb_kernel(DW, DB, FINAL_DW, FINAL_DB, M, N, BLOCK_SIZE_M: tl.constexpr,
                               BLOCK_SIZE_N: tl.constexpr):
    """The second stage: sums the M rows of partial dw, db for BLOCK_SIZE_N columns."""
    cols = tl.program_id(0) * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    dw = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    db = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for start in range(0, M, BLOCK_SIZE_M):
        rows = start + tl.arange(0, BLOCK_SIZE_M)
        mask = (rows[:, None] < M) & (cols[None, :] < N)
        offsets = rows[:, None] * N + cols[None, :]
        dw += tl.load(DW + offsets, mask=mask, other=0.0)
        db += tl.load(DB + offsets, mask=mask, other=0.0)
    tl.store(FINAL_DW + cols, tl.sum(dw, axis=0).to(FINAL_DW.dtype.element_ty), mask=cols < N)
    tl.store(FINAL_DB + cols, tl.sum(db, axis=0).to(FINAL_DB.dtype.element_ty), mask=cols < N)


@triton.jit
def dropout_kernel(x_ptr, out_ptr, n_elements, p, seed, BLOCK: tl.constexpr):
    """Seeded dropout: element i is kept where Philox's uniform for (seed, i) exceeds p, and
    scaled by 1 / (1 - p); the same seed gives the same mask."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    keep = tl.rand(seed, offsets) > p
    tl.store(out_ptr + offsets, tl.where(keep, x / (1 - p), 0.0), mask=mask)


@triton.jit
def _grouped_tile(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  GROUP_M: tl.constexpr):
    """The output tile of program `pid`, GROUP_M tile rows at a time (for reuse in L2)."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    group_m = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (pid % in_group) % group_m, (pid % in_group) // group_m


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C = A @ B in tiles, float32 accumulation, C in A's dtype."""
    pid_m, pid_n = _grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_am = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_bn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :] * stride_cn,
             acc.to(c_ptr.dtype.element_ty),
             mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_ptr, M, N, K, stride_cm, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """C = A @ B^T with A [M, K] and B^T [N, K] read through host-side tensor descriptors (TMA
    on sm_90+; out-of-bounds blocks read zeros), C stored through a pointer."""
    pid_m, pid_n = _grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    offs_cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    tl.store(c_ptr + offs_cm[:, None] * stride_cm + offs_cn[None, :],
             acc.to(c_ptr.dtype.element_ty),
             mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.jit
def attention_fwd_kernel(Q, K, V, sm_scale, Out, LSE,
                         stride_qz, stride_qh, stride_qm, stride_kz, stride_kh, stride_kn,
                         stride_vz, stride_vh, stride_vn, stride_oz, stride_oh, stride_om,
                         H, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                         BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    """Flash attention forward over [Z, H, N_CTX, HEAD_DIM] (last dimension contiguous): one
    program per BLOCK_M queries of one head, an online softmax over BLOCK_N keys at a time;
    also stores each query's log-sum-exp of its scaled scores, LSE [Z * H, N_CTX]."""
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = (off_hz // H).to(tl.int64)
    off_h = (off_hz % H).to(tl.int64)
    q_base = Q + off_z * stride_qz + off_h * stride_qh
    k_base = K + off_z * stride_kz + off_h * stride_kh
    v_base = V + off_z * stride_vz + off_h * stride_vh
    o_base = Out + off_z * stride_oz + off_h * stride_oh
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(q_base + offs_m[:, None] * stride_qm + offs_d[None, :],
                mask=offs_m[:, None] < N_CTX, other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * LOG2_E
    if CAUSAL:
        end = tl.minimum((start_m + 1) * BLOCK_M, N_CTX)
    else:
        end = N_CTX
    for start_n in range(0, end, BLOCK_N):
        keys = start_n + offs_n
        k = tl.load(k_base + keys[None, :] * stride_kn + offs_d[:, None],
                    mask=keys[None, :] < N_CTX, other=0.0)
        qk = tl.dot(q, k) * qk_scale
        valid = keys[None, :] < N_CTX
        if CAUSAL:
            valid = valid & (offs_m[:, None] >= keys[None, :])
        qk = tl.where(valid, qk, -1.0e6)
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        p = tl.math.exp2(qk - m_new[:, None])
        alpha = tl.math.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_base + keys[:, None] * stride_vn + offs_d[None, :],
                    mask=keys[:, None] < N_CTX, other=0.0)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None])
        m_i = m_new
    rows = offs_m < N_CTX
    tl.store(LSE + off_hz * N_CTX + offs_m, (m_i + tl.math.log2(l_i)) * LN_2, mask=rows)
    tl.store(o_base + offs_m[:, None] * stride_om + offs_d[None, :],
             (acc / l_i[:, None]).to(Out.dtype.element_ty), mask=rows[:, None])
