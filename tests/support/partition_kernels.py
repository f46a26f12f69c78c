"""Partitioned functions shared by the tests of `jtr.partitioned` (CPU and GPU alike)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support import autotune_utils, kernels
from tests.support import library_kernels as lk


@triton.jit
def row_reduce_kernel(x_ptr, n_cols, out_ptr, BLOCK: tl.constexpr, MAX: tl.constexpr):
    """out[r] = sum (or max) of row r; one program per row, the row's length a runtime scalar."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    if MAX:
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=float("-inf"))
        tl.store(out_ptr + row, tl.max(x, axis=0))
    else:
        x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(x, axis=0))


def row_reduce(x, maximum=False):
    """Each row's sum (or max): the grid and the block follow the shape the call sees."""
    rows, cols = x.shape
    return jtr.triton_call(x, cols, kernel=row_reduce_kernel,
                           out_shape=jax.ShapeDtypeStruct((rows,), x.dtype), grid=(rows,),
                           BLOCK=triton.next_power_of_2(cols), MAX=maximum)


add = jtr.partitioned("b n, b n -> b n")(kernels.add)
add_flat = jtr.partitioned("n, n -> n")(kernels.add)
row_sum = jtr.partitioned("b n -> b")(row_reduce)
row_sum_reduced = jtr.partitioned("b n -> b", reductions={"n": "sum"})(row_reduce)
row_max_reduced = jtr.partitioned("b n -> b", reductions={"n": "max"})(
    lambda x: row_reduce(x, maximum=True))
tuned_add = jtr.partitioned("b n, b n -> b n")(autotune_utils.tuned_add)

# A library primitive (lowered with triton_call_lowering) partitioned by a rule, where
# `lk.row_amax_sharded` hand-writes custom_partitioning's callbacks for the same split.
row_amax = jtr.partitioned("i j -> i")(lambda x: lk.row_amax_p.bind(x)[0])
row_amax_reduced = jtr.partitioned("i j -> i", reductions={"j": "max"})(
    lambda x: lk.row_amax_p.bind(x)[0])


@jtr.partitioned("b n, n -> b n")
def add_bias(x, bias):
    """A kernel on an operand broadcast with jnp first: a bias split like x's columns."""
    return kernels.add(x, jnp.broadcast_to(bias, x.shape))


@jtr.partitioned("n -> n")
def add_two(x):
    """A kernel on a NumPy array the function makes from its shape: a constant of its trace at
    the full shape (custom_partitioning allows none of its own), and of each shard's."""
    return kernels.add(x, jnp.asarray(np.full(x.shape, 2.0, np.float32)))


def matrix(rows=8, cols=8, seed=0):
    return jax.random.normal(jax.random.key(seed), (rows, cols), jnp.float32)
