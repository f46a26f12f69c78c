"""The one checker of a kernel call: `check_call` checks what `triton_call` (bound by
`checks._binder`, its outputs placed by `place_outputs`) and `triton_call_lowering` share, into a
`KernelCallSpec`, with messages worded for the API called (`Api`): the same value gets the same
verdict from both.
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env, _values
from jax_triton_rocm.spec import _layout, _misplaced, _spec
from jax_triton_rocm.spec._spec import CallOptions, KernelCallSpec

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction

    from jax_triton_rocm.checks._binder import Flat


@dataclasses.dataclass(frozen=True)
class Api:
    """How messages name things for the API the user called (`APIS` shows each field)."""

    name: str
    prefix: str
    input: str
    output: str
    inputs: str
    outputs: str
    an_output: str
    index_hint: str = ""
    alias_fix: str = ""


APIS = {
    "triton_call": Api("triton_call", "", "input", "output", "the {n} array arguments",
                       "the {n} outputs", "an output",
                       index_hint=" (indices count arrays only, not scalars)"),
    "triton_call_lowering": Api(
        "triton_call_lowering", "triton_call_lowering: ", "operand", "result",
        "the primitive's {n} operands", "the primitive's {n} results", "a result",
        alias_fix="; fix the primitive's abstract eval"),
}


def close_names(unknown: Iterable[str], known: Iterable[str]) -> str:
    """" (did you mean ...?)" naming the close matches among `known`, or ""."""
    unknown, known = list(unknown), list(known)
    guesses = [(name, match[0]) for name in unknown
               if (match := difflib.get_close_matches(name, known, n=1))]
    if not guesses:
        return ""
    if len(unknown) == 1:
        return f" (did you mean {guesses[0][1]}?)"
    return f" (did you mean {', '.join(f'{m} for {n!r}' for n, m in guesses)}?)"


def flag(value: Any, what: str) -> bool:
    """`value`, a Python or NumPy bool, as a bool (a string such as "no" would be truthy)."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{what}={value!r} must be a bool (True or False), got "
                    f"{type(value).__name__}.")


