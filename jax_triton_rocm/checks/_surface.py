"""`triton_call`'s operands bound to the kernel's parameters, for jax-triton 0.3's surface and
0.4's in one function (the rules, with 0.3 and 0.4 code side by side, are docs/porting.md's "Porting
from jax-triton"):

- positional arguments fill the parameters in order; a keyword naming a `tl.constexpr`
  parameter is a constexpr; one naming another parameter is an operand with `out_type=` (0.4)
  and a constexpr with `out_shape=` (0.3), unless it holds an array, which only an operand can;
- operands may be arrays, scalars, `Ref`s, `TensorDescriptor`s and tuples of them (Triton
  tuples), flattened in kernel-parameter order;
- outputs fill the non-constexpr parameters left over, in order: every output (0.3's layout), or,
  with `input_output_aliases`, only the outputs not aliased to an input (0.4's);
- `input_output_aliases` counts array operands (0.3) or every operand leaf, scalars included
  (0.4).

What the primitive sees is plain: arrays in kernel-parameter order (a `Ref` read before the call
and written back after it, as an operand aliased to an extra result), and results in the order
of their parameters; an output's parameter may come before an operand's (`checks._placement`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from jax._src.state import types as state_types

from jax_triton_rocm.checks import _arguments, _placement
from jax_triton_rocm.launch import _kernel, _kinds, _layout, _tensordesc, _types
from jax_triton_rocm.launch._tensordesc import TensorDescriptor


def is_ref(value: Any) -> bool:
    """Whether `value` is a mutable array (`jax.new_ref`), or a view of one (`ref.at[...]`)."""
    if isinstance(value, state_types.TransformedRef):
        return True
    if isinstance(value, (jax.Array, int, float, bool)) or not hasattr(value, "shape"):
        return False
    try:
        return isinstance(jax.typeof(value), state_types.AbstractRef)
    except TypeError:
        return False


def holds_buffer(value: Any) -> bool:
    """Whether `value` is or contains something only an operand can be (not a constexpr)."""
    if isinstance(value, (tuple, list)):
        return any(holds_buffer(element) for element in value)
    return isinstance(value, TensorDescriptor) or (
        hasattr(value, "shape") and hasattr(value, "dtype") and not _types.is_scalar(value))


@dataclasses.dataclass
class Given:
    """What the call gives each parameter: operands and constexprs by parameter index."""

    operands: dict[int, Any]
    by_keyword: set[int]
    metaparams: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Named:
    """`triton_call`'s `constexprs=` and `operands=`: parameters by name, checked."""

    constexprs: dict[str, Any] = dataclasses.field(default_factory=dict)
    operands: dict[str, Any] = dataclasses.field(default_factory=dict)


def named_parameters(jit_fn: Any, constexprs: Any, operands: Any,
                     keywords: dict[str, Any]) -> Named:
    """`constexprs=` and `operands=` checked: mappings of the kernel's parameter names, each
    parameter named once among them and the keywords; a `tl.constexpr` only in `constexprs`,
    an array only in `operands`.

    Raises:
      TypeError: naming the argument, the parameter, the value and the fix.
    """
    name, params = _kernel.kernel_name(jit_fn), {p.name: p for p in jit_fn.params}
    checked = {}
    for what, given in (("constexprs", constexprs), ("operands", operands)):
        if given is None:
            checked[what] = {}
            continue
        if not isinstance(given, Mapping):
            raise TypeError(f"triton_call: {what}={given!r} must be a dict of kernel parameter "
                            f"names to values, e.g. {what}={{'num_stages': 2}}.")
        unknown = sorted(str(k) for k in given if k not in params)
        if unknown:
            raise TypeError(
                f"triton_call: {what} names {', '.join(map(repr, unknown))}, which kernel {name} "
                f"has no parameter for{_arguments.close_names(unknown, list(params))}; its "
                f"parameters are ({', '.join(params)}).")
        twice = sorted(set(given) & (set(keywords) | set(checked.get("constexprs", ()))))
        if twice:
            where = "a keyword argument" if twice[0] in keywords else "constexprs"
            raise TypeError(f"triton_call: kernel {name}'s parameter {twice[0]!r} is given both "
                            f"in {what} and as {where}; give it once.")
        checked[what] = dict(given)
    for key, value in checked["constexprs"].items():
        if holds_buffer(value):
            raise TypeError(f"triton_call: constexprs[{key!r}] holds an array; constexprs are "
                            f"compile-time Python values. Pass arrays in operands={{{key!r}: "
                            f"...}} (or positionally).")
    for key, value in checked["operands"].items():
        if params[key].is_constexpr:
            raise TypeError(f"triton_call: operands[{key!r}] fills kernel {name}'s parameter "
                            f"{key!r}, a tl.constexpr, which takes a compile-time value: pass "
                            f"it in constexprs={{{key!r}: {value!r}}} instead.")
    return Named(checked["constexprs"], checked["operands"])


