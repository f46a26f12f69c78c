"""`triton_call`'s arguments checked into a `BoundCall`, or relaid into an earlier call's layout
(docs/design.md, "The trace of a call" and "Re-used layouts"). Each `Ref` is read into an operand
aliased to an extra result, so every route sees plain aliasing."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import jax

from jax_triton_rocm.base import _state, _values
from jax_triton_rocm.checks import _binder, _checker
from jax_triton_rocm.checks._arguments import CallArguments
from jax_triton_rocm.checks import _misplaced
from jax_triton_rocm.kernel import _spec
from jax_triton_rocm.kernel._spec import KernelCallSpec



@dataclasses.dataclass(frozen=True)
class KeptCall:
    """A checked call without its arrays: `operand_args`, per primitive operand its positional
    argument; `scalars`, (place in the layout, index or keyword) per runtime scalar;
    `out_order`, per primitive result its output; `user_results`, per output its result."""

    user_results: tuple[int, ...]
    spec: KernelCallSpec
    operand_args: tuple[int, ...]
    scalars: tuple[tuple[int, int | str], ...]
    out_order: tuple[int, ...]


_PLAIN_TYPES = frozenset((type(None), bool, int, str, bytes))
_PLAIN_OR_TUPLE = _PLAIN_TYPES | {tuple}


@dataclasses.dataclass(frozen=True)
class BoundCall:
    """A checked `triton_call`: bind `operands` (each Ref read) with `spec`."""

    spec: KernelCallSpec
    placed: Placed
    out_tree: Any
    operands: tuple  # the primitive's operands: arrays as given, each Ref read


@dataclasses.dataclass(frozen=True)
class Placed:
    """What a call's spec does not hold of its primitive: the `operands` as given (a Ref is read
    at the call); `user_results`: per output, its result; `refs`: (operand, result) per Ref."""

    operands: tuple
    user_results: tuple[int, ...]
    refs: tuple[tuple[int, int], ...]


@dataclasses.dataclass(frozen=True)
class MappedZeroed:
    """A callable `zeroed_outputs` mapped to the primitive's results; compared by value, so
    that JAX's caches keyed on the spec still hit."""

    fn: Callable[[dict[str, Any]], Any]
    results: tuple[int, ...]

    def __call__(self, meta: dict[str, Any]) -> tuple[int, ...]:
        return tuple(self.results[o] if 0 <= o < len(self.results) else o for o in self.fn(meta))


def check_triton_call(call: CallArguments, own_keywords: tuple[str, ...]) -> BoundCall:
    """Checks a `triton_call` in full, or relays it into an earlier one's layout."""
    kept_as = None if call.operands else layout_key(call)
    layout = None if kept_as is None else _state.CALL_LAYOUTS.get(kept_as, kernel=call.kernel)
    if layout is not None and (bound := relaid_call(layout, call)) is not None:
        return bound
    unwrapped, out_shapes, convention = call.unwrapped, call.out_shapes, call.convention
    binding = _binder.bind_arguments(call, own_keywords)
    # A kernel that takes nothing at launch (no parameters, or constexprs only) can only be
    # called for what it does besides outputs (a print, an assert): kept, as Triton launches it.
    side_effect = call.has_side_effect or all([param.constexpr for param in unwrapped.params])
    refuse_unused_call(call, binding, side_effect)
    placed, laid = place_outputs(call, binding, own_keywords)
    refs = {leaf.operand for leaf in binding.refs}
    # How the call names each operand, for what is checked once the kernel is compiled.
    counted = binding.leaves if convention == "out_type" else [
        leaf for leaf in binding.leaves if leaf.is_array]
    words = _spec.CallWords("", convention, tuple(
        (leaf.operand, leaf.what, j) for j, leaf in enumerate(counted)
        if leaf.operand is not None))
    refuse_own_named_parameter(call, binding, own_keywords)
    spec = _checker.check_call(
        "triton_call", kernel=call.kernel, unwrapped=unwrapped, **{**call.given, **laid},
        options=binding.options, has_side_effect=side_effect, cost_estimate=call.cost_estimate,
        backend_options=call.backend_options,
        by_keyword=tuple([unwrapped.jit_fn.arg_names[i] for i in sorted(binding.by_keyword)]),
        words=words, roles=call.roles)
    # Each Ref is read: the primitive takes values.
    bound = BoundCall(spec, placed, call.out_tree, tuple(
        [value[...] if i in refs else value for i, value in enumerate(placed.operands)]))
    # Kept where every operand is an array given positionally, no Ref, none made for an output.
    if kept_as is not None and not refs and len(spec.out_shapes) == len(out_shapes):
        keep_layout(kept_as, call, placed, spec)
    return bound


