"""A chunkwise recurrent kernel in the shape of mLSTM's forward recurrence, and the programs the
tests run it in (test_recurrent_states.py, test_gpu_recurrent_states.py).

Per batch*head, a state matrix C (DK x DV), a normaliser n (DK) and a max state m (a scalar) are
carried over NC chunks of L steps: each chunk decays the states by its forget gates and adds its
keys and values (`tl.dot`), stabilised by m (`exp`, `max`). The kernel stores the states before
each chunk and the final ones (six outputs), on a 3-D grid (DK blocks, DV blocks, batch*heads),
every stride a keyword constexpr. Its initial states come from an earlier kernel of the same
jit; the outputs' pointers come before the initial states' in its signature, as in mLSTM's.

The sequence runs as one call (`single_run`) or as two chained calls, the second starting from
the first's final states (`chained_run`); `reference` is the same recurrence in NumPy (float64),
and `torch_run` launches the same kernels with Triton's own launcher from PyTorch.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl

import jax_triton_rocm as jtr

# Launch settings given to both launchers, so that both compile the same binary.
NUM_WARPS, NUM_STAGES = 4, 2


@triton.jit
def init_state_kernel(seed_ptr, n, out_ptr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    """out = seed * SCALE: the initial states, made by a kernel before the recurrence."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(seed_ptr + offsets, mask=mask) * SCALE, mask=mask)


@triton.jit
def chunk_recurrent_fw_kernel(
        K, V, B, I, C_states, N_states, M_states, C_init, N_init, M_init, C_last, N_last, M_last,
        str_K_BH: tl.constexpr, str_K_S: tl.constexpr, str_K_DK: tl.constexpr,
        str_V_BH: tl.constexpr, str_V_S: tl.constexpr, str_V_DV: tl.constexpr,
        str_B_BH: tl.constexpr, str_B_NC: tl.constexpr,
        str_Cs_BH: tl.constexpr, str_Cs_DK: tl.constexpr, str_Cs_DV: tl.constexpr,
        str_Ns_BH: tl.constexpr, str_Ms_BH: tl.constexpr,
        str_C_BH: tl.constexpr, str_C_DK: tl.constexpr, str_C_DV: tl.constexpr,
        str_N_BH: tl.constexpr,
        NC: tl.constexpr, L: tl.constexpr, DK: tl.constexpr, DV: tl.constexpr,
        BLOCK_DK: tl.constexpr, BLOCK_DV: tl.constexpr):
    """The states before each of NC chunks (C_states, N_states, M_states) and after the last
    (C_last, N_last, M_last), from the initial ones. B holds each chunk's cumulative log forget
    gates, I its input gates (log scale), both (batch*heads, NC, L)."""
    idx_dk, idx_dv, bh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    dk = idx_dk * BLOCK_DK + tl.arange(0, BLOCK_DK)
    dv = idx_dv * BLOCK_DV + tl.arange(0, BLOCK_DV)
    steps = tl.arange(0, L)
    in_block = (dk[:, None] < DK) & (dv[None, :] < DV)
    c_block = dk[:, None] * str_C_DK + dv[None, :] * str_C_DV
    c = tl.load(C_init + bh * str_C_BH + c_block, mask=in_block, other=0.0).to(tl.float32)
    n = tl.load(N_init + bh * str_N_BH + dk, mask=dk < DK, other=0.0).to(tl.float32)
    m = tl.load(M_init + bh).to(tl.float32)
    for k in range(NC):
        tl.store(C_states + bh * str_Cs_BH + (k * DK + dk[:, None]) * str_Cs_DK
                 + dv[None, :] * str_Cs_DV, c, mask=in_block)
        if idx_dv == 0:
            tl.store(N_states + bh * str_Ns_BH + k * DK + dk, n, mask=dk < DK)
        if (idx_dk == 0) and (idx_dv == 0):
            tl.store(M_states + bh * str_Ms_BH + k, m)
        gates = bh * str_B_BH + k * str_B_NC
        b = tl.load(B + gates + steps)
        g = tl.load(B + gates + L - 1)  # the chunk's whole log forget gate
        a = g - b + tl.load(I + gates + steps)
        m_next = tl.maximum(g + m, tl.max(a, axis=0))
        rows = k * L + steps  # the chunk's steps in the sequence
        keys = tl.load(K + bh * str_K_BH + rows[None, :] * str_K_S + dk[:, None] * str_K_DK,
                       mask=dk[:, None] < DK, other=0.0)  # (BLOCK_DK, L): K transposed
        values = tl.load(V + bh * str_V_BH + rows[:, None] * str_V_S + dv[None, :] * str_V_DV,
                         mask=dv[None, :] < DV, other=0.0)
        k_bar = keys * tl.exp(a - m_next)[None, :]
        decay = tl.exp(g + m - m_next)
        c = decay * c + tl.dot(k_bar, values, input_precision="ieee")
        n = decay * n + tl.sum(k_bar, axis=1)
        m = m_next
    tl.store(C_last + bh * str_C_BH + c_block, c, mask=in_block)
    if idx_dv == 0:
        tl.store(N_last + bh * str_N_BH + dk, n, mask=dk < DK)
    if (idx_dk == 0) and (idx_dv == 0):
        tl.store(M_last + bh, m)


