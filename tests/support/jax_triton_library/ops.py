"""The library's operations, each a `jt.triton_call` written for jax-triton 0.3."""

import functools

import jax
import jax.numpy as jnp
import triton
import triton.language as tl
from jax_triton import utils

import jax_triton as jt


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, scale, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * scale
             + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def scaled_add(x, y, scale):
    """x * scale + y, differentiable through its custom_vjp."""
    block = utils.next_power_of_2(min(x.size, 128))
    return jt.triton_call(x, y, scale, x.size, kernel=scaled_add_kernel, out_shape=x,
                          grid=(jt.cdiv(x.size, block),), BLOCK=block)


def _scaled_add_fwd(x, y, scale):
    return scaled_add(x, y, scale), None


def _scaled_add_bwd(scale, _, g):
    return g * scale, g


scaled_add.defvjp(_scaled_add_fwd, _scaled_add_bwd)


@triton.jit
def sum_and_max_kernel(x_ptr, n, sum_ptr, max_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.atomic_add(sum_ptr, tl.sum(x, 0))
    tl.atomic_max(max_ptr, tl.max(x, 0))


def sum_and_max(x):
    """The sum and the max of a non-negative float32 vector: two outputs in an `out_shape`
    list, both zeroed before the launch."""
    scalar = jax.ShapeDtypeStruct((1,), jnp.float32)
    total, peak = jt.triton_call(x, x.size, kernel=sum_and_max_kernel, out_shape=[scalar, scalar],
                                 grid=(jt.cdiv(x.size, 64),), zeroed_outputs=(0, 1), BLOCK=64)
    return total[0], peak[0]


def _check_block(nargs):
    if nargs["BT"] not in (32, 64, 128):
        raise ValueError(f"unexpected BT {nargs['BT']}")


@triton.autotune(configs=[triton.Config({"BT": bt}, pre_hook=_check_block) for bt in (32, 64, 128)],
                 key=["n"])
@triton.jit
def tuned_copy_kernel(x_ptr, n, out_ptr, BT: tl.constexpr):
    offsets = tl.program_id(0) * BT + tl.arange(0, BT)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def tuned_copy(x):
    """A copy through an autotuned kernel, called with one of its tuned keys and a grid
    computed for that value (as a public library does)."""
    return jt.triton_call(x, x.size, kernel=tuned_copy_kernel, out_shape=x,
                          grid=(jt.cdiv(x.size, 64),), BT=64)
