"""`partitioned`: a function made of Triton calls, split across devices by an einsum-like rule
(`Rule`). A call binds `partitioned_p`, whose lowering wraps the function in JAX's
custom_partitioning ([Sharding and many processes](multi-device.md)).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

import jax
from jax import lax
from jax._src import core, dispatch
from jax.experimental.custom_partitioning import SdyShardingRule, custom_partitioning
from jax.interpreters import ad, batching, mlir
from jax.sharding import NamedSharding, PartitionSpec

from jax_triton_rocm.routes import _arch
from jax_triton_rocm.routes.cpu import _shard_callbacks

_COMBINE = {"sum": lax.psum, "max": lax.pmax, "min": lax.pmin}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclasses.dataclass(frozen=True)
class Rule:
    """A parsed rule: its text (for messages), one tuple of dimension names per operand and per
    output, and (name, "sum" | "max" | "min") for each contracted name kept split."""

    text: str
    operands: tuple[tuple[str, ...], ...]
    results: tuple[tuple[str, ...], ...]
    reductions: tuple[tuple[str, str], ...] = ()

    @property
    def contracted(self) -> frozenset[str]:
        outputs = {name for names in self.results for name in names}
        return frozenset(n for names in self.operands for n in names if n not in outputs)

    def may_split(self, name: str) -> bool:
        """Whether a dimension named `name` may stay split across devices for the call."""
        return name not in self.contracted or name in dict(self.reductions)

    def batched(self, mapped: Sequence[bool]) -> Rule:
        """The rule under `jax.vmap`: a new leading name on mapped operands and outputs."""
        taken = {n for names in self.operands + self.results for n in names}
        new = next(f"vmap{i}" for i in range(len(taken) + 1) if f"vmap{i}" not in taken)
        operands = tuple((new, *names) if m else names for names, m in zip(self.operands, mapped))
        results = tuple((new, *names) for names in self.results)
        text = " -> ".join(", ".join(" ".join(names) for names in specs)
                           for specs in (operands, results))
        return dataclasses.replace(self, text=text, operands=operands, results=results)


def _refuse(text: str, problem: str) -> ValueError:
    return ValueError(
        f"partitioned: rule {text!r}: {problem}. A rule names each dimension, names separated "
        f"by spaces, operands by commas, one '->' before the outputs: \"b n, b n -> b n\".")


def _specs(text: str, side: str, what: str) -> tuple[tuple[str, ...], ...]:
    if not side.strip():
        return ()
    specs = []
    for position, spec in enumerate(side.split(",")):
        names = spec.split()
        for name in names:
            if _NAME.match(name):
                continue
            if "..." in name:
                problem = "'...' is not supported: name every dimension"
            elif "(" in name or ")" in name:
                problem = "compound dimensions '(...)' are not supported: one name per dimension"
            else:
                problem = (f"{what} {position} has {name!r}, which is not a name (letters, "
                           f"digits, _)")
            raise _refuse(text, problem)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise _refuse(text, f"{what} {position} names two of its dimensions "
                                f"{', '.join(repeated)}; each dimension needs its own name")
        specs.append(tuple(names))
    return tuple(specs)


def parse_rule(text: Any, reductions: Mapping[str, str] | None = None) -> Rule:
    """Parses `text`; `reductions` maps contracted names to "sum", "max" or "min"."""
    if not isinstance(text, str):
        raise TypeError(f"partitioned: the rule must be a string such as \"b n, b n -> b n\", "
                        f"not {type(text).__name__} {text!r}.")
    if reductions is not None and not isinstance(reductions, Mapping):
        raise TypeError(f"partitioned: reductions must map contracted names to one of "
                        f"{', '.join(_COMBINE)}, e.g. {{'k': 'sum'}}, not {reductions!r}.")
    if text.count("->") != 1:
        raise _refuse(text, f"it has {text.count('->')} '->' instead of one")
    left, right = text.split("->")
    operands, results = _specs(text, left, "operand"), _specs(text, right, "output")
    if not results:
        raise _refuse(text, "it names no output; a partitioned function returns at least one")
    inputs = {n for names in operands for n in names}
    unknown = [n for names in results for n in names if n not in inputs]
    if unknown:
        raise _refuse(text, f"output dimension(s) {', '.join(dict.fromkeys(unknown))} appear in "
                            f"no operand, so no operand says how to split them")
    rule = Rule(text=text, operands=operands, results=results)
    pairs = []
    for name, kind in (reductions or {}).items():
        if kind not in _COMBINE:
            raise _refuse(text, f"reductions[{name!r}] = {kind!r} is none of "
                                f"{', '.join(_COMBINE)}")
        if name not in rule.contracted:
            where = "is an output dimension (free)" if name in inputs else "is in no operand"
            contracted = ", ".join(sorted(rule.contracted)) or "none here"
            raise _refuse(text, f"reductions names {name!r}, which {where}; only dimensions "
                                f"found in operands alone ({contracted}) are reduced")
        pairs.append((name, kind))
    return dataclasses.replace(rule, reductions=tuple(pairs))


def check_shapes(rule: Rule, shapes: Sequence[tuple[int, ...]],
                 sizes: dict[str, int] | None = None) -> dict[str, int]:
    """The size of every name, from the operands' `shapes`, or with the operands' `sizes`, of
    the outputs' leaves; TypeError or ValueError where they disagree with `rule`."""
    specs, what = (rule.operands, "operand") if sizes is None else (rule.results, "output")
    if sizes is None and len(shapes) != len(specs):
        raise TypeError(
            f"partitioned: rule {rule.text!r} has {len(rule.operands)} operand(s) but the "
            f"function was called with {len(shapes)} array(s); give one array per operand of "
            f"the rule (static values by keyword).")
    if len(shapes) != len(specs):
        raise ValueError(
            f"partitioned: rule {rule.text!r} names {len(rule.results)} output(s) but the "
            f"function returned {len(shapes)} array(s) (shapes {list(shapes)}); give one output "
            f"spec per array it returns, in the order jax.tree.leaves lists them.")
    sizes = dict(sizes or {})
    seen = {name: "the operands" for name in sizes}
    for position, (names, shape) in enumerate(zip(specs, shapes)):
        if len(names) != len(shape):
            raise ValueError(
                f"partitioned: rule {rule.text!r}: {what} {position} has shape {tuple(shape)} "
                f"(rank {len(shape)}) but its spec {' '.join(names)!r} names {len(names)} "
                f"dimension(s); write one name per dimension.")
        for axis, (name, size) in enumerate(zip(names, shape)):
            if name in sizes and sizes[name] != size:
                raise ValueError(
                    f"partitioned: rule {rule.text!r}: dimension {name!r} has size "
                    f"{sizes[name]} in {seen[name]} but {size} in {what} {position} (axis "
                    f"{axis}, shape {tuple(shape)}); one name stands for one size.")
            sizes.setdefault(name, size)
            seen.setdefault(name, f"{what} {position}")
    return sizes