@dataclasses.dataclass(frozen=True)
class Shape:
    """batch*heads, chunks, steps per chunk, key and value sizes, and the kernel's blocks."""

    bh: int
    nc: int
    chunk: int
    dk: int
    dv: int
    block_dk: int
    block_dv: int


SMALL = Shape(bh=2, nc=4, chunk=16, dk=32, dv=32, block_dk=16, block_dv=16)  # the interpreter
LARGE = Shape(bh=8, nc=8, chunk=64, dk=64, dv=128, block_dk=32, block_dv=64)  # a GPU
INIT_SCALES = (0.5, 0.25, 2.0)  # C, n, m


def make_inputs(shape: Shape, seed: int = 0) -> dict[str, np.ndarray]:
    """Keys, values and gates for `shape` (float32), and the seeds of the initial states."""
    rng = np.random.default_rng(seed)
    s = shape.nc * shape.chunk

    def normal(*dims, scale=1.0):
        return (rng.standard_normal(dims) * scale).astype(np.float32)

    log_forget = -np.logaddexp(0.0, -(normal(shape.bh, shape.nc, shape.chunk) + 3.0))
    return {
        "k": normal(shape.bh, s, shape.dk, scale=shape.dk ** -0.5),
        "v": normal(shape.bh, s, shape.dv),
        "b": np.cumsum(log_forget, axis=-1).astype(np.float32),
        "i": normal(shape.bh, shape.nc, shape.chunk),
        "c_seed": normal(shape.bh, shape.dk, shape.dv),
        "n_seed": normal(shape.bh, shape.dk),
        "m_seed": normal(shape.bh),
    }


def _init(seed: jax.Array, scale: float) -> jax.Array:
    return jtr.triton_call(seed, seed.size, kernel=init_state_kernel, out_shape=seed,
                           grid=(triton.cdiv(seed.size, 256),), num_warps=NUM_WARPS,
                           num_stages=NUM_STAGES, SCALE=scale, BLOCK=256)


def initial_states(c_seed, n_seed, m_seed) -> tuple[jax.Array, jax.Array, jax.Array]:
    """C, n and m to start from, each made by `init_state_kernel`."""
    return tuple(_init(seed, scale) for seed, scale in zip((c_seed, n_seed, m_seed), INIT_SCALES))


def launch(shape: Shape, steps: int, chunks: int) -> dict:
    """The recurrent kernel's grid and constexprs, every stride (row-major) and size, for a call
    over `chunks` chunks (`steps` steps in all)."""
    dk, dv = shape.dk, shape.dv
    return dict(
        grid=(triton.cdiv(dk, shape.block_dk), triton.cdiv(dv, shape.block_dv), shape.bh),
        str_K_BH=steps * dk, str_K_S=dk, str_K_DK=1, str_V_BH=steps * dv, str_V_S=dv, str_V_DV=1,
        str_B_BH=steps, str_B_NC=shape.chunk, str_Cs_BH=chunks * dk * dv, str_Cs_DK=dv,
        str_Cs_DV=1, str_Ns_BH=chunks * dk, str_Ms_BH=chunks, str_C_BH=dk * dv, str_C_DK=dv,
        str_C_DV=1, str_N_BH=dk, NC=chunks, L=shape.chunk, DK=dk, DV=dv,
        BLOCK_DK=shape.block_dk, BLOCK_DV=shape.block_dv)


def recurrent(shape: Shape, k, v, b, i, c0, n0, m0, **call) -> tuple[jax.Array, ...]:
    """(C_states, N_states, M_states, C_last, N_last, M_last) of one call over the chunks of b:
    the outputs fill the kernel's pointers left unfilled, the initial states go by keyword."""
    steps, chunks = k.shape[1], b.shape[1]
    bh, dk, dv = shape.bh, shape.dk, shape.dv
    out_shape = [jax.ShapeDtypeStruct(dims, jnp.float32) for dims in (
        (bh, chunks * dk, dv), (bh, chunks * dk), (bh, chunks), (bh, dk, dv), (bh, dk), (bh,))]
    return tuple(jtr.triton_call(k, v, b, i, C_init=c0, N_init=n0, M_init=m0,
                                 kernel=chunk_recurrent_fw_kernel, out_shape=out_shape,
                                 num_warps=NUM_WARPS, num_stages=NUM_STAGES,
                                 **launch(shape, steps, chunks), **call))


