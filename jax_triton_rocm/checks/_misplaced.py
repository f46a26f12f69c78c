"""Calls whose arrays land where the kernel does not use them as the call means, told from what
the kernel does with each parameter (docs/design.md, "What a kernel writes")."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from jax_triton_rocm.checks import _kinds
from jax_triton_rocm.kernel._layout import passed_as_input_advice

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction

    from jax_triton_rocm.kernel._spec import KernelCallSpec


def check_writes(spec: KernelCallSpec, launch: Any, accesses: Any, buffers: Mapping[int, Any],
                 in_avals: tuple) -> None:
    """Raises TypeError where the compiled kernel writes a plain input array, or only adds into
    an output with atomics that is neither zeroed nor aliased; warns about an output it never
    writes (docs/design.md, "What a kernel writes"). `launch`: as planned; `accesses`: what the
    IR does through each argument (`compile._writes.read`); `buffers`: per IR argument index,
    ("input", operand index) or ("output", output index)."""
    aliased_inputs = {i for i, _ in spec.input_output_aliases}
    aliased_outputs = {o for _, o in spec.input_output_aliases}
    inputs = {arg: i for arg, (kind, i) in buffers.items()
              if kind == "input" and i not in aliased_inputs}
    outputs = {arg: o for arg, (kind, o) in buffers.items()
               if kind == "output" and o not in aliased_outputs}
    unwritten = [arg for arg in sorted(outputs) if arg not in accesses.stores
                 and arg not in accesses.atomics and arg not in accesses.unsure]
    told = _Told(spec, launch, accesses)
    if written := [(arg, i) for arg, i in sorted(inputs.items())
                   if arg in accesses.stores or arg in accesses.atomics]:
        arg, index = written[0]
        loaded = [a for a in unwritten if a in accesses.loads] if accesses.stray is None else []
        if loaded:
            told.refuse_misplaced_output(arg, index, loaded[0], outputs[loaded[0]], in_avals)
        told.refuse_store_into_input(arg, index, in_avals)
    for arg, output in sorted(outputs.items()):
        if output in launch.zeroed:
            continue
        if arg in accesses.atomics and arg not in accesses.stores and arg not in accesses.unsure:
            told.refuse_atomics_only(arg, output)
        if arg in unwritten and accesses.stray is None:
            told.warn_unwritten(output)


class _Told:
    """How `check_writes`'s messages name the call: its kernel, parameters, constexprs."""

    def __init__(self, spec: KernelCallSpec, launch: Any, accesses: Any) -> None:
        names = list(spec.unwrapped.jit_fn.arg_names)
        self.spec, self.accesses, self.shown = spec, accesses, {}
        for source in launch.bound.sources:  # each buffer's parameter, as the user wrote it
            kind = "output" if source.kind == "output" else "input"
            self.shown.setdefault((kind, source.index), names[source.position] + "".join(
                f"[{j}]" for j in source.path))
        self.words = spec.words
        self.subject = f"{self.words.prefix}kernel" if self.words.prefix else "Kernel"
        constexprs = launch.bound.constexprs_text(names)
        self.compiled = f" (compiled with {constexprs})" if constexprs else ""

    def refuse_misplaced_output(self, arg: int, index: int, loaded: int, output: int,
                                in_avals: tuple) -> None:
        """An input on a parameter the kernel stores to, an output on one it only loads."""
        param, target = self.shown[("input", index)], self.shown[("output", output)]
        what, alias = self.words.operand(index, in_avals)
        stored_at = self.accesses.stores.get(arg) or self.accesses.atomics[arg]
        raise TypeError(
            f"{self.subject} {self.spec.kernel_name} would read memory nobody wrote: {what}, an "
            f"input, fills parameter {param!r}, which the kernel stores to ({stored_at}"
            f"{self.compiled}), and output {output} lands on parameter {target!r}, which it only "
            f"loads from ({self.accesses.loads[loaded]}). The output would hold whatever its "
            f"buffer held. " + (
                f"Outputs fill the non-constexpr parameters the arguments leave unfilled, in "
                f"order. Pass the input by name, so that the output fills {param!r}: "
                f"triton_call(..., {target}=x, {self.words.convention}=...) (or operands="
                f"{{{target!r}: x}}); or, if {what.split(' (')[0]} is meant as the output's "
                f"buffer, updated in place, alias it to the output (input_output_aliases="
                f"{{{alias}: {output}}}) and pass the input for {target!r} too."
                if self.words.convention else
                "The operands fill the pointer parameters in order, then the results: pass a "
                "buffer for each parameter the kernel writes as an operand aliased to its result "
                "(input_output_aliases), or call the kernel with triton_call, which fills "
                "parameters by name."))

    def refuse_store_into_input(self, arg: int, index: int, in_avals: tuple) -> None:
        """A store or atomic into a plain input array, with or without outputs beside it."""
        param = self.shown[("input", index)]
        what, alias = self.words.operand(index, in_avals)
        stored_at = self.accesses.stores.get(arg) or self.accesses.atomics[arg]
        n_outs, conv = len(self.spec.out_shapes), self.words.convention
        alone = (", and the call has no outputs: the store is all it does, into" if not n_outs
                 else ", beside the call's outputs: the kernel writes into")
        fix = (f"Pass the array as a Ref, updated where it lies: ref = jax.new_ref(x), "
               f"triton_call(ref, ...{f', {conv}=()' if not n_outs else ''}), then read "
               f"ref[...]; or return the result as an output aliased to the array: "
               + (f"{conv}=x, input_output_aliases={{{alias}: 0}}" if not n_outs else
                  f"one more output of its shape, input_output_aliases={{{alias}: {n_outs}}}")
               + " (donate x under jax.jit to update it in place)." if conv else
               f"Alias operand {index} to a result (input_output_aliases={{{index}: ...}}) to "
               f"update it in place.")
        raise TypeError(
            f"{self.subject} {self.spec.kernel_name} stores to parameter {param!r} ({stored_at}"
            f"{self.compiled}), which {what}, a plain array, fills{alone} XLA's buffer of an "
            f"input, which XLA holds read-only (on a GPU the kernel would overwrite memory XLA "
            f"may share with other values; on the CPU the write is lost). {fix}")

    def refuse_atomics_only(self, arg: int, output: int) -> None:
        """An output only atomics write, neither zeroed nor aliased: they add into garbage."""
        raise TypeError(
            f"{self.subject} {self.spec.kernel_name} writes output {output} (parameter "
            f"{self.shown[('output', output)]!r}) only with atomics ({self.accesses.atomics[arg]}"
            f"{self.compiled}), and the output is neither zeroed nor aliased to an input, so they "
            f"add into whatever its buffer held. Zero it before the launch: "
            f"zeroed_outputs=({output},); or alias it to an input holding the starting values "
            f"(input_output_aliases={{<input index>: {output}}}).")

    def warn_unwritten(self, output: int) -> None:
        """An output no write reaches: warned, not refused (an optional output behind a flag)."""
        warnings.warn(
            f"jax_triton_rocm: kernel {self.spec.kernel_name} never writes output {output} "
            f"(parameter {self.shown[('output', output)]!r}){self.compiled}: the output holds "
            f"whatever its buffer held. Ignore it if the kernel leaves it unwritten on purpose "
            f"(an optional output behind a flag); else zero it (zeroed_outputs=({output},)) or "
            f"check which parameter the kernel stores to.", UnwrittenOutputWarning, stacklevel=2)


class UnwrittenOutputWarning(UserWarning):
    """A kernel, as compiled for a call, never writes one of the call's outputs."""


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