def refuse_unused_call(call: CallArguments, binding: _binder.Binding, side_effect: bool) -> None:
    """Raises ValueError for a call with no output, no Ref and no side effect, which JAX
    would drop."""
    if not call.out_shapes and not side_effect and not binding.refs:
        raise ValueError(
            f"{call.convention}={call.outputs!r} is empty and kernel {call.unwrapped.name} gets "
            f"no Ref operand, so nothing would use the call and JAX would drop it. Give it "
            f"outputs, e.g. {call.convention}=jax.ShapeDtypeStruct(x.shape, x.dtype), pass the "
            f"buffers it writes as Refs (jax.new_ref), or say has_side_effect=True.")


def refuse_own_named_parameter(call: CallArguments, binding: _binder.Binding,
                               own_keywords: tuple[str, ...]) -> None:
    """Raises TypeError for a parameter left unfilled because a keyword named like it is one
    of triton_call's own, and went to triton_call."""
    param = own_named_parameter(call.unwrapped, set(own_keywords) - binding.named,
                                len(call.args) + len(call.out_shapes))
    if param is not None:
        where = "constexprs" if param.is_constexpr else "operands"
        raise TypeError(
            f"Kernel {call.unwrapped.name}'s parameter {param.name!r} has the name "
            f"of an argument of triton_call itself ({param.name}=...), so a keyword "
            f"{param.name}= is triton_call's own and cannot fill it. Pass it by name in "
            f"{where}={{{param.name!r}: ...}} ("
            + ("a compile-time constant" if param.is_constexpr else
               "filled at launch; constexprs= compiles a value in") + ").")


def keep_layout(kept_as: tuple, call: CallArguments, placed: Placed,
                spec: KernelCallSpec) -> None:
    """Keeps the call's layout under `kept_as` for a call made again (`relaid_call`), where
    every operand is an argument given positionally and every runtime scalar is found."""
    operand_args: list[int | None] = [None] * len(placed.operands)
    scalars: list[tuple[int, int | str]] = []
    for index, value in enumerate(call.args):
        kind, where = spec.positional[index]
        if isinstance(value, jax.Array):
            if kind not in ("array", "input") or placed.operands[where] is not value:
                return
            operand_args[where] = index
        elif kind == "scalar" and where is value:
            scalars.append((index, index))
    scalars += [(index, name) for name, index in call.runtime.items()]
    if None not in operand_args and all(  # else an operand no argument gives
            [spec.positional[index] == ("scalar", call.keywords[name])
             for name, index in call.runtime.items()]):
        out_order = tuple([placed.user_results.index(r) for r in range(len(call.out_shapes))])
        _state.CALL_LAYOUTS.put(kept_as, KeptCall(
            placed.user_results, spec, tuple(operand_args), tuple(scalars), out_order),
            kernel=call.kernel)


_CONVENTIONS = {
    "out_type": "with out_type= (jax-triton 0.4), indices count every operand leaf in "
                "kernel-parameter order, scalars included",
    "out_shape": "indices count arrays only, not scalars, with out_shape= (jax-triton 0.3)",
}


