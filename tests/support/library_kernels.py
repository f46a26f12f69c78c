"""Primitives of a stand-in library whose lowering rules call `triton_call_lowering`.

Each is registered on cuda, rocm and cpu, as a library would, and has a jnp reference.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import triton
import triton.language as tl
from jax.experimental.custom_partitioning import custom_partitioning
from jax.interpreters import batching, mlir
from jax.sharding import NamedSharding, PartitionSpec

from jax_triton_rocm import loop_batching_rule, triton_call_lowering

# jax.extend.core.Primitive; importing it from jax._src keeps Pallas out, as the package does.
from jax._src.core import Primitive

PLATFORMS = ("cuda", "rocm", "cpu")


def define(name: str, abstract_eval, lowering, *, multiple_results: bool = True) -> Primitive:
    prim = Primitive(name)
    prim.multiple_results = multiple_results
    prim.def_impl(functools.partial(jax._src.dispatch.apply_primitive, prim))
    prim.def_abstract_eval(abstract_eval)
    for platform in PLATFORMS:
        mlir.register_lowering(prim, lowering, platform=platform)
    return prim


# An autotuned amax whose only scalar, n, is a constexpr; the result is zeroed before each
# launch, then every program folds its block in with an atomic max.
@triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=2),
                          triton.Config({"BLOCK": 1024}, num_warps=8)], key=["n"])
@triton.jit
def amax_kernel(x_ptr, amax_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.atomic_max(amax_ptr, tl.max(tl.abs(x), axis=0))


def _amax_lowering(ctx, x):
    n = ctx.avals_in[0].size
    return triton_call_lowering(ctx, amax_kernel, x,
                                grid=lambda meta: (triton.cdiv(n, meta["BLOCK"]),),
                                constexprs={"n": n}, zeroed_outputs=(0,))


amax_p = define("test_amax", lambda x: [jax.core.ShapedArray((), jnp.float32)], _amax_lowering)


def amax(x):
    return amax_p.bind(x)[0]


def amax_reference(x):
    return jnp.max(jnp.abs(x))


# In place: one pointer, the result aliased to it ({0: 0}), no pointer of its own.
@triton.jit
def scale_in_place_kernel(x_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * alpha, mask=mask)


def _scale_lowering(ctx, x, *, alpha):
    n = ctx.avals_in[0].size
    return triton_call_lowering(ctx, scale_in_place_kernel, x, grid=triton.cdiv(n, 512),
                                input_output_aliases={0: 0},
                                constexprs={"n": n, "alpha": alpha, "BLOCK": 512})


scale_in_place_p = define("test_scale_in_place", lambda x, *, alpha: [x], _scale_lowering)
batching.primitive_batchers[scale_in_place_p] = loop_batching_rule(
    scale_in_place_p, input_output_aliases={0: 0})


def scale_in_place(x, alpha=3.0):
    return scale_in_place_p.bind(x, alpha=alpha)[0]


# Two results; scalars and a constexpr sit between the pointers, as in TransformerEngine's.
@triton.jit
def sum_diff_kernel(x_ptr, n, y_ptr, sum_ptr, BLOCK: tl.constexpr, diff_ptr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(sum_ptr + offsets, x + y, mask=mask)
    tl.store(diff_ptr + offsets, x - y, mask=mask)


def _sum_diff_lowering(ctx, x, y):
    n = ctx.avals_in[0].size
    return triton_call_lowering(ctx, sum_diff_kernel, x, y, grid=(triton.cdiv(n, 256),),
                                constexprs={"n": n, "BLOCK": 256})


sum_diff_p = define("test_sum_diff", lambda x, y: [x, x], _sum_diff_lowering)
batching.primitive_batchers[sum_diff_p] = loop_batching_rule(sum_diff_p)


def sum_diff(x, y):
    return tuple(sum_diff_p.bind(x, y))


# Two calls in one rule, the second on the first's result: x * 2, then * 3.
@triton.jit
def scaled_copy_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * alpha, mask=mask)


def _two_calls_lowering(ctx, x):
    n = ctx.avals_in[0].size
    grid, constexprs = (triton.cdiv(n, 256),), {"n": n, "BLOCK": 256}
    [doubled] = triton_call_lowering(ctx, scaled_copy_kernel, x, grid=grid,
                                     constexprs={**constexprs, "alpha": 2.0})
    return triton_call_lowering(ctx, scaled_copy_kernel, doubled, grid=grid,
                                constexprs={**constexprs, "alpha": 3.0})


two_calls_p = define("test_two_calls", lambda x: [x], _two_calls_lowering)


def six_times(x):
    return two_calls_p.bind(x)[0]


# Row-wise absolute max, split over the rows of a mesh by custom_partitioning: each shard runs
# the inner primitive on its own rows.
@triton.jit
def row_amax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + row * n_cols + offsets, mask=offsets < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.max(tl.abs(x), axis=0))


def _row_amax_lowering(ctx, x):
    rows, cols = ctx.avals_in[0].shape
    return triton_call_lowering(ctx, row_amax_kernel, x, grid=(rows,),
                                constexprs={"n_cols": cols,
                                            "BLOCK": triton.next_power_of_2(cols)})


row_amax_p = define("test_row_amax",
                    lambda x: [jax.core.ShapedArray(x.shape[:1], x.dtype)], _row_amax_lowering)


@custom_partitioning
def row_amax_sharded(x):
    return row_amax_p.bind(x)[0]


def _rows_spec(arg_shape):
    spec = arg_shape.sharding.spec
    return PartitionSpec(spec[0] if len(spec) else None, None)


def _partition(mesh, arg_shapes, result_shape):
    del result_shape
    spec = _rows_spec(arg_shapes[0])
    in_sharding = NamedSharding(mesh, spec)
    out_sharding = NamedSharding(mesh, PartitionSpec(spec[0]))
    return mesh, lambda x: row_amax_p.bind(x)[0], out_sharding, (in_sharding,)


def _infer(mesh, arg_shapes, result_shape):
    del result_shape
    return NamedSharding(mesh, PartitionSpec(_rows_spec(arg_shapes[0])[0]))


row_amax_sharded.def_partition(partition=_partition,
                               infer_sharding_from_operands=_infer,
                               sharding_rule="i j -> i")


def row_amax_reference(x):
    return jnp.max(jnp.abs(x), axis=1)


# A Gluon kernel: its layouts need the target's warp size, so each platform gets its own rule.
GLUON_WARPS = 4


def _gluon_copy_lowering(ctx, x, *, warp_size):
    from tests.support import gluon_kernels

    n = ctx.avals_in[0].size
    return triton_call_lowering(ctx, gluon_kernels.copy_kernel, x, grid=triton.cdiv(n, 1024),
                                num_warps=GLUON_WARPS,
                                constexprs={"n": n, "BLOCK": 1024, "WARP_SIZE": warp_size,
                                            "NUM_WARPS": GLUON_WARPS})


gluon_copy_p = Primitive("test_gluon_copy")
gluon_copy_p.multiple_results = True
gluon_copy_p.def_impl(functools.partial(jax._src.dispatch.apply_primitive, gluon_copy_p))
gluon_copy_p.def_abstract_eval(lambda x: [x])
for _platform, _warp in (("cuda", 32), ("rocm", 64)):
    mlir.register_lowering(gluon_copy_p, functools.partial(_gluon_copy_lowering, warp_size=_warp),
                           platform=_platform)


def gluon_copy(x):
    return gluon_copy_p.bind(x)[0]