def check_takes_meta(fn: Callable, what: str) -> None:
    """Raises unless `fn` can be called with one positional argument (the metaparameters)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable without one: trust it
        return
    try:
        signature.bind({})
    except TypeError as err:
        raise TypeError(
            f"{what}={fn!r} must take one argument, the dict of metaparameters (as Triton's "
            f"launcher passes it), e.g. lambda meta: (n // meta['BLOCK'],); its signature is "
            f"{signature}.") from err


def alias_pairs(api_name: str, given: Any, in_avals: tuple, out_avals: tuple) -> tuple:
    """`{input index: output index}` as sorted pairs of ints, each pair of one shape and dtype."""
    api = APIS[api_name]
    if given is None:
        return ()
    if not isinstance(given, Mapping):
        raise TypeError(f"{api.prefix}input_output_aliases={given!r} must be a dict "
                        f"{{{api.input} index: {api.output} index}}, e.g. {{0: 0}}.")
    shown = dict(given)
    pairs = []
    for in_idx, out_idx in shown.items():
        for index, avals, which, among, hint in (
                (in_idx, in_avals, "input", api.inputs, api.index_hint),
                (out_idx, out_avals, "output", api.outputs, "")):
            if not (_values.is_int(index) and 0 <= index < len(avals)):
                raise ValueError(
                    f"{api.prefix}input_output_aliases={shown!r}: {which} index {index!r} is not "
                    f"one of {among.format(n=len(avals))} (0..{len(avals) - 1}){hint}.")
        src, dst = in_avals[in_idx], out_avals[out_idx]
        if tuple(src.shape) != tuple(dst.shape) or np.dtype(src.dtype) != np.dtype(dst.dtype):
            raise ValueError(
                f"{api.prefix}input_output_aliases={shown!r}: {api.input} {in_idx} "
                f"({_spec.aval_text(src)}) and {api.output} {out_idx} "
                f"({_spec.aval_text(dst)}) must have the same shape and dtype to share a "
                f"buffer{api.alias_fix}.")
        pairs.append((int(in_idx), int(out_idx)))
    if len({o for _, o in pairs}) != len(pairs):
        raise ValueError(f"{api.prefix}input_output_aliases={shown!r} aliases one {api.output} "
                         f"twice; give each {api.output} at most one {api.input}.")
    return tuple(sorted(pairs))


def check_call(api_name: str, *, kernel: Any, unwrapped: _spec.Unwrapped, positional: tuple,
               in_avals: tuple, out_shapes: tuple, aliases: tuple[tuple[int, int], ...],
               given: CallOptions, metaparams: Mapping[str, Any] | None = None,
               options: Mapping[str, Any] | None = None,
               has_side_effect: bool = False, cost_estimate: tuple | None = None,
               backend_options: tuple = (), by_keyword: tuple[str, ...] = ()) -> KernelCallSpec:
    """Checks a call in the common form (`given`, the options); returns its spec. `aliases`
    (checked by `alias_pairs`, in each API's own indices) and the arguments only `triton_call`
    takes come checked already. A callable `zeroed_outputs` is checked here for its arity, and
    per config (by `plan._plan`) for what it returns."""
    api = APIS[api_name]
    if api.name == "triton_call_lowering":  # triton_call checks them as it takes its arguments
        _env.check_variables()  # each variable as its reader takes it, on every platform
    metaparams, options = dict(metaparams or {}), dict(options or {})
    g = given
    name, num_warps, num_stages, num_ctas = g.name, g.num_warps, g.num_stages, g.num_ctas
    serialized_metadata, xla_native = g.serialized_metadata, g.xla_native
    if not isinstance(name, str):
        raise TypeError(f"{api.prefix}name={name!r} must be a str (the call's name for jaxlib "
                        f"and profilers), got {type(name).__name__}.")
    if not isinstance(serialized_metadata, bytes):
        raise TypeError(f"{api.prefix}serialized_metadata must be bytes, got "
                        f"{type(serialized_metadata).__name__}.")
    if xla_native is not None and not isinstance(xla_native, (bool, np.bool_)):
        raise TypeError(f"{api.prefix}xla_native={xla_native!r} must be True, False or None "
                        f"(None follows {_env.ENV_XLA_NATIVE}).")
    _values.launch_settings(num_warps, num_stages, num_ctas, caller=api.prefix)
    cuda_arch = None if g.compute_capability is None else _vendors.normalize_arch(
        "cuda", g.compute_capability, what=f"{api.prefix}compute_capability")
    names = {value: f"argument {i}" for i, (kind, value) in enumerate(positional)
             if kind == "array"}
    buffers = [(api.prefix + names.get(i, f"{api.input} {i}"), aval)
               for i, aval in enumerate(in_avals)]
    buffers += [(f"{api.prefix}{api.output} {i}", aval) for i, aval in enumerate(out_shapes)]
    # The call's values typed once: the dtypes here, the kernel's parameters by the layout check.
    types = _spec.argument_types(unwrapped.jit_fn, tuple(positional), tuple(in_avals),
                                 tuple(out_shapes), metaparams)
    for what, aval in buffers:
        if types.pointers[aval.dtype] is None:  # no Triton pointer type: `pointer_type` says why
            _spec.pointer_type(aval.dtype, what=what)
        if not all([isinstance(d, (int, np.integer)) for d in aval.shape]):
            raise ValueError(
                f"{what} has shape {tuple(aval.shape)}, with a symbolic dimension, which "
                f"{api.name} cannot lower: the grid, the constexprs and the kernel are fixed "
                f"when the call is lowered, and jaxlib's Triton call has no grid that follows a "
                f"size known only at run time. Export for concrete shapes instead (one export "
                f"per shape).")
    grid = _values.grid_value(g.grid)  # a MetaGrid's results are checked per config (plan._plan)
    if isinstance(grid, _values.MetaGrid):
        check_takes_meta(grid.fn, f"{api.prefix}grid")
    axis = g.batch_grid_axis
    if axis is not None and (isinstance(axis, (bool, np.bool_)) or axis not in (0, 1, 2)):
        raise ValueError(
            f"{api.prefix}batch_grid_axis={axis!r} must be None (jax.vmap loops over the batch) "
            f"or the grid axis 0, 1 or 2 whose program id is the example index under jax.vmap.")
    enable_fp_fusion = flag(g.enable_fp_fusion, f"{api.prefix}enable_fp_fusion")
    zeroed = g.zeroed_outputs
    if callable(zeroed):
        check_takes_meta(zeroed, f"{api.prefix}zeroed_outputs")
    elif api.name != "triton_call":  # triton_call's are checked as its outputs are placed
        zeroed = _values.output_indices(zeroed, len(out_shapes), what=f"{api.prefix}zeroed_outputs",
                                        an_output=api.an_output)
    spec = KernelCallSpec(
        kernel=kernel, unwrapped=unwrapped, positional=tuple(positional),
        out_shapes=tuple(out_shapes), grid=grid,
        name=name or unwrapped.name,
        num_warps=None if num_warps is None else int(num_warps),
        num_stages=None if num_stages is None else int(num_stages),
        num_ctas=1 if num_ctas is None else int(num_ctas),
        cuda_arch=cuda_arch,
        enable_fp_fusion=enable_fp_fusion, input_output_aliases=tuple(aliases),
        zeroed_outputs=zeroed,
        debug=flag(g.debug, f"{api.prefix}debug"),
        serialized_metadata=serialized_metadata,
        batch_grid_axis=None if axis is None else int(axis),
        xla_native=None if xla_native is None else bool(xla_native),
        metaparams=tuple(sorted(metaparams.items())),
        options=tuple(sorted(_values.compile_options(options, caller=api.prefix).items()))
        if options else (),
        has_side_effect=has_side_effect, cost_estimate=cost_estimate,
        backend_options=backend_options, by_keyword=by_keyword)
    if api.name == "triton_call":  # triton_call_lowering's call is being lowered already
        _layout.check_kernel_arguments(spec, in_avals, types)
    return spec


def forgotten_hint(jit_fn: JITFunction, metaparams: Mapping[str, Any], by_keyword: set[int],
                   flat: Flat, n_outs: int, aliased: set[int], own_keywords: tuple[str, ...]
                   ) -> str:
    """The parameter a call most likely forgot (`_misplaced.forgotten`), for the outputs' or,
    failing that, the unaliased outputs' pointers; one named like an argument of triton_call
    itself (`own_keywords`) is said to go in `operands=`."""
    slots = [i for i, p in enumerate(jit_fn.params) if not p.is_constexpr
             and p.name not in metaparams and i not in by_keyword]
    # What fills each: "pointer" (an array), "scalar" (a value), None (None, a tuple, a descriptor).
    values = ["pointer" if kind == "input" else "scalar" if kind == "scalar" and value is not None
              else None for kind, value in [flat.entries[i] for i in slots if i in flat.entries]]
    text = ""
    for n_pointers in dict.fromkeys((n_outs, n_outs - len(aliased))):
        if text := _misplaced.forgotten(jit_fn, values + ["pointer"] * n_pointers, slots):
            break
    clashing = [jit_fn.arg_names[i] for i in slots
                if i not in flat.entries and jit_fn.arg_names[i] in own_keywords]
    if clashing:
        text += (f" Parameter {clashing[0]!r} has the name of an argument of triton_call itself, "
                 f"so a keyword {clashing[0]}= is triton_call's own: fill it with "
                 f"operands={{{clashing[0]!r}: ...}} (filled at launch; constexprs= compiles a "
                 f"value in).")
    return text


_CONVENTIONS = {
    "out_type": "with out_type= (jax-triton 0.4), indices count every operand leaf in "
                "kernel-parameter order, scalars included",
    "out_shape": "indices count arrays only, not scalars, with out_shape= (jax-triton 0.3)",
}


@dataclasses.dataclass(frozen=True)
class Placed:
    """A call's operands and outputs as the primitive takes them (an operand may be a Ref, read
    at the call). `user_results`: per output of the call's tree, its result index; `refs`:
    (operand, result) per Ref, written back after the call; `output_params`: the parameter each
    output with a pointer fills; `positional_constexprs`: those the 0.3 form keeps positional.
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


