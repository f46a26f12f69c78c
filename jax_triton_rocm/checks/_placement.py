"""Where a `triton_call`'s outputs go, and the primitive's operands and results around them.

Outputs fill the non-constexpr parameters the call left unfilled, in order: every output
(jax-triton 0.3's layout), or, with `input_output_aliases`, only the outputs not aliased to an
input (0.4's: an aliased output is written through its input's pointer). The primitive's operands
follow the kernel's parameters and its results with a pointer come first, in parameter order; an
output may sit in any parameter position, before an operand's too: the routes launch such a
kernel through a trampoline that takes the buffers in their order (`launch._trampoline`), so no
buffer is filled or copied for it. Each `Ref` operand gets one more result, aliased to it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import jax

from jax_triton_rocm.base import _values
from jax_triton_rocm.checks import _checker
from jax_triton_rocm.launch import _kernel

_CONVENTIONS = {
    "out_type": "with out_type= (jax-triton 0.4), indices count every operand leaf in "
                "kernel-parameter order, scalars included",
    "out_shape": "indices count arrays only, not scalars, with out_shape= (jax-triton 0.3)",
}


@dataclasses.dataclass(frozen=True)
class Placed:
    """A call's operands and outputs as the primitive takes them.

    Attributes:
      positional: the spec's layout (`KernelCallSpec.positional`).
      metaparams: constexprs by name.
      operands: per primitive operand: an array, or a Ref (read at the call).
      in_avals, out_shapes: the primitive's operand and result shapes and dtypes.
      aliases: {operand: result} for the primitive.
      zeroed: result indices zeroed before the launch, or a callable returning output indices.
      user_results: per output of the call's tree, its result index.
      refs: (operand, result) for each Ref, written back after the call.
      output_params: the parameter each output with a pointer fills, in output order.
      positional_constexprs: constexprs given positionally (the 0.3 form keeps them positional).
    """

    positional: tuple
    metaparams: dict[str, Any]
    operands: tuple
    in_avals: tuple
    out_shapes: tuple
    aliases: dict[int, int]
    zeroed: Any
    user_results: tuple[int, ...]
    refs: tuple[tuple[int, int], ...]
    output_params: list[int]
    positional_constexprs: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class MappedZeroed:
    """A callable `zeroed_outputs` whose output indices are mapped to the primitive's results;
    compared by value, so that JAX's caches keyed on the spec still hit."""

    fn: Callable[[dict[str, Any]], Any]
    results: tuple[int, ...]

    def __call__(self, meta: dict[str, Any]) -> tuple[int, ...]:
        return tuple(self.results[o] if 0 <= o < len(self.results) else o for o in self.fn(meta))


def _aval(value: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(value.shape), value.dtype)


def user_aliases(given: Any, leaves: list, convention: str, out_shapes: list,
                 has_refs: bool) -> list[tuple[Any, int]]:
    """`input_output_aliases` as (operand leaf, output index) pairs, in the call's convention.

    Raises:
      TypeError / ValueError: not a dict of ints, an index that is not an array operand's in
        this convention (the message states both conventions), shapes that differ, or aliases
        given with Ref operands.
    """
    if not given:
        return []
    if has_refs:
        raise ValueError(
            f"input_output_aliases={dict(given)!r} cannot be combined with Ref operands: a Ref "
            f"is updated in place by itself. Pass every buffer the kernel updates as a Ref, or "
            f"none (as jax-triton 0.4).")
    candidates = leaves if convention == "out_type" else [x for x in leaves if x.is_array]
    among = ("array arguments" if convention == "out_shape" else "operand leaves")
    other = _CONVENTIONS["out_shape" if convention == "out_type" else "out_type"]
    for in_idx in given if isinstance(given, Mapping) else ():
        if not (_values.is_int(in_idx) and 0 <= in_idx < len(candidates)):
            raise ValueError(
                f"input_output_aliases={dict(given)!r}: input index {in_idx!r} is not one of the "
                f"{len(candidates)} {among} (0..{len(candidates) - 1}) ({_CONVENTIONS[convention]}"
                f"; {other}).")
        if not candidates[in_idx].is_array:
            raise ValueError(
                f"input_output_aliases={dict(given)!r}: input index {in_idx!r} is "
                f"{candidates[in_idx].what}, a scalar ({_CONVENTIONS[convention]}; {other}).")
    avals = [_aval(x.value) if x.is_array else jax.ShapeDtypeStruct((), "int32")
             for x in candidates]
    pairs = _checker.aliases("triton_call", given, tuple(avals), tuple(out_shapes))
    return [(candidates[i], o) for i, o in pairs]


def _missing(jit_fn: Any, metaparams: dict, entries: dict) -> list[int]:
    """The non-constexpr parameters the call left unfilled, in order."""
    return [i for i, p in enumerate(jit_fn.params)
            if not p.is_constexpr and i not in entries and p.name not in metaparams]


