"""`jax.vmap` of a `triton_call`: the batching rule of `triton_kernel_p`.

By default a batched call is a loop inside the computation: `lax.map` over the batch binds the
primitive once per example, on that example's slices, with unbatched operands passed whole (a
call with aliased outputs updates each example in place instead, `_loop_in_place`). It is
correct for every kernel, and the loop compiles to one kernel launch in a while loop whatever the
batch size.

A kernel can instead handle the whole batch in one launch. Its author opts in with
`triton_call(..., batch_grid_axis=k)` (k = 0, 1 or 2) and writes the kernel to this protocol:

- The unbatched call's grid leaves axis k at size 1 (a shorter grid does: missing axes are 1).
- Under `jax.vmap` with B examples (the product of all batch sizes under nested vmaps), every
  array argument and every output has B leading examples, one after the other in memory: example
  b of an array starts `b * E` elements after its pointer, E being the number of elements of one
  example (the unbatched call's array size). Unbatched operands are broadcast (copied B times).
- The grid's axis k has B programs; `tl.program_id(k)` is the example the program works on, and
  the kernel offsets each pointer by `tl.program_id(k) * E` for that array.
- Scalars and constexprs are the unbatched call's. A callable grid sees the unbatched shapes; a
  `@triton.heuristics` or `early_config_prune` sees the batched ones.

Unbatched, `tl.program_id(k)` is 0, so the same kernel serves both.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import jax
from jax import lax
from jax.interpreters import batching

from jax_triton_rocm.base import _values
from jax_triton_rocm.plan import _plan
from jax_triton_rocm.spec._spec import BatchedLaunch, KernelCallSpec
from jax_triton_rocm.routes._primitive import triton_kernel_p


def _loop(primitive: Any, args: list, dims: list, params: dict[str, Any],
          aliases: tuple[tuple[int, int], ...], out_shapes: Sequence[Any]):
    """One call per example, in a loop over the batched operands."""
    if aliases:
        return _loop_in_place(primitive, args, dims, params, aliases, out_shapes)
    mapped = [d is not None for d in dims]
    batched = tuple(jax.numpy.moveaxis(a, d, 0) for a, d, m in zip(args, dims, mapped) if m)

    def one_example(slices):
        given = iter(slices)
        operands = [next(given) if m else a for a, m in zip(args, mapped)]
        return tuple(_bind(primitive, operands, params))

    outs = lax.map(one_example, batched)
    return _results(primitive, list(outs))


def _loop_in_place(primitive: Any, args: list, dims: list, params: dict[str, Any],
                   aliases: tuple[tuple[int, int], ...], out_shapes: Sequence[Any]):
    """The loop for a call with aliased outputs: each example is updated where it lies.

    An aliased output's whole batch is carried through the loop, starting as its input's batch;
    each example is sliced from it, handed to the kernel, and written back at the same place. XLA
    may pass a slice to a custom call as an address inside the whole array (its dynamic-slice
    fusion), and then an output aliased to a slice of one array but written into a slice of
    another would not hold the input the kernel reads: here both slices are one.
    """
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    batched = [jax.numpy.moveaxis(a, d, 0) if d is not None else None for a, d in zip(args, dims)]
    aliased = dict((o, i) for i, o in aliases)
    carried = []
    for o, shape in enumerate(out_shapes):
        if o in aliased:
            i = aliased[o]
            whole = batched[i] if batched[i] is not None else jax.numpy.broadcast_to(
                args[i], (size, *args[i].shape))
            carried.append(whole)
        else:
            carried.append(jax.numpy.zeros((size, *shape.shape), shape.dtype))

    def one_example(index, outs):
        operands = [a if b is None else lax.dynamic_index_in_dim(b, index, keepdims=False)
                    for a, b in zip(args, batched)]
        for o, i in aliased.items():
            operands[i] = lax.dynamic_index_in_dim(outs[o], index, keepdims=False)
        results = _bind(primitive, operands, params)
        return tuple(lax.dynamic_update_index_in_dim(whole, result, index, 0)
                     for whole, result in zip(outs, results))

    outs = lax.fori_loop(0, size, one_example, tuple(carried))
    return _results(primitive, list(outs))


def _bind(primitive: Any, operands: list, params: dict[str, Any]) -> list:
    results = primitive.bind(*operands, **params)
    return list(results) if primitive.multiple_results else [results]


def _results(primitive: Any, outs: list):
    if primitive.multiple_results:
        return outs, [0] * len(outs)
    return outs[0], 0


def loop_batching_rule(primitive: Any, *, input_output_aliases: Mapping[int, int] | None = None):
    """A `jax.vmap` rule for a primitive of your own whose lowering calls `triton_call_lowering`.

    Register it with `jax.interpreters.batching.primitive_batchers[primitive] = rule`. Under
    `jax.vmap` the primitive is bound once per example inside the computation (a loop), on that
    example's slices, with unbatched operands passed whole: correct for any kernel.

    Args:
      primitive: the primitive (single or multiple results).
      input_output_aliases: the `{operand index: result index}` its lowering passes to
        `triton_call_lowering`, so that in-place kernels update each example where it lies.

    Returns:
      The batching rule.

    Raises:
      TypeError: `input_output_aliases` is not a dict of int indices.
    """
    given = {} if input_output_aliases is None else input_output_aliases
    if not isinstance(given, Mapping) or not all(
            _values.is_int(i) and _values.is_int(o) for i, o in given.items()):
        raise TypeError(f"loop_batching_rule: input_output_aliases={input_output_aliases!r} must "
                        f"be a dict {{operand index: result index}}, e.g. {{0: 0}}, as the "
                        f"lowering passes it to triton_call_lowering.")
    aliases = tuple(sorted((int(i), int(o)) for i, o in given.items()))

    def rule(args: list, dims: list, **params: Any):
        out_shapes = ()
        if aliases:
            example = [a if d is None else jax.ShapeDtypeStruct(
                a.shape[:d] + a.shape[d + 1:], a.dtype) for a, d in zip(args, dims)]
            out_shapes = jax.tree_util.tree_leaves(jax.eval_shape(
                lambda *xs: _bind(primitive, list(xs), params), *example))
        return _loop(primitive, args, dims, params, aliases, out_shapes)

    return rule


def _one_launch(primitive: Any, size: int, args: list, dims: list, spec: KernelCallSpec):
    """One launch for the whole batch, the kernel following the `batch_grid_axis` protocol."""
    operands = [jax.numpy.broadcast_to(a, (size, *a.shape)) if d is None
                else jax.numpy.moveaxis(a, d, 0) for a, d in zip(args, dims)]
    batch = spec.batch or BatchedLaunch(spec.batch_grid_axis, 1, 0)
    batched = dataclasses.replace(
        spec, batch=BatchedLaunch(batch.axis, batch.size * size, batch.depth + 1),
        out_shapes=tuple(jax.ShapeDtypeStruct((size, *s.shape), s.dtype)
                         for s in spec.out_shapes))
    if not callable(spec.grid):
        # A static grid that uses the batch axis fails here (the target's limits at lowering).
        _plan.launch_grid(batched, {}, num_warps=spec.num_warps or _plan.DEFAULT_NUM_WARPS)
    outs = primitive.bind(*operands, spec=batched)
    return list(outs), [0] * len(outs)


def batch_rule(primitive: Any, args: list, dims: list, *, spec: KernelCallSpec):
    """The batching rule of `triton_kernel_p` (`primitive`): a loop, or one batched launch."""
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    if spec.batch_grid_axis is None:
        return _loop(primitive, args, dims, {"spec": spec}, spec.input_output_aliases,
                     spec.out_shapes)
    return _one_launch(primitive, size, args, dims, spec)


batching.primitive_batchers[triton_kernel_p] = functools.partial(batch_rule, triton_kernel_p)
