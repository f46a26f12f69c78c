"""Autotuned kernels and helpers shared by the autotuning tests (CPU lowering and GPU alike)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.routes import _choices
from jax_triton_rocm.routes.jaxlib import _jaxlib_call, _proto
from tests.support.kernels import add_inplace_kernel, add_kernel, matmul_kernel
from tests.support.lowering_utils import capture_one

STAND_IN_DEVICE = "Stand-in GPU"  # what the tests of remembered choices stand in for a GPU

ADD_CONFIGS = [
    triton.Config({"BLOCK": 128}, num_warps=4),
    triton.Config({"BLOCK": 256}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK": 512}, num_warps=8),
]


@triton.autotune(configs=ADD_CONFIGS, key=["n"])
@triton.jit
def tuned_add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK)


def tuned_add(x, y, kernel=tuned_add_kernel, **kwargs):
    """x + y through an autotuned kernel, with a grid evaluated per config."""
    return jtr.triton_call(
        x, y, x.size, kernel=kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),), **kwargs)


@triton.autotune(configs=ADD_CONFIGS, key=["n"])
@triton.jit
def tuned_add_inplace_kernel(y_ptr, x_ptr, n, out_ptr, BLOCK: tl.constexpr):
    """out += y, where out aliases x, the second input (input_output_aliases={1: 0})."""
    add_inplace_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK)


def tuned_add_inplace(x, y, metadata: bytes = b""):
    """x + y written over x's buffer: every trial of the autotuner adds y again unless jaxlib
    restores x between trials."""
    return jtr.triton_call(
        y, x, x.size, kernel=tuned_add_inplace_kernel, out_shape=x,
        grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
        input_output_aliases={1: 0}, serialized_metadata=metadata)


@triton.jit
def capped_add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    """add_kernel that refuses BLOCK > 256 at compile time (a config Triton's autotuner drops)."""
    tl.static_assert(BLOCK <= 256)
    add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK)


@triton.jit
def even_add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr, EVEN: tl.constexpr):
    """add_kernel without masks when EVEN (n is a multiple of BLOCK), set by a heuristic."""
    if EVEN:
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets))
    else:
        add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK)


MATMUL_CONFIGS = [
    triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
    for bm, bn, bk, w, s in [
        (32, 32, 32, 4, 2), (64, 64, 32, 4, 3), (128, 64, 32, 4, 3), (64, 128, 32, 4, 3),
        (128, 128, 32, 8, 3), (64, 64, 64, 4, 2), (128, 128, 64, 8, 2), (32, 64, 64, 4, 4),
        (64, 32, 32, 2, 4), (128, 32, 32, 4, 4), (32, 128, 32, 4, 4), (256, 64, 32, 8, 3),
        (64, 256, 32, 8, 3), (128, 64, 64, 4, 3), (64, 128, 64, 4, 3), (256, 128, 32, 8, 3),
    ]
]


def _block_fits(configs, named_args, **kwargs):
    """early_config_prune: keep configs whose blocks do not exceed the problem."""
    m, n = named_args["M"], named_args["N"]
    return [c for c in configs
            if c.kwargs["BLOCK_M"] <= max(m, 32) and c.kwargs["BLOCK_N"] <= max(n, 32)]


@triton.autotune(configs=MATMUL_CONFIGS, key=["M", "N", "K"],
                 prune_configs_by={"early_config_prune": _block_fits})
@triton.jit
def tuned_matmul_kernel(a_ptr, b_ptr, M, N, K, c_ptr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)


def tuned_matmul(a, b, kernel=tuned_matmul_kernel):
    m, k = a.shape
    _, n = b.shape
    return jtr.triton_call(
        a, b, m, n, k, kernel=kernel, out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid=lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"])))


def decoded_configs(lowered: _jaxlib_call.LoweredCall) -> list:
    """The autotune configs of a lowered call, decoded from its opaque."""
    message = _proto.decode(lowered.opaque)
    assert message.WhichOneof("value") == "autotuned_kernel_call"
    return list(message.autotuned_kernel_call.configs)


def f32(*shape: int) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, jnp.float32)


TUNED_N = 4096  # the length of the operands `lower_tuned_add` lowers for


def lower_tuned_add(n=TUNED_N, **kwargs):
    """`tuned_add` on two float32 vectors of length `n`, lowered for CUDA."""
    return capture_one(lambda x, y: tuned_add(x, y, **kwargs), f32(n), f32(n),
                       platform="cuda")


def undecided_choice(n=TUNED_N):
    """The choice a lowering of `tuned_add` leaves undecided (the only one of its session)."""
    with _choices.session() as current:
        lowered = lower_tuned_add(n)
    assert lowered.undecided is not None
    assert list(current.undecided) == [lowered.undecided.key]
    return lowered.undecided
