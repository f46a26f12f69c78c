"""`partitioned`: a function made of Triton calls, split across devices by an einsum-like rule.
A call binds `partitioned_p`, whose lowering wraps the function in JAX's custom_partitioning, with
callbacks that read the rule ([Sharding and many processes](multi-device.md)).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import jax
from jax import lax
from jax._src import core, dispatch
from jax.experimental.custom_partitioning import SdyShardingRule, custom_partitioning
from jax.interpreters import ad, batching, mlir
from jax.sharding import NamedSharding, PartitionSpec

from jax_triton_rocm.api import _rule
from jax_triton_rocm.routes import _arch
from jax_triton_rocm.routes.cpu import _shard_callbacks

_COMBINE = {"sum": lax.psum, "max": lax.pmax, "min": lax.pmin}

partitioned_p = core.Primitive("triton_partitioned")
partitioned_p.multiple_results = True
partitioned_p.def_impl(functools.partial(dispatch.apply_primitive, partitioned_p))
partitioned_p.def_abstract_eval(lambda *avals, jaxpr, **params: jaxpr.out_avals)
# As JAX's own custom_partitioning: a jit of only this primitive still lowers with its devices.
dispatch.prim_requires_devices_during_lowering.add(partitioned_p)


def partitioned(rule: str, *, reductions: Mapping[str, str] | None = None,
                name: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Makes a function of Triton calls run per shard on arrays split across devices.

        @jtr.partitioned("b n, b n -> b n")
        def add(x, y):
            return jtr.triton_call(x, y, x.size, kernel=add_kernel, out_shape=x, ...)

    Args:
      rule: one name per dimension of every operand, then of every output:
        `"b n, b n -> b n"`, `"b n -> b"`, `"b n, -> b n"` (a scalar operand). A name in an
        operand and an output may be split: each device calls the function on its slice. A
        name only in operands (contracted) is gathered before the call, unless `reductions`
        names it.
      reductions: {contracted name: "sum" | "max" | "min"}: that dimension stays split, each
        device's outputs are partial results over its slice, combined across the devices
        holding the other slices (`lax.psum`, `pmax`, `pmin`) into the outputs.
      name: what errors call the function (default: its `__name__`).

    Returns:
      A decorator. The decorated function takes one array per operand of the rule (keyword
      arguments are static, passed to every shard's call) and returns what the function
      returns; its output leaves follow the rule's outputs in order.

    Raises:
      TypeError / ValueError, at once: a malformed rule, an output name found in no operand, a
        reduction that names no contracted dimension. At the call, before the function is
        traced: arrays whose number or ranks differ from the rule's, or a name with two sizes.
    """
    parsed = _rule.parse_rule(rule, reductions)

    def decorate(fun: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fun):
            raise TypeError(f"partitioned({rule!r}) decorates a function, not "
                            f"{type(fun).__name__} {fun!r}.")
        return _Partitioned(fun, parsed, name or getattr(fun, "__name__", repr(fun)))

    return decorate


class _Partitioned:
    """What `partitioned` returns: calls the function through `partitioned_p`."""

    def __init__(self, fun: Callable[..., Any], rule: _rule.Rule, name: str) -> None:
        functools.update_wrapper(self, fun)
        self.fun, self.rule, self.name = fun, rule, name
        # Called on arrays rather than tracers, it runs jitted (one compile per shape).
        self._eager = jax.jit(self._call, static_argnums=0)

    def __repr__(self) -> str:
        return f"partitioned({self.rule.text!r})({self.name})"

    def __call__(self, *args: Any, **static: Any) -> Any:
        arrays = [a if isinstance(a, (jax.Array, np.ndarray, core.Tracer)) else self._scalar(i, a)
                  for i, a in enumerate(args)]
        key = tuple(sorted(static.items()))
        try:
            hash(key)
        except TypeError as err:
            raise TypeError(f"partitioned function {self.name}: keyword arguments are static "
                            f"and must be hashable; got {dict(static)!r}. Pass arrays "
                            f"positionally, one per operand of {self.rule.text!r}.") from err
        if any(isinstance(a, core.Tracer) for a in arrays):
            return self._call(key, *arrays)
        return self._eager(key, *arrays)

    def _scalar(self, position: int, value: Any) -> Any:
        if isinstance(value, (bool, int, float, complex, np.generic)):
            return jax.numpy.asarray(value)
        raise TypeError(f"partitioned function {self.name}: argument {position} is "
                        f"{type(value).__name__} {value!r}, not an array; give one array per "
                        f"operand of {self.rule.text!r} and static values by keyword.")

    def _call(self, static: tuple, *arrays: Any) -> Any:
        fun = functools.partial(self.fun, **dict(static)) if static else self.fun
        return bind(fun, self.rule, arrays, self.name)


def bind(fun: Callable[..., Any], rule: _rule.Rule, arrays: Sequence[Any], name: str) -> Any:
    """`fun(*arrays)` as one `partitioned_p` equation; checks the arrays against `rule` before
    tracing `fun`, then its outputs."""
    sizes = _rule.check_operands(rule, [tuple(np.shape(a)) for a in arrays])
    specs = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in arrays]
    closed, out_shape = jax.make_jaxpr(fun, return_shape=True)(*specs)
    leaves, tree = jax.tree.flatten(out_shape)
    _rule.check_results(rule, [tuple(leaf.shape) for leaf in leaves], sizes)
    if any(isinstance(c, core.Tracer) for c in closed.consts):
        raise ValueError(
            f"partitioned function {name} uses a traced value it does not take as an argument "
            f"(a closure over an array of the enclosing jit); pass it as an argument, with its "
            f"dimensions in the rule {rule.text!r}, so that it is split with the others.")
    outs = partitioned_p.bind(*arrays, fun=fun, rule=rule, jaxpr=closed, name=name)
    return jax.tree.unflatten(tree, outs)


