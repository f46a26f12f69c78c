"""Calls whose arrays land where the kernel does not use them as the call means, told from what
the kernel does with each parameter (`_kinds.roles`; docs/design.md, "Parameter kinds").
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from jax_triton_rocm.spec import _kinds
from jax_triton_rocm.spec._layout import passed_as_input_advice
from jax_triton_rocm.spec._spec import aval_text, kernel_name

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction


def check_written(jit_fn: JITFunction, inputs: Mapping[int, Any], outputs: Mapping[int, int],
                  constexprs: Mapping[str, Any], *, leaves: Sequence[Any], convention: str,
                  returned: bool, record: dict | None = None) -> None:
    """Raises TypeError where an input array fills a parameter the kernel stores to while an
    output lands on one it only loads from, or while the call returns nothing (`returned`).
    `inputs`: the plain input leaves (no Ref, none aliased), `outputs`: the unaliased outputs,
    each by parameter."""
    names = list(jit_fn.arg_names)
    stores = ({} if returned or jit_fn.is_gluon()
              else _kinds.roles(jit_fn, constexprs=constexprs, record=record).stores)
    if stored := [p for p in sorted(inputs) if names[p] in stores]:
        param, leaf = stored[0], inputs[stored[0]]
        stored_at = stores[names[param]]
        alias = next(j for j, x in enumerate(leaves) if x is leaf)
        raise TypeError(
            f"Kernel {kernel_name(jit_fn)} stores to parameter {names[param]!r} ({stored_at}), "
            f"which {leaf.what} ({aval_text(leaf.value)}), a plain array, fills, and the call "
            f"has no outputs: the store is all it does, into XLA's buffer of an input, which XLA "
            f"holds read-only (on a GPU the kernel would overwrite memory XLA may share with "
            f"other values; on the CPU the write is lost). Pass the array as a Ref, updated "
            f"where it lies: ref = jax.new_ref(x), triton_call(ref, ..., {convention}=()), then "
            f"read ref[...]; or return the result as an output aliased to the array: "
            f"out_type=x, input_output_aliases={{{alias}: 0}} (donate x under jax.jit to update "
            f"it in place).")
    found = unwritten_output(jit_fn, inputs, outputs, constexprs, record)
    if found is None:
        return
    stored, stored_at, loaded, loaded_at = found
    leaf, output = inputs[stored], outputs[loaded]
    counted = leaves if convention == "out_type" else [x for x in leaves if x.is_array]
    alias = next(j for j, x in enumerate(counted) if x is leaf)
    raise TypeError(
        f"Kernel {kernel_name(jit_fn)} would read memory nobody wrote: {leaf.what} "
        f"({aval_text(leaf.value)}), an input, fills parameter {names[stored]!r}, which "
        f"the kernel stores to ({stored_at}), and output {output} lands on parameter "
        f"{names[loaded]!r}, which it only loads from ({loaded_at}). The output would hold "
        f"whatever its buffer held. Outputs fill the non-constexpr parameters the arguments "
        f"leave unfilled, in order. Pass the input by name, so that the output fills "
        f"{names[stored]!r}: triton_call(..., {names[loaded]}=x, {convention}=...) (or "
        f"operands={{{names[loaded]!r}: x}}); or, if {leaf.what} is meant as the output's "
        f"buffer, updated in place, alias it to the output (input_output_aliases={{{alias}: "
        f"{output}}}) and pass the input for {names[loaded]!r} too.")


def unwritten_output(jit_fn: JITFunction, inputs: Mapping[int, Any], outputs: Mapping[int, Any],
                     constexprs: Mapping[str, Any] | None = None, record: dict | None = None,
                     ) -> tuple[int, str, int, str] | None:
    """(input's parameter, where stored, output's parameter, where loaded) for the first input
    on a parameter the kernel stores to while an output lands on one it only loads from."""
    if jit_fn.is_gluon() or not inputs or not outputs:
        return None
    found = _kinds.roles(jit_fn, constexprs=constexprs, record=record)
    names = list(jit_fn.arg_names)
    loaded = [(q, where) for q in sorted(outputs) if names[q] not in found.stores
              and names[q] not in found.escapes and (where := found.loads.get(names[q]))]
    stored = [(p, found.stores[names[p]]) for p in sorted(inputs) if names[p] in found.stores]
    if not loaded or not stored:
        return None
    return (*stored[0], *loaded[0])


def forgotten(jit_fn: JITFunction, entries: Mapping[int, tuple[str, Any]],
              metaparams: Mapping[str, Any], by_keyword: set[int], n_outs: int,
              aliased: set[int], own_keywords: Sequence[str]) -> str:
    """A sentence naming the parameter(s) a call most likely forgot, or "", for a call that
    leaves more parameters unfilled than it has outputs (or unaliased outputs) to fill them."""
    slots = [i for i, p in enumerate(jit_fn.params) if not p.is_constexpr
             and p.name not in metaparams and i not in by_keyword]
    # What fills each: "pointer" (an array), "scalar" (a value), None (None, a tuple, a descriptor).
    values = ["pointer" if kind == "input" else "scalar" if kind == "scalar" and value is not None
              else None for kind, value in [entries[i] for i in slots if i in entries]]
    text = ""
    for n_pointers in dict.fromkeys((n_outs, n_outs - len(aliased))):
        if text := _lined_up(jit_fn, values + ["pointer"] * n_pointers, slots):
            break
    clashing = [jit_fn.arg_names[i] for i in slots
                if i not in entries and jit_fn.arg_names[i] in own_keywords]
    if clashing:
        text += (f" Parameter {clashing[0]!r} has the name of an argument of triton_call itself, "
                 f"so a keyword {clashing[0]}= is triton_call's own: fill it with "
                 f"operands={{{clashing[0]!r}: ...}} (filled at launch; constexprs= compiles a "
                 f"value in).")
    return text


def _lined_up(jit_fn: JITFunction, given: list[str | None], slots: list[int]) -> str:
    """`forgotten`'s sentence for `given` ("pointer", "scalar" or None, either) on `slots`: the
    ways of leaving out one to three parameters after which every value fits its role."""
    extra = len(slots) - len(given)
    if not 1 <= extra <= 3 or len(slots) > 24:
        return ""
    found = _kinds.roles(jit_fn)
    wanted = [found.of(jit_fn.arg_names[i]) for i in slots]
    fitting = [set(left_out) for left_out in itertools.combinations(range(len(slots)), extra)
               if all(r is None or g is None or r == g for r, g in zip(
                   [role for j, role in enumerate(wanted) if j not in left_out], given))]
    common = set.intersection(*fitting) if fitting else set()
    if len(fitting) == 1:
        chosen = fitting[0]
        form = " Most likely missing: {}. Without {}, what the call gives lines up with the " \
               "other parameters (arrays and outputs on pointers, scalars on values)."
    elif extra == 1 and len(fitting) == 2:
        chosen = set.union(*fitting)
        form = " Most likely missing: one of {}; without either, what the call gives lines up " \
               "with the other parameters (arrays and outputs on pointers, scalars on values)."
    elif common:
        chosen = common
        form = " Missing, among others: {}, which every way of lining up what the call gives " \
               "(arrays and outputs on pointers, scalars on values) leaves without {}."
    else:
        return ""
    names = [jit_fn.arg_names[slots[j]] for j in sorted(chosen)]
    shown = [f"{name!r} ({found.shown(name)})" if found.of(name) else repr(name)
             for name in names]
    joined = " or ".join(shown) if len(fitting) == 2 and extra == 1 else " and ".join(shown)
    return form.format(joined, "it" if len(names) == 1 else "them")


def output_given_as_input(leaves: list, convention: str, out_shapes: list,
                           unaliased: list[int], extra: int) -> str:
    """For a call with `extra` outputs more than parameters left: the arrays most likely passed
    as an input too (an output's shape and dtype), and the fixes; or ""."""
    candidates = leaves if convention == "out_type" else [x for x in leaves if x.is_array]
    matching = [(index, leaf, o) for index, leaf in enumerate(candidates) if leaf.is_array
                for o in unaliased
                if (tuple(leaf.value.shape), np.dtype(leaf.value.dtype)) == (
                    tuple(out_shapes[o].shape), np.dtype(out_shapes[o].dtype))][-extra:]
    if not matching:
        return ""
    # The aliases' input index counts operand leaves (0.4) or array arguments (0.3), which a
    # None or scalar argument before it shifts from its position: both are named.
    shown = ", ".join(f"{leaf.what} (the shape and dtype of output {o}"
                      + ("" if leaf.what == f"argument {index}" else
                         f"; input index {index} in input_output_aliases") + ")"
                      for index, leaf, o in matching)
    aliases = ", ".join(f"{index}: {o}" for index, _, o in matching)
    return " " + passed_as_input_advice(
        shown, aliases, "the arguments (each output fills a parameter the arguments leave "
                        "unfilled)")