def place_outputs(call: CallArguments, binding: _binder.Binding,
                  own_keywords: tuple[str, ...]) -> tuple[Placed, dict[str, Any]]:
    """Places a call's outputs on the non-constexpr parameters it left unfilled, in order:
    every output (0.3), or only those not aliased to an input (0.4); the results in parameter
    order, and one more per `Ref`, aliased to it. A call 0.3 could have made keeps 0.3's form.
    Returns the `Placed` and the layout as `check_call`'s keywords."""
    jit_fn, out_shapes = call.unwrapped.jit_fn, call.out_shapes
    entries, refs, n_args = binding.entries, binding.refs, len(call.args)
    # 0.3's positional form holds arrays and scalars; a positional constexpr of another kind
    # (a function, a dtype, a str, a tuple) goes by name, as the placed form takes it.
    shaped = not binding.by_keyword and not refs and all(
        [kind in ("input", "scalar") or (kind == "constexpr" and (
            value is None or isinstance(value, _spec.SCALAR_TYPES)))
         for kind, value in entries.values()])
    trailing = list(range(n_args, n_args + len(out_shapes)))
    pairs = aliased_leaves(call, binding)
    owners = output_owners(call, binding, {o for _, o in pairs}, shaped, own_keywords)
    owner_of = {p: o for o, p in owners.items()}
    order = sorted(owners, key=owners.get)
    order += [o for o in range(len(out_shapes)) if o not in order]
    user_results = tuple([order.index(o) for o in range(len(out_shapes))])
    output_params = [owners[o] for o in sorted(owners)]
    # Laid out as 0.3 lays it: the positional arguments only, arrays by their count among the
    # arrays, scalars and constexprs by value (a constexpr typed here; `_operand_entry` typed
    # the others); the placed form has one entry per parameter, the constexprs by name.
    as_0_3 = shaped and output_params == trailing
    positional, metaparams, n_arrays = [], dict(binding.metaparams), 0
    for i, param in enumerate(jit_fn.params[:n_args] if as_0_3 else jit_fn.params):
        kind, value = entries.get(i, ("keyword", None))
        if as_0_3:
            if kind == "constexpr" and value is not None:
                _spec.scalar(value, what=f"argument {i}")
            positional.append(("array", n_arrays) if kind == "input" else ("scalar", value))
            n_arrays += kind == "input"
        elif kind == "constexpr":
            metaparams[param.name] = value
            positional.append(("keyword", None))
        elif i in owner_of:
            positional.append(("output", user_results[owner_of[i]]))
        else:
            positional.append((kind, value))
    ref_results = tuple([(leaf.operand, len(order) + n) for n, leaf in enumerate(refs)])
    prim_aliases = {**{leaf.operand: user_results[o] for leaf, o in pairs}, **dict(ref_results)}
    return Placed(tuple(binding.operands), user_results, ref_results), dict(
        positional=tuple(positional), metaparams=metaparams,
        in_avals=tuple([jax.ShapeDtypeStruct(x.shape, x.dtype) for x in binding.operands]),
        out_shapes=tuple([out_shapes[o] for o in order]
                         + [jax.ShapeDtypeStruct(x.value.shape, x.value.dtype) for x in refs]),
        aliases=tuple(sorted(prim_aliases.items())),
        zeroed_outputs=zeroed_results(call.given["zeroed_outputs"], user_results))


def aliased_leaves(call: CallArguments, binding: _binder.Binding) -> list[tuple[Any, int]]:
    """`input_output_aliases` as (operand leaf, output) pairs, its input indices counted as the
    call's convention counts them; raises where it names no array, or comes with Refs."""
    given, convention, leaves = call.input_output_aliases, call.convention, binding.leaves
    if given and binding.refs:
        raise ValueError(
            f"input_output_aliases={dict(given)!r} cannot be combined with Ref operands: a Ref "
            f"is updated in place by itself. Pass every buffer the kernel updates as a Ref, or "
            f"none (as jax-triton 0.4).")
    if not given:
        return []
    candidates = leaves if convention == "out_type" else [x for x in leaves if x.is_array]
    among = ("array arguments" if convention == "out_shape" else "operand leaves")
    other = _CONVENTIONS["out_shape" if convention == "out_type" else "out_type"]
    for in_idx in given if isinstance(given, Mapping) else ():
        if not (_values.is_int(in_idx) and 0 <= in_idx < len(candidates)):
            raise ValueError(
                f"input_output_aliases={dict(given)!r}: input index {in_idx!r} is not one of "
                f"the {len(candidates)} {among} (0..{len(candidates) - 1}) "
                f"({_CONVENTIONS[convention]}; {other}).")
        if not candidates[in_idx].is_array:
            raise ValueError(
                f"input_output_aliases={dict(given)!r}: input index {in_idx!r} is "
                f"{candidates[in_idx].what}, a scalar ({_CONVENTIONS[convention]}; {other}).")
    avals = [jax.ShapeDtypeStruct(x.value.shape, x.value.dtype) if x.is_array
             else jax.ShapeDtypeStruct((), "int32")
             for x in candidates]
    return [(candidates[i], o)
            for i, o in _checker.alias_pairs("triton_call", given, tuple(avals),
                                             tuple(call.out_shapes))]