def assign_axes(rule: Rule, sources: Sequence[tuple[Sequence[tuple[str, ...]], Sequence[Any]]],
                sizes: Mapping[str, int], mesh_shape: Mapping[str, int]) -> dict[str, tuple]:
    """Which mesh axes split each name: the first of `sources` (the rule's specs, a PartitionSpec
    or None per array) that may split it, evenly, on axes no other name took."""
    axes_of: dict[str, tuple] = {}
    used: set[str] = set()
    for specs, partitions in sources:
        for names, partition in zip(specs, partitions):
            entries = tuple(partition or ()) + (None,) * len(names)
            for name, entry in zip(names, entries):
                # The entry's mesh axes: None and PartitionSpec.UNCONSTRAINED have none.
                entry = (entry,) if isinstance(entry, str) else entry
                entry = entry if isinstance(entry, (tuple, list)) else ()
                axes = tuple(a for a in entry if isinstance(a, str))
                if (name in axes_of or not axes or not rule.may_split(name)
                        or used.intersection(axes)
                        or sizes[name] % math.prod(mesh_shape[a] for a in axes)):
                    continue
                axes_of[name] = axes
                used.update(axes)
    return axes_of


def partition_spec(names: Sequence[str], axes_of: Mapping[str, tuple]) -> tuple:
    """The PartitionSpec entries of an array with dimensions `names`."""
    axes = [axes_of.get(name, ()) for name in names]
    return tuple(None if not a else a[0] if len(a) == 1 else a for a in axes)


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
    parsed = parse_rule(rule, reductions)

    def decorate(fun: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fun):
            raise TypeError(f"partitioned({rule!r}) decorates a function, not "
                            f"{type(fun).__name__} {fun!r}.")
        return _Partitioned(fun, parsed, name or getattr(fun, "__name__", repr(fun)))

    return decorate