def single_run(shape: Shape, inputs: dict, **call) -> tuple[jax.Array, ...]:
    """The whole sequence in one recurrent call, its initial states made in the same jit."""
    c0, n0, m0 = initial_states(inputs["c_seed"], inputs["n_seed"], inputs["m_seed"])
    return recurrent(shape, inputs["k"], inputs["v"], inputs["b"], inputs["i"], c0, n0, m0, **call)


def chained_run(shape: Shape, inputs: dict, **call) -> tuple[jax.Array, ...]:
    """The sequence as two recurrent calls in one jit, the second starting from the first's
    final states; the per-chunk states of both, joined, and the second's final states."""
    half_s, half_nc = inputs["k"].shape[1] // 2, shape.nc // 2
    state = initial_states(inputs["c_seed"], inputs["n_seed"], inputs["m_seed"])
    per_chunk = []
    for part in (slice(0, half_s), slice(half_s, None)):
        chunks = slice(0, half_nc) if part.start == 0 else slice(half_nc, None)
        *states, c, n, m = recurrent(shape, inputs["k"][:, part], inputs["v"][:, part],
                                     inputs["b"][:, chunks], inputs["i"][:, chunks], *state,
                                     **call)
        per_chunk.append(states)
        state = (c, n, m)
    joined = tuple(jnp.concatenate(pair, axis=1) for pair in zip(*per_chunk))
    return (*joined, *state)


def reference(shape: Shape, inputs: dict) -> tuple[np.ndarray, ...]:
    """The recurrence in NumPy, in float64: what `single_run` computes."""
    k, v, b, i = (inputs[name].astype(np.float64) for name in ("k", "v", "b", "i"))
    c, n, m = (inputs[f"{name}_seed"].astype(np.float64) * scale
               for name, scale in zip("cnm", INIT_SCALES))
    cs, ns, ms = [], [], []
    for chunk in range(shape.nc):
        cs.append(c), ns.append(n), ms.append(m)
        steps = slice(chunk * shape.chunk, (chunk + 1) * shape.chunk)
        g = b[:, chunk, -1]
        a = g[:, None] - b[:, chunk] + i[:, chunk]
        m_next = np.maximum(g + m, a.max(axis=1))
        k_bar = k[:, steps] * np.exp(a - m_next[:, None])[:, :, None]  # (bh, L, dk)
        decay = np.exp(g + m - m_next)
        c = decay[:, None, None] * c + np.einsum("bld,blv->bdv", k_bar, v[:, steps])
        n = decay[:, None] * n + k_bar.sum(axis=1)
        m = m_next
    return (np.concatenate(cs, axis=1), np.concatenate(ns, axis=1), np.stack(ms, axis=1),
            c, n, m)


def torch_run(shape: Shape, inputs: dict) -> tuple[np.ndarray, ...]:
    """`single_run`'s kernels launched by Triton's own launcher from PyTorch, on its first GPU,
    every output filled with NaN first; the outputs as NumPy arrays."""
    import torch

    device = torch.device("cuda")
    t = {name: torch.from_numpy(np.ascontiguousarray(value)).to(device)
         for name, value in inputs.items()}
    state = []
    for name, scale in zip("cnm", INIT_SCALES):
        seed = t[f"{name}_seed"]
        out = torch.full_like(seed, float("nan"))
        init_state_kernel[(triton.cdiv(seed.numel(), 256),)](
            seed, seed.numel(), out, SCALE=scale, BLOCK=256, num_warps=NUM_WARPS,
            num_stages=NUM_STAGES, enable_fp_fusion=True)
        state.append(out)
    bh, dk, dv, nc = shape.bh, shape.dk, shape.dv, shape.nc
    outs = [torch.full(dims, float("nan"), dtype=torch.float32, device=device) for dims in (
        (bh, nc * dk, dv), (bh, nc * dk), (bh, nc), (bh, dk, dv), (bh, dk), (bh,))]
    settings = launch(shape, t["k"].shape[1], nc)
    grid = settings.pop("grid")
    chunk_recurrent_fw_kernel[grid](
        t["k"], t["v"], t["b"], t["i"], *outs[:3], *state, *outs[3:], **settings,
        num_warps=NUM_WARPS, num_stages=NUM_STAGES, enable_fp_fusion=True)
    torch.cuda.synchronize()
    return tuple(out.cpu().numpy() for out in outs)