def output_owners(call: CallArguments, binding: _binder.Binding, aliased: set[int],
                  shaped: bool, own_keywords: tuple[str, ...]) -> dict[int, int]:
    """{output: the parameter it fills}: the non-constexpr parameters left unfilled, one per
    output or per output not `aliased`; with `out_shape` and a call 0.3 could have made
    (`shaped`), the parameters after the arguments. TypeError where neither fits."""
    jit_fn, entries, metaparams = call.unwrapped.jit_fn, binding.entries, binding.metaparams
    missing = [i for i, p in enumerate(jit_fn.params)  # the non-constexpr parameters unfilled
               if not p.is_constexpr and i not in entries and p.name not in metaparams]
    n_outs = len(call.out_shapes)
    unaliased = [o for o in range(n_outs) if o not in aliased]
    # A parameter defaulting to None (the last ones, as Python orders defaults) that no output
    # is left to fill keeps its default, a None constexpr, as in Triton.
    while (len(missing) > max(n_outs, len(unaliased)) and jit_fn.params[missing[-1]].has_default
           and jit_fn.params[missing[-1]].default is None):
        missing.pop()
    if len(missing) == n_outs:
        return dict(zip(range(n_outs), missing))
    if aliased and len(missing) == len(unaliased):
        return dict(zip(unaliased, missing))
    fallback = shaped and call.convention == "out_shape"
    forgotten = ""
    if len(missing) > len(unaliased):
        forgotten = _misplaced.forgotten(jit_fn, entries, metaparams, binding.by_keyword, n_outs,
                                         aliased, own_keywords)
    elif len(missing) < len(unaliased) and not fallback:  # 0.3 says it at layout
        forgotten = _misplaced.output_given_as_input(binding.leaves, call.convention,
                                                     call.out_shapes, unaliased,
                                                     len(unaliased) - len(missing))
    if not fallback or forgotten:
        names = list(jit_fn.arg_names)
        raise TypeError(
            f"Kernel {_spec.kernel_name(jit_fn)}: {len(missing)} non-constexpr parameter(s) "
            f"get no argument ({', '.join(names[i] for i in missing) or 'none'}), for "
            f"{n_outs} output(s), {len(unaliased)} of them not aliased to an input. Outputs "
            f"fill the parameters left unfilled, in order: one per output (jax-triton 0.3's "
            f"layout), or, with input_output_aliases, one per output that is not aliased "
            f"(0.4's: an aliased output is written through its input's pointer). The "
            f"kernel's parameters are ({', '.join(names)}); pass the missing arguments, or "
            f"fix the outputs.{forgotten}")
    n_args = len(call.args)
    return dict(zip(range(n_outs), range(n_args, n_args + n_outs)))


def zeroed_results(zeroed: Any, user_results: tuple[int, ...]) -> Any:
    """`zeroed_outputs` mapped from the outputs to the primitive's results; raises for an
    index that names no output."""
    if callable(zeroed):
        if user_results != tuple(range(len(user_results))):
            zeroed = MappedZeroed(zeroed, user_results)
    elif not isinstance(zeroed, tuple) or zeroed:  # the default, `()`, zeroes nothing
        indices = _values.output_indices(zeroed, len(user_results), what="zeroed_outputs")
        zeroed = tuple(sorted([user_results[o] for o in indices]))
    return zeroed