def output_owners(jit_fn: Any, missing: list[int], n_outs: int, aliased: set[int],
                  trailing: list[int] | None = None,
                  hint: Callable[[], str] = lambda: "") -> dict[int, int]:
    """{output index: parameter} for the outputs that get a pointer. Where neither layout fits,
    a call that 0.3 could have made (`trailing`: the parameters after its positional
    arguments) keeps 0.3's placement, so that the layout reports what is wrong as 0.3 did,
    unless `hint` names the parameter the call most likely forgot.

    Raises:
      TypeError: the parameters left unfilled fit neither layout; lists them and the counts,
        and says what `hint()` says.
    """
    if len(missing) == n_outs:
        return dict(zip(range(n_outs), missing))
    unaliased = [o for o in range(n_outs) if o not in aliased]
    if aliased and len(missing) == len(unaliased):
        return dict(zip(unaliased, missing))
    forgotten = hint() if len(missing) > len(unaliased) else ""
    if trailing is not None and not forgotten:
        return dict(zip(range(n_outs), trailing))
    names = list(jit_fn.arg_names)
    raise TypeError(
        f"Kernel {_kernel.kernel_name(jit_fn)}: {len(missing)} non-constexpr parameter(s) get "
        f"no argument ({', '.join(names[i] for i in missing) or 'none'}), for {n_outs} "
        f"output(s), {len(unaliased)} of them not aliased to an input. Outputs fill the "
        f"parameters left unfilled, in order: one per output (jax-triton 0.3's layout), or, with "
        f"input_output_aliases, one per output that is not aliased (0.4's: an aliased output is "
        f"written through its input's pointer). The kernel's parameters are "
        f"({', '.join(names)}); pass the missing arguments, or fix the outputs.{forgotten}")


def _numbered(entry: tuple[str, Any], operands: list) -> tuple[str, Any]:
    """`entry` with each operand leaf numbered, in walk order (depth first)."""
    kind, value = entry
    if kind == "tuple":
        return ("tuple", tuple(_numbered(element, operands) for element in value))
    if kind not in ("input", "descriptor"):
        return entry
    leaf = value if kind == "input" else value[0]
    leaf.operand = len(operands)
    operands.append(leaf.value)
    return (kind, leaf.operand if kind == "input" else (leaf.operand, value[1]))


def _zeroed(zeroed: Any, user_results: tuple[int, ...]) -> Any:
    """`zeroed_outputs` in the primitive's result indices."""
    identity = user_results == tuple(range(len(user_results)))
    if callable(zeroed):
        return zeroed if identity else MappedZeroed(zeroed, user_results)
    indices = _values.output_indices(zeroed, len(user_results), what="zeroed_outputs")
    return tuple(sorted(user_results[o] for o in indices))


def place(jit_fn: Any, metaparams: dict[str, Any], entries: dict[int, Any], leaves: list,
          refs: list, *, convention: str, out_shapes: list, aliases: Any, zeroed: Any,
          trailing: list[int] | None = None,
          hint: Callable[[set[int]], str] = lambda aliased: "") -> Placed:
    """Places a call's outputs among its operands (the module docstring says how).

    Args:
      entries: each given parameter's entry, with leaf objects where operands go (numbered
        here); ("constexpr", value) for a value given positionally to a `tl.constexpr`.
      leaves: every operand leaf in kernel-parameter order; `refs` those that are Refs.
      convention: "out_type" (jax-triton 0.4) or "out_shape" (0.3).
      trailing: for a call 0.3 could make, the parameters after its arguments.
      hint: the parameter the call most likely forgot, given the aliased outputs, for a call
        whose outputs fit no layout (`_surface.forgotten_hint`).

    Raises:
      TypeError / ValueError: as `user_aliases` and `output_owners`.
    """
    pairs = user_aliases(aliases, leaves, convention, out_shapes, bool(refs))
    aliased = {o for _, o in pairs}
    owners = output_owners(jit_fn, _missing(jit_fn, metaparams, entries), len(out_shapes),
                           aliased, trailing, lambda: hint(aliased))
    owner_of = {p: o for o, p in owners.items()}
    operands: list = []
    positional, metaparams, constexprs = [], dict(metaparams), []
    for i, param in enumerate(jit_fn.params):
        if i in entries and entries[i][0] == "constexpr":
            metaparams[param.name] = entries[i][1]
            constexprs.append(param.name)
            positional.append(("keyword", None))
        elif i in entries:
            positional.append(_numbered(entries[i], operands))
        else:
            positional.append(("output", owner_of[i]) if i in owner_of else ("keyword", None))
    order = sorted(owners, key=owners.get)
    order += [o for o in range(len(out_shapes)) if o not in order]
    user_results = tuple(order.index(o) for o in range(len(out_shapes)))
    ref_results = tuple((leaf.operand, len(order) + n) for n, leaf in enumerate(refs))
    prim_aliases = {leaf.operand: user_results[o] for leaf, o in pairs}
    prim_aliases.update(dict(ref_results))
    return Placed(
        positional=tuple((kind, user_results[v]) if kind == "output" else (kind, v)
                         for kind, v in positional),
        metaparams=metaparams, operands=tuple(operands),
        in_avals=tuple(_aval(x) for x in operands),
        out_shapes=tuple([out_shapes[o] for o in order] + [_aval(x.value) for x in refs]),
        aliases=prim_aliases, zeroed=_zeroed(zeroed, user_results), user_results=user_results,
        refs=ref_results, output_params=[owners[o] for o in sorted(owners)],
        positional_constexprs=tuple(constexprs))


def as_positional(placed: Placed, positional: tuple) -> Placed:
    """`placed` in the first form of `KernelCallSpec.positional` (one entry per positional
    argument, the outputs' pointers after them), for a call that 0.3 could make."""
    metaparams = {k: v for k, v in placed.metaparams.items()
                  if k not in placed.positional_constexprs}
    return dataclasses.replace(placed, positional=positional, metaparams=metaparams)