class _Partitioned:
    """What `partitioned` returns: calls the function through `partitioned_p`."""

    def __init__(self, fun: Callable[..., Any], rule: Rule, name: str) -> None:
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


def bind(fun: Callable[..., Any], rule: Rule, arrays: Sequence[Any], name: str) -> Any:
    """`fun(*arrays)` as one `partitioned_p` equation, its arrays and outputs checked."""
    sizes = check_shapes(rule, [tuple(np.shape(a)) for a in arrays])
    specs = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in arrays]
    closed, out_shape = jax.make_jaxpr(fun, return_shape=True)(*specs)
    leaves, tree = jax.tree.flatten(out_shape)
    check_shapes(rule, [tuple(leaf.shape) for leaf in leaves], sizes)
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


def _callbacks(fun: Callable[..., Any], rule: Rule, jaxpr: Any,
               reserved: _shard_callbacks.ReservedCallback | None, name: str) -> dict[str, Any]:
    """custom_partitioning's callbacks for one lowering of a partitioned call, by the keyword
    of `def_partition` that takes each."""
    sizes = check_shapes(rule, [a.shape for a in jaxpr.in_avals])

    def axes(mesh: Any, operands: Sequence[Any] = (), results: Sequence[Any] = ()) -> dict:
        shardings = [getattr(s, "sharding", None) for s in (*operands, *results)]
        if getattr(mesh, "empty", False):
            raise ValueError(
                f"partitioned function {name}: JAX gave no mesh for its shardings "
                f"({shardings}); split its operands with NamedShardings over one "
                f"jax.sharding.Mesh.")
        specs = [s.spec if isinstance(s, NamedSharding) else None for s in shardings]
        sources = [(rule.operands, specs[:len(operands)]),
                   (rule.results if results else (), specs[len(operands):])]
        return assign_axes(rule, sources, sizes, dict(mesh.shape))

    def shardings(mesh: Any, axes_of: dict, specs) -> list:
        return [NamedSharding(mesh, PartitionSpec(*partition_spec(names, axes_of)))
                for names in specs]

    def partition(mesh, arg_shapes, result_shape):
        axes_of = axes(mesh, arg_shapes, result_shape)
        combined = [(axes_of[n], _COMBINE[kind]) for n, kind in rule.reductions if n in axes_of]

        def per_shard(*shards):
            outs = _shard_callbacks.shard_body(_flat(fun), shards, reserved, name)
            for mesh_axes, combine in combined:
                outs = [combine(out, mesh_axes) for out in outs]
            return list(outs)

        return (mesh, per_shard, shardings(mesh, axes_of, rule.results),
                tuple(shardings(mesh, axes_of, rule.operands)))

    def infer(mesh, arg_shapes, result_shape):
        return shardings(mesh, axes(mesh, arg_shapes), rule.results)

    def propagate(mesh, user_shape):
        return shardings(mesh, axes(mesh, results=user_shape), rule.results)

    # Contracted dimensions are reduction factors where reduced, else need replication.
    reduced = tuple(n for n, _ in rule.reductions)
    gathered = tuple(sorted(rule.contracted.difference(reduced)))
    return dict(partition=partition, infer_sharding_from_operands=infer,
                propagate_user_sharding=propagate,
                sharding_rule=SdyShardingRule(rule.operands, rule.results,
                                              reduction_factors=reduced,
                                              need_replication_factors=gathered))


def _lowering(ctx, *operands, fun, rule, jaxpr, name):
    devices = getattr(ctx.module_context.axis_context, "num_devices", 1)
    if _arch.for_export(ctx) and devices > 1:
        raise NotImplementedError(
            f"jax.export of partitioned function {name} ({rule.text!r}) across {devices} "
            f"devices: its partitioning is a Python callback of this process (JAX's "
            f"custom_partitioning), which an exported program cannot carry. Export it for one "
            f"device, or split it yourself with jax.shard_map inside the exported function "
            f"(each shard's call is then exported as it is).")
    reserved = (_shard_callbacks.ReservedCallback(ctx.module_context)
             if "cpu" in ctx.module_context.platforms else None)
    # custom_partitioning takes no function with constants; inside a jit they are the jit's.
    split = custom_partitioning(jax.jit(core.jaxpr_as_fun(jaxpr)))
    split.def_partition(**_callbacks(fun, rule, jaxpr, reserved, name))
    return mlir.lower_fun(split, multiple_results=True)(ctx, *operands)


mlir.register_lowering(partitioned_p, _lowering)