def own_named_parameter(unwrapped: Any, own_keywords: Iterable[str], start: int) -> Any:
    """The first parameter from `start` on named like one of `own_keywords` and set by nothing
    else (no default, autotune config or heuristic), or None."""
    own = set(own_keywords) - unwrapped.set_by_wrappers
    for param in list(unwrapped.jit_fn.params)[start:]:
        if param.name in own and not param.has_default:
            return param
    return None


def layout_key(call: CallArguments) -> tuple | None:
    """The key a call's layout is kept under (all of the call but its shapes, runtime scalars
    and int grid; a grid function by its code, so that a lambda made per trace is one grid),
    or None where the full check must run."""
    try:
        parts, roles = [], []
        for index, value in enumerate(call.args):
            if isinstance(value, jax.Array):
                parts.append(("array", value.dtype, value.ndim == 0))
            elif index in call.roles:  # a scalar or None, or a constexpr parameter's value
                parts.append("scalar")
                roles.append((index, value))
            else:
                return None  # no layout kept, or the full check must say what is wrong
        names, values = [], [call.backend_options, call.cost_estimate, call.has_side_effect,
                              call.input_output_aliases, call.constexprs,
                              *[value for name, value in call.given.items() if name != "grid"]]
        for name, value in call.keywords.items():
            if name in call.buffers:
                return None
            names.append(name)
            if name in call.runtime:
                roles.append((call.runtime[name], value))
            else:
                values.append(value)
        for n, (where, value) in enumerate(roles):
            role = call.roles[where]
            if role is None:  # a bad scalar: the full check says why
                return None
            roles[n] = (("constexpr", _spec.exact_key(value)) if role[0] == "constexpr"
                        else ("runtime", type(value), role[1].triton_type, role[2]))
        types = tuple(map(type, values))
        if not (_PLAIN_TYPES.issuperset(types) or (  # empty tuples too (`zeroed_outputs=()`)
                _PLAIN_OR_TUPLE.issuperset(types) and values.count(()) == types.count(tuple))):
            types, values = None, [
                (type(value), tuple([(_spec.exact_key(k), _spec.exact_key(v))
                                     for k, v in value.items()]))
                if isinstance(value, Mapping) else _spec.exact_key(value) for value in values]
        grid, grid_key = call.given["grid"], None
        if callable(grid):  # a function of the metaparameters (`_values.grid_value`)
            fn = grid.fn if isinstance(grid, _values.MetaGrid) else grid
            grid_key = (
                ("function", fn.__code__, len(fn.__defaults__ or ()), bool(fn.__kwdefaults__))
                if getattr(fn, "__code__", None) is not None and hasattr(fn, "__defaults__")
                else _spec.exact_key(fn))
        key = (call.kernel, call.convention, tuple(parts), tuple(names), tuple(roles),
               call.out_tree, tuple([(s.dtype, len(s.shape) == 0) for s in call.out_shapes]),
               grid_key, types, tuple(values))
        hash(key)
    except (TypeError, ValueError, OverflowError):  # unhashable, or a bad scalar: full check
        return None
    return key


def relaid_call(layout: KeptCall, call: CallArguments) -> BoundCall | None:
    """The call checked into the kept `layout`, or None where a check fails."""
    try:
        grid = _values.grid_value(call.given["grid"])
    except (TypeError, ValueError):
        return None
    args = call.args
    operands = tuple([args[index] for index in layout.operand_args])
    in_avals = tuple([x.aval for x in operands])
    outs = tuple([call.out_shapes[o] for o in layout.out_order])
    if any([type(d) is not int for aval in (*in_avals, *outs) for d in aval.shape]) or any(
            [in_avals[i].shape != tuple(outs[r].shape)
             for i, r in layout.spec.input_output_aliases]):
        return None  # a symbolic dimension, or an alias of two shapes
    positional = list(layout.spec.positional)
    for index, source in layout.scalars:
        positional[index] = ("scalar", args[source] if isinstance(source, int)
                             else call.keywords[source])
    positional = tuple(positional)
    spec = layout.spec.relaid(positional, outs, grid, _spec.argument_types(
        call.unwrapped.jit_fn, positional, in_avals, outs, dict(layout.spec.metaparams),
        call.roles))
    return BoundCall(spec, Placed(operands, layout.user_results, ()), call.out_tree, operands)