def bind(jit_fn: Any, args: tuple, keywords: dict[str, Any], convention: str,
         n_outs: int, named: Named = Named()) -> Given:
    """Binds the positional arguments, keywords and named parameters (`constexprs=`,
    `operands=`) to the kernel's parameters.

    Raises:
      TypeError: more arguments than parameters (with `out_shape`, counting the outputs, as
        0.3 places them after the arguments), or a parameter given twice (Python's wording).
    """
    params, name = jit_fn.params, _kernel.kernel_name(jit_fn)
    index = {param.name: i for i, param in enumerate(params)}
    twice = [k for k in [*keywords, *named.constexprs, *named.operands]
             if index.get(k, len(args)) < len(args)]
    n_placed = len(args) + (n_outs if convention == "out_shape" else 0)
    if len(args) > len(params) or (twice and n_placed > len(params)):
        _layout.check_operands(jit_fn, len(args), n_placed - len(args), {})
    if twice:
        raise TypeError(f"triton_call() got multiple values for argument {twice[0]!r}: "
                        f"positional argument {index[twice[0]]} fills it (kernel {name}); "
                        f"pass it once.")
    given = Given(dict(enumerate(args)), set(), {})
    for keyword, value in keywords.items():
        i = index.get(keyword)
        if i is not None and params[i].is_constexpr and holds_buffer(value):
            raise TypeError(f"Kernel {name}'s parameter {keyword!r} is a tl.constexpr, but "
                            f"keyword argument {keyword}= holds an array. Pass a Python value "
                            f"there.")
        if i is None or params[i].is_constexpr or not (
                convention == "out_type" or holds_buffer(value)):
            given.metaparams[keyword] = value
        else:
            given.operands[i] = value
            given.by_keyword.add(i)
    given.metaparams.update(named.constexprs)
    for keyword, value in named.operands.items():
        given.operands[index[keyword]] = value
        given.by_keyword.add(index[keyword])
    return given


@dataclasses.dataclass
class Flat:
    """The operands flattened in kernel-parameter order.

    Attributes:
      entries: each operand parameter's entry, with `Leaf` objects where operands go.
      leaves: every operand leaf (arrays, Refs, descriptor bases, scalars but None), in order.
    """

    entries: dict[int, Any] = dataclasses.field(default_factory=dict)
    leaves: list[Leaf] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class Leaf:
    """One operand leaf: `value` (an array, a Ref or a scalar), where it is (`what`), and the
    primitive's operand index once numbered (None for a scalar)."""

    value: Any
    what: str
    operand: int | None = None

    @property
    def is_array(self) -> bool:
        return not _types.is_scalar(self.value)


def _entry(flat: Flat, value: Any, what: str) -> tuple[str, Any]:
    if value is None:
        return ("scalar", None)
    if isinstance(value, list):
        raise TypeError(
            f"{what} is a list ({len(value)} elements); triton_call takes a tuple for a kernel "
            f"parameter that is a Triton tuple, and an array for a pointer: pass tuple(...) or "
            f"jnp.asarray(...).")
    if isinstance(value, tuple):
        return ("tuple", tuple(_entry(flat, v, f"{what}[{j}]") for j, v in enumerate(value)))
    if _types.is_scalar(value):
        _types.scalar(value, what=what)
        flat.leaves.append(Leaf(value, what))
        return ("scalar", value)
    if isinstance(value, TensorDescriptor):
        leaf = Leaf(value.base, f"{what} (a TensorDescriptor's base)")
        flat.leaves.append(leaf)
        return ("descriptor", (leaf, _tensordesc.abstract(value, value.base)))
    if is_ref(value) or (hasattr(value, "shape") and hasattr(value, "dtype")):
        leaf = Leaf(value if is_ref(value) or isinstance(value, jax.Array)
                    else jnp.asarray(value), what)
        flat.leaves.append(leaf)
        return ("input", leaf)
    raise TypeError(f"{what} has type {type(value).__name__} ({value!r}); triton_call takes "
                    f"arrays, Refs, TensorDescriptors, bool/int/float scalars, None and tuples "
                    f"of them.")


def flatten(jit_fn: Any, given: Given) -> Flat:
    """The operands' entries and leaves, in kernel-parameter order; a positional value on a
    `tl.constexpr` parameter is left to the layout, which makes it a constexpr."""
    flat = Flat()
    for i, param in enumerate(jit_fn.params):
        if i not in given.operands:
            continue
        what = f"argument {i}" if i not in given.by_keyword else f"keyword argument {param.name!r}"
        if param.is_constexpr:
            if holds_buffer(given.operands[i]):
                raise TypeError(
                    f"Kernel {_kernel.kernel_name(jit_fn)}'s parameter {param.name!r} is a "
                    f"tl.constexpr, but {what} holds an array. Pass a Python value there.")
            flat.entries[i] = ("constexpr", given.operands[i])
            continue
        flat.entries[i] = _entry(flat, given.operands[i], what)
    return flat