def _output_given_as_input(leaves: list, convention: str, out_shapes: list,
                           unaliased: list[int], extra: int) -> str:
    """For a call with `extra` outputs more than parameters left: the last arrays with an
    output's shape and dtype (most likely it passed as an input too), and the fixes; or ""."""
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
    return " " + _layout.passed_as_input_advice(
        shown, aliases, "the arguments (each output fills a parameter the arguments leave "
                        "unfilled)")


def place_outputs(jit_fn: JITFunction, metaparams: dict[str, Any], entries: dict[int, Any],
                  operands: list, leaves: list, refs: list, *, convention: str, out_shapes: list,
                  input_output_aliases: Any, zeroed: Any, trailing: list[int] | None = None,
                  hint: Callable[[set[int]], str] = lambda aliased: "") -> Placed:
    """Places a call's outputs among its operands.

    Outputs fill the non-constexpr parameters the call left unfilled, in order: every output
    (jax-triton 0.3's layout), or, with `input_output_aliases`, only the outputs not aliased to
    an input (0.4's: an aliased output is written through its input's pointer). The primitive's
    results with a pointer come first, in parameter order; an output may sit before an operand:
    the routes launch such a kernel through a trampoline (`plan._trampoline`), so no buffer is
    filled or copied for it. Each `Ref` operand gets one more result, aliased to it.

    Where neither layout fits, a call that 0.3 could have made (`trailing`: the parameters after
    its arguments) keeps 0.3's placement, so that the layout reports what is wrong as 0.3 did,
    unless `hint` names the parameter the call most likely forgot. `entries`, `operands`,
    `leaves`: as `checks._binder.Flat` holds them; `zeroed` is mapped to the result indices.
    """

    given, pairs = input_output_aliases, []
    if given and refs:
        raise ValueError(
            f"input_output_aliases={dict(given)!r} cannot be combined with Ref operands: a Ref "
            f"is updated in place by itself. Pass every buffer the kernel updates as a Ref, or "
            f"none (as jax-triton 0.4).")
    if given:
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
        pairs = [(candidates[i], o)
                 for i, o in alias_pairs("triton_call", given, tuple(avals),
                                      tuple(out_shapes))]
    aliased = {o for _, o in pairs}
    missing = [i for i, p in enumerate(jit_fn.params)  # the non-constexpr parameters unfilled
               if not p.is_constexpr and i not in entries and p.name not in metaparams]
    n_outs = len(out_shapes)
    unaliased = [o for o in range(n_outs) if o not in aliased]
    # A parameter defaulting to None (the last ones, as Python orders defaults) that no output
    # is left to fill keeps its default, a None constexpr, as in Triton.
    while (len(missing) > max(n_outs, len(unaliased)) and jit_fn.params[missing[-1]].has_default
           and jit_fn.params[missing[-1]].default is None):
        missing.pop()
    if len(missing) == n_outs:
        owners = dict(zip(range(n_outs), missing))
    elif aliased and len(missing) == len(unaliased):
        owners = dict(zip(unaliased, missing))
    else:
        forgotten = hint(aliased) if len(missing) > len(unaliased) else ""
        if len(missing) < len(unaliased) and trailing is None:  # 0.3 says it at layout
            forgotten = _output_given_as_input(leaves, convention, out_shapes, unaliased,
                                               len(unaliased) - len(missing))
        if trailing is None or forgotten:
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
        owners = dict(zip(range(n_outs), trailing))
    owner_of = {p: o for o, p in owners.items()}
    positional, metaparams, constexprs = [], dict(metaparams), []
    for i, param in enumerate(jit_fn.params):
        if i in entries and entries[i][0] == "constexpr":
            metaparams[param.name] = entries[i][1]
            constexprs.append(param.name)
            positional.append(("keyword", None))
        elif i in entries:
            positional.append(entries[i])
        else:
            positional.append(("output", owner_of[i]) if i in owner_of else ("keyword", None))
    order = sorted(owners, key=owners.get)
    order += [o for o in range(len(out_shapes)) if o not in order]
    user_results = tuple([order.index(o) for o in range(len(out_shapes))])
    ref_results = tuple([(leaf.operand, len(order) + n) for n, leaf in enumerate(refs)])
    prim_aliases = {leaf.operand: user_results[o] for leaf, o in pairs}
    prim_aliases.update(dict(ref_results))
    if callable(zeroed):
        if user_results != tuple(range(len(user_results))):
            zeroed = MappedZeroed(zeroed, user_results)
    elif not isinstance(zeroed, tuple) or zeroed:  # the default, `()`, zeroes nothing
        indices = _values.output_indices(zeroed, len(user_results), what="zeroed_outputs")
        zeroed = tuple(sorted([user_results[o] for o in indices]))
    return Placed(
        positional=tuple([(kind, user_results[v]) if kind == "output" else (kind, v)
                          for kind, v in positional]),
        metaparams=metaparams, operands=tuple(operands),
        in_avals=tuple([jax.ShapeDtypeStruct(x.shape, x.dtype) for x in operands]),
        out_shapes=tuple([out_shapes[o] for o in order]
                         + [jax.ShapeDtypeStruct(x.value.shape, x.value.dtype) for x in refs]),
        aliases=prim_aliases, zeroed=zeroed,
        user_results=user_results,
        refs=ref_results, output_params=[owners[o] for o in sorted(owners)],
        positional_constexprs=tuple(constexprs))