def _flat(fun: Callable[..., Any]) -> Callable[..., list]:
    return lambda *xs: jax.tree.leaves(fun(*xs))


def _batching_rule(args, dims, *, fun, rule, jaxpr, name):
    del jaxpr
    mapped = [d is not None for d in dims]
    moved = [jax.numpy.moveaxis(a, d, 0) if m else a for a, d, m in zip(args, dims, mapped)]
    vmapped = jax.vmap(_flat(fun), in_axes=tuple(0 if m else None for m in mapped))
    outs = bind(vmapped, rule.batched(mapped), moved, name)
    return outs, [0] * len(outs)


batching.primitive_batchers[partitioned_p] = _batching_rule


def _refuse_partitioned_jvp(primals, tangents, *, name, rule, **params):
    raise NotImplementedError(
        f"jax.grad / jax.jvp of partitioned function {name} ({rule.text!r}) is not supported. "
        f"Put the partitioned function inside a jax.custom_vjp (or custom_jvp) whose backward "
        f"pass is partitioned too.")


ad.primitive_jvps[partitioned_p] = _refuse_partitioned_jvp


class _Callbacks:
    """custom_partitioning's callbacks for one lowering of a partitioned call."""

    def __init__(self, fun: Callable[..., Any], rule: _rule.Rule, jaxpr: Any,
                 route: _shard_callbacks.Route | None, name: str) -> None:
        self.fun, self.rule, self.route, self.name = fun, rule, route, name
        self.sizes = _rule.check_operands(rule, [a.shape for a in jaxpr.in_avals])

    def sharding_rule(self) -> SdyShardingRule:
        # Contracted dimensions are reduction factors where reduced, else need replication.
        reduced = tuple(name for name, _ in self.rule.reductions)
        gathered = tuple(sorted(self.rule.contracted.difference(reduced)))
        return SdyShardingRule(self.rule.operands, self.rule.results,
                               reduction_factors=reduced, need_replication_factors=gathered)

    def _axes(self, mesh: Any, operands: Sequence[Any] = (), results: Sequence[Any] = ()):
        """The mesh axes of every name, from the shardings of operands and results."""
        shardings = [getattr(s, "sharding", None) for s in (*operands, *results)]
        if getattr(mesh, "empty", False):
            raise ValueError(
                f"partitioned function {self.name}: JAX gave no mesh for its shardings "
                f"({shardings}); split its operands with NamedShardings over one "
                f"jax.sharding.Mesh.")
        specs = [s.spec if isinstance(s, NamedSharding) else None for s in shardings]
        sources = [(self.rule.operands, specs[:len(operands)]),
                   (self.rule.results if results else (), specs[len(operands):])]
        return _rule.assign_axes(self.rule, sources, self.sizes, dict(mesh.shape))

    def _shardings(self, mesh: Any, axes_of: dict, specs) -> list:
        return [NamedSharding(mesh, PartitionSpec(*_rule.partition_spec(names, axes_of)))
                for names in specs]

    def partition(self, mesh, arg_shapes, result_shape):
        axes_of = self._axes(mesh, arg_shapes, result_shape)
        arg_shardings = tuple(self._shardings(mesh, axes_of, self.rule.operands))
        combined = [(axes_of[n], _COMBINE[kind]) for n, kind in self.rule.reductions
                    if n in axes_of]

        def per_shard(*shards):
            outs = _shard_callbacks.shard_body(_flat(self.fun), shards, self.route, self.name)
            for axes, combine in combined:
                outs = [combine(out, axes) for out in outs]
            return list(outs)

        return mesh, per_shard, self._shardings(mesh, axes_of, self.rule.results), arg_shardings

    def infer(self, mesh, arg_shapes, result_shape):
        return self._shardings(mesh, self._axes(mesh, arg_shapes), self.rule.results)

    def propagate(self, mesh, user_shape):
        return self._shardings(mesh, self._axes(mesh, results=user_shape), self.rule.results)


def _lowering(ctx, *operands, fun, rule, jaxpr, name):
    devices = getattr(ctx.module_context.axis_context, "num_devices", 1)
    if _arch.for_export(ctx) and devices > 1:
        raise NotImplementedError(
            f"jax.export of partitioned function {name} ({rule.text!r}) across {devices} "
            f"devices: its partitioning is a Python callback of this process (JAX's "
            f"custom_partitioning), which an exported program cannot carry. Export it for one "
            f"device, or split it yourself with jax.shard_map inside the exported function "
            f"(each shard's call is then exported as it is).")
    route = (_shard_callbacks.Route(ctx.module_context)
             if "cpu" in ctx.module_context.platforms else None)
    callbacks = _Callbacks(fun, rule, jaxpr, route, name)
    # custom_partitioning takes no function with constants of its own; inside a jit they are
    # the jit's.
    split = custom_partitioning(jax.jit(core.jaxpr_as_fun(jaxpr)))
    split.def_partition(
        partition=callbacks.partition, infer_sharding_from_operands=callbacks.infer,
        propagate_user_sharding=callbacks.propagate, sharding_rule=callbacks.sharding_rule())
    return mlir.lower_fun(split, multiple_results=True)(ctx, *operands)


mlir.register_lowering(partitioned_p, _lowering)