def _kind(entry: tuple[str, Any]) -> str | None:
    """What an entry gives its parameter, for `_kinds.forgotten`: "pointer" (an array),
    "scalar" (a value), or None (None, a tuple, a descriptor)."""
    kind, value = entry
    return "pointer" if kind == "input" else "scalar" if kind == "scalar" and value is not None \
        else None


def forgotten_hint(jit_fn: Any, given: Given, flat: Flat, n_outs: int, aliased: set[int],
                   own_keywords: tuple[str, ...]) -> str:
    """The parameter a call most likely forgot (`_kinds.forgotten`): the parameters that
    neither a keyword nor a constexpr fills take the positional values, then the outputs' (or,
    failing that, the unaliased outputs') pointers, in order. A parameter left unfilled that is
    named like one of triton_call's own arguments (`own_keywords`) is said to go in
    `operands=`."""
    slots = [i for i, p in enumerate(jit_fn.params) if not p.is_constexpr
             and p.name not in given.metaparams and i not in given.by_keyword]
    values = [_kind(flat.entries[i]) for i in slots if i in flat.entries]
    text = ""
    for n_pointers in dict.fromkeys((n_outs, n_outs - len(aliased))):
        if text := _kinds.forgotten(jit_fn, values + ["pointer"] * n_pointers, slots):
            break
    clashing = [jit_fn.arg_names[i] for i in slots
                if i not in flat.entries and jit_fn.arg_names[i] in own_keywords]
    if clashing:
        text += (f" Parameter {clashing[0]!r} has the name of an argument of triton_call itself, "
                 f"so a keyword {clashing[0]}= is triton_call's own: fill it with "
                 f"operands={{{clashing[0]!r}: ...}} (filled at launch; constexprs= compiles a "
                 f"value in).")
    return text


def zero_three_shaped(given: Given, flat: Flat, refs: list) -> bool:
    """Whether 0.3 could have made the call: flat positional arrays and scalars only."""
    flat_args = all(kind in ("input", "scalar", "constexpr") for kind, _ in flat.entries.values())
    return not given.by_keyword and flat_args and not refs


def bound_call(args: tuple, keywords: dict[str, Any], *, unwrapped: Any, convention: str,
               outputs: Any, out_shapes: list, input_output_aliases: Any, zeroed_outputs: Any,
               has_side_effect: bool, own_keywords: tuple[str, ...],
               named: Named = Named()) -> tuple[_placement.Placed, dict[str, Any], tuple]:
    """Binds a `triton_call`, flattens its operands and places its outputs (`outputs` as given,
    `out_shapes` its leaves); returns them, the vendor compile options among the keywords, and
    the names of the operand parameters given by keyword (`KernelCallSpec.by_keyword`).

    Raises:
      TypeError / ValueError: as `bind`, `flatten`, `_arguments.split_compile_options` (a
        keyword that is no parameter, `own_keywords` being triton_call's) and
        `_placement.place` say.
    """
    jit_fn = unwrapped.jit_fn
    given = bind(jit_fn, args, keywords, convention, len(out_shapes), named)
    given.metaparams, options = _arguments.split_compile_options(jit_fn, given.metaparams,
                                                                 own_keywords)
    flat = flatten(jit_fn, given)
    refs = [leaf for leaf in flat.leaves if is_ref(leaf.value)]
    if len({id(leaf.value) for leaf in refs}) < len(refs):
        raise ValueError(f"The same Ref is passed to kernel {_kernel.kernel_name(jit_fn)} "
                         f"more than once ({', '.join(leaf.what for leaf in refs)}); pass it "
                         f"once (a kernel parameter may hold its pointer in several places).")
    if not out_shapes and not has_side_effect and not refs:
        raise ValueError(
            f"{convention}={outputs!r} is empty and kernel {_kernel.kernel_name(jit_fn)} gets no "
            f"Ref operand, so nothing would use the call and JAX would drop it. Give it outputs, "
            f"e.g. {convention}=jax.ShapeDtypeStruct(x.shape, x.dtype), pass the buffers it "
            f"writes as Refs (jax.new_ref), or say has_side_effect=True.")
    shaped = zero_three_shaped(given, flat, refs)
    trailing = list(range(len(args), len(args) + len(out_shapes)))
    placed = _placement.place(
        jit_fn, given.metaparams, flat.entries, flat.leaves, refs, convention=convention,
        out_shapes=out_shapes, aliases=input_output_aliases, zeroed=zeroed_outputs,
        trailing=trailing if shaped and convention == "out_shape" else None,
        hint=lambda aliased: forgotten_hint(jit_fn, given, flat, len(out_shapes), aliased,
                                            own_keywords))
    if shaped and placed.output_params == trailing:  # laid out as 0.3 lays it
        placed = _placement.as_positional(placed, _arguments.split_arguments(args)[1])
    _arguments.check_own_names(unwrapped, len(args) + len(out_shapes), own_keywords,
                               filled={*named.constexprs, *named.operands})
    return placed, options, tuple(jit_fn.arg_names[i] for i in sorted(given.by_keyword))
