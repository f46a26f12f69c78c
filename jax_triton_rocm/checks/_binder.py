"""The binder: a `triton_call`'s arguments (`api._call.CallArguments`, 0.3's form or 0.4's: the
rules are docs/porting.md's "Porting from jax-triton") bound to the kernel's parameters: the
keywords split into constexprs and compile options, the operands flattened, the outputs placed
(`checks._checker.place_outputs`). Values Triton cannot take are refused here, before the layout
(a Python function is no constexpr, a float64 array is no float64 while 64-bit types are off).
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.state import types as state_types

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env
from jax_triton_rocm.checks import _checker
from jax_triton_rocm.spec import _layout, _misplaced, _spec, _tensordesc
from jax_triton_rocm.spec._tensordesc import TensorDescriptor

if TYPE_CHECKING:
    from jax_triton_rocm.api._call import CallArguments
    from jax_triton_rocm.checks._checker import Placed


def keyword_names(fn: Any) -> tuple[str, ...]:
    return tuple(name for name, param in inspect.signature(fn).parameters.items()
                 if param.kind is inspect.Parameter.KEYWORD_ONLY)


def check_not_a_function(what: str, value: Any, caller: str) -> None:
    """Raises TypeError for a constexpr that is a function Triton cannot compile as one (an
    extern, a lambda): Triton takes its builtins (they carry `__triton_builtin__`) and
    `@triton.jit` functions, and fails deep in its compiler on other callables."""
    if isinstance(value, tuple):
        for j, element in enumerate(value):
            check_not_a_function(f"{what}[{j}]", element, caller)
        return
    if not callable(value) or isinstance(value, type) or type(value).__name__ == "constexpr":
        return
    from triton.runtime.jit import JITCallable

    if isinstance(value, JITCallable) or getattr(value, "__triton_builtin__", False):
        return
    module = getattr(value, "__module__", None) or ""
    if module.startswith("triton.language"):
        # An extern's stub, which Triton's code generator swaps for the backend's extern only
        # where a kernel calls it by its module's name ("cannot convert None ... to tensor").
        function = getattr(value, "__name__", "f")
        try:
            names = ", ".join(inspect.signature(value).parameters) or "x"
        except (TypeError, ValueError):
            names = "x"
        called = f"{module.rsplit('.', 1)[-1]}.{function}"
        raise TypeError(
            f"{caller}{what}={value!r} is the Triton extern {module}.{function}, which Triton "
            f"cannot compile as a constexpr value (its front end fails with \"cannot convert "
            f"None of type NoneType to tensor\"); Triton's builtins (tl.exp, tl.maximum) and "
            f"@triton.jit functions can be passed. Wrap the extern in a @triton.jit function and "
            f"pass that:\n\n    @triton.jit\n    def {function}({names}):\n        return "
            f"{called}({names})\n\nthen {what}={function}.")
    raise TypeError(
        f"{caller}{what}={value!r} is a Python {type(value).__name__}, and a kernel's "
        f"constexpr is a value (an int, float, bool, str, None, tl dtype or tuple), a Triton "
        f"builtin (tl.exp) or a @triton.jit function. Pass the value it computes "
        f"({what}=f(...)), or make it a @triton.jit function; a grid or zeroed_outputs that "
        f"depends on the constexprs goes to grid= / zeroed_outputs=, a value computed from the "
        f"arguments to @triton.heuristics.")


def check_canonical_dtype(dtype: Any, what: str, fix: str, *, output: bool = False) -> None:
    """Raises TypeError for an array's or output's dtype that JAX holds as another one (64-bit
    types off): a float input would reach the kernel converted, and an output declared float64
    is a float32 buffer the kernel would overrun. `fix`: the code that makes it the dtype JAX
    holds, with {} for its name."""
    given = np.dtype(dtype)
    held = np.dtype(jax.dtypes.canonicalize_dtype(given))
    if held == given:
        return
    effect = (f"the kernel would write {given.name} elements into the {held.name} buffer JAX "
              f"allocates" if output else
              f"JAX would convert it, and the kernel would read {held.name}, not the "
              f"{given.name} values given")
    raise TypeError(
        f"{what} has dtype {given.name}, which JAX holds as {held.name} while 64-bit types are "
        f"off (jax_enable_x64=False, the default): {effect}. Make it {held.name} "
        f"({fix.format(held.name)}), or enable 64-bit types "
        f"(jax.config.update('jax_enable_x64', True)) to keep {given.name}.")


def is_ref(value: Any) -> bool:
    """Whether `value` is a `jax.new_ref`, or a view of one (`ref.at[...]`)."""
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
        hasattr(value, "shape") and hasattr(value, "dtype")
        and not isinstance(value, _spec.SCALAR_TYPES))


def named_parameters(unwrapped: _spec.Unwrapped, constexprs: Any, operands: Any,
                     keywords: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`constexprs=` and `operands=` checked, as two dicts: each parameter named once among them
    and the keywords; a `tl.constexpr` only in `constexprs`, an array only in `operands`."""
    name, params = unwrapped.name, {p.name: p for p in unwrapped.params}
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
                f"has no parameter for{_checker.close_names(unknown, list(params))}; its "
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
        if params[key].constexpr:
            raise TypeError(f"triton_call: operands[{key!r}] fills kernel {name}'s parameter "
                            f"{key!r}, a tl.constexpr, which takes a compile-time value: pass "
                            f"it in constexprs={{{key!r}: {value!r}}} instead.")
    return checked["constexprs"], checked["operands"]


@dataclasses.dataclass
class Flat:
    """The operands flattened in kernel-parameter order (depth first), as the primitive takes
    them: each parameter's entry, every leaf (but None), and the primitive's operands."""

    entries: dict[int, Any] = dataclasses.field(default_factory=dict)
    leaves: list[Leaf] = dataclasses.field(default_factory=list)
    operands: list[Any] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class Leaf:
    """One operand leaf: `value`, how the call names it (`what`), its operand index (None for a
    scalar), and whether it is an array (or a Ref)."""

    value: Any
    what: str
    operand: int | None = None
    is_array: bool = True


def _operand_entry(flat: Flat, value: Any, what: str, typed: bool = False) -> tuple[str, Any]:
    """`value`, given to one operand parameter, flattened into `flat`: its entry. A scalar is
    typed, to be refused here where it cannot be passed, unless `typed` already."""
    if value is None:
        return ("scalar", None)
    if isinstance(value, list):
        raise TypeError(
            f"{what} is a list ({len(value)} elements); triton_call takes a tuple for a kernel "
            f"parameter that is a Triton tuple, and an array for a pointer: pass tuple(...) or "
            f"jnp.asarray(...).")
    if isinstance(value, tuple):
        return ("tuple", tuple(_operand_entry(flat, v, f"{what}[{j}]")
                               for j, v in enumerate(value)))
    if isinstance(value, _spec.SCALAR_TYPES):
        if not typed:
            _spec.scalar(value, what=what)
        flat.leaves.append(Leaf(value, what, None, is_array=False))
        return ("scalar", value)
    if isinstance(value, TensorDescriptor):
        leaf = Leaf(value.base, f"{what} (a TensorDescriptor's base)", len(flat.operands))
        flat.leaves.append(leaf)
        flat.operands.append(leaf.value)
        return ("descriptor", (leaf.operand, _tensordesc.abstract(value, value.base)))
    if is_ref(value) and (seen := [leaf for leaf in flat.leaves if leaf.value is value]):
        # A Ref given again: the same operand, so both parameters point at its one buffer.
        flat.leaves.append(Leaf(value, what, seen[0].operand))
        return ("input", seen[0].operand)
    if is_ref(value) or (hasattr(value, "shape") and hasattr(value, "dtype")):
        if (not is_ref(value) and not isinstance(value, jax.Array) and np.ndim(value)
                and np.issubdtype(value.dtype, np.inexact)):
            # A 0-d one is most likely meant as a scalar: the layout's hint says so instead.
            # Integers convert as jnp.asarray converts them (np.arange's int64 to int32), and
            # the kernel reads the values given; a float would lose precision unseen.
            check_canonical_dtype(value.dtype, what, "jnp.asarray(x, jnp.{})")
        leaf = Leaf(value if is_ref(value) or isinstance(value, jax.Array)
                    else jnp.asarray(value), what, len(flat.operands))
        flat.leaves.append(leaf)
        flat.operands.append(leaf.value)
        return ("input", leaf.operand)
    raise TypeError(f"{what} has type {type(value).__name__} ({value!r}); triton_call takes "
                    f"arrays, Refs, TensorDescriptors, bool/int/float scalars, None and tuples "
                    f"of them.")


def own_named_parameter(unwrapped: Any, own_keywords: Iterable[str], start: int) -> Any:
    """The first parameter from position `start` on named like one of `own_keywords` and set
    by nothing else (no default, autotune config or heuristic): only the API's own keyword
    could fill it. None where there is none."""
    own = set(own_keywords) - _set_by_wrappers(unwrapped)
    for param in list(unwrapped.jit_fn.params)[start:]:
        if param.name in own and not param.has_default:
            return param
    return None


def _set_by_wrappers(unwrapped: Any) -> set[str]:
    """The constexprs the kernel's autotune configs and heuristics set."""
    configs = getattr(unwrapped.autotuner, "configs", ())
    return ({key for config in configs for key in config.kwargs}
            | {key for wrapper in unwrapped.heuristics for key in wrapper.values})


def bind_arguments(call: CallArguments, *, has_side_effect: bool,
                   own_keywords: tuple[str, ...]) -> tuple[Placed, dict[str, Any], tuple]:
    """Binds a `triton_call` to the kernel's parameters, flattens its operands and places its
    outputs; returns them, the vendor compile options among the keywords (a keyword named like
    one is one unless the kernel has a parameter of that name), and the operand parameters
    given by keyword (`KernelCallSpec.by_keyword`).

    A call that 0.3 could have made (flat positional arrays and scalars only) whose outputs fill
    the parameters after its arguments keeps 0.3's positional form, ("array", operand index) or
    ("scalar", value) per positional argument. A parameter only one of `own_keywords` (`grid`,
    `name`, ...) could fill is refused, saying how to set it instead."""
    args, keywords, convention = call.args, call.keywords, call.convention
    outputs, out_shapes, unwrapped = call.outputs, call.out_shapes, call.unwrapped
    named_constexprs, named_operands = {}, {}  # nothing named, as in most calls
    if call.constexprs is not None or call.operands is not None:
        named_constexprs, named_operands = named_parameters(unwrapped, call.constexprs,
                                                            call.operands, keywords)
    jit_fn = unwrapped.jit_fn
    params, name = jit_fn.params, unwrapped.name
    index = {param.name: i for i, param in enumerate(params)}
    twice = [k for k in [*keywords, *named_constexprs, *named_operands]
             if index.get(k, len(args)) < len(args)]
    n_placed = len(args) + (len(out_shapes) if convention == "out_shape" else 0)
    if len(args) > len(params) or (twice and n_placed > len(params)):
        _layout.check_operands(jit_fn, len(args), n_placed - len(args), {})
    if twice:
        raise TypeError(f"triton_call() got multiple values for argument {twice[0]!r}: "
                        f"positional argument {index[twice[0]]} fills it (kernel {name}); "
                        f"pass it once.")
    operands, by_keyword, metaparams = dict(enumerate(args)), set(), {}
    for keyword, value in keywords.items():
        i = index.get(keyword)
        if i is not None and params[i].is_constexpr and keyword in call.buffers:
            raise TypeError(f"Kernel {name}'s parameter {keyword!r} is a tl.constexpr, but "
                            f"keyword argument {keyword}= holds an array. Pass a Python value "
                            f"there.")
        if i is None or params[i].is_constexpr or not (
                convention == "out_type" or keyword in call.buffers):
            metaparams[keyword] = value
        else:
            operands[i] = value
            by_keyword.add(i)
    metaparams.update(named_constexprs)
    for keyword, value in named_operands.items():
        operands[index[keyword]] = value
        by_keyword.add(index[keyword])
    if "custom_call_target_name" in metaparams:  # jax-triton's, which this package replaces
        raise TypeError(
            f"triton_call got custom_call_target_name={metaparams['custom_call_target_name']!r}: "
            f"jax_triton_rocm picks the custom-call target (jaxlib's typed FFI one, or its legacy "
            f"one where XLA_FLAGS keeps custom calls out of command buffers); drop this "
            f"argument, and set {_env.ENV_CALL_TARGET}=ffi or legacy to force one.")
    names = list(jit_fn.arg_names)
    unknown = sorted([k for k in metaparams
                      if k not in names and k not in _vendors.COMPILE_OPTIONS])
    if unknown:
        hint = _checker.close_names(unknown, [*own_keywords, *names, *_vendors.COMPILE_OPTIONS])
        raise TypeError(
            f"Unknown keyword argument(s) {', '.join(map(repr, unknown))} for kernel "
            f"{name}, whose parameters are ({', '.join(names)}), and no "
            f"argument of triton_call{hint}. Keyword arguments of triton_call fill the kernel's "
            f"constexpr parameters by name; fix the spelling.")
    for keyword, value in metaparams.items():
        check_not_a_function(keyword, value, "")
        try:
            hash(value)
        except TypeError:
            raise TypeError(
                f"{keyword}={value!r} must be hashable (JAX caches compiled calls by their "
                f"static arguments): pass a tuple instead of a list, or a plain value.") from None
    options = {k: metaparams.pop(k) for k in list(metaparams)
               if k in _vendors.COMPILE_OPTIONS and k not in names}
    flat = Flat()
    for i, param in enumerate(jit_fn.params):
        if i not in operands:
            continue
        what = f"argument {i}" if i not in by_keyword else f"keyword argument {param.name!r}"
        if not param.is_constexpr:
            # A positional scalar typed by its value when the call was taken is not typed again.
            typed = (i < len(args) and call.roles.get(i) is not None
                     and not unwrapped.params[i].declared)
            flat.entries[i] = _operand_entry(flat, operands[i], what, typed)
        elif holds_buffer(operands[i]):
            raise TypeError(
                f"Kernel {name}'s parameter {param.name!r} is a "
                f"tl.constexpr, but {what} holds an array. Pass a Python value there.")
        else:
            check_not_a_function(param.name, operands[i], "")
            flat.entries[i] = ("constexpr", operands[i])
    refs = list({leaf.operand: leaf for leaf in reversed(flat.leaves)
                 if is_ref(leaf.value)}.values())[::-1]  # each Ref once, where first given
    if not out_shapes and not has_side_effect and not refs:
        raise ValueError(
            f"{convention}={outputs!r} is empty and kernel {name} gets no "
            f"Ref operand, so nothing would use the call and JAX would drop it. Give it outputs, "
            f"e.g. {convention}=jax.ShapeDtypeStruct(x.shape, x.dtype), pass the buffers it "
            f"writes as Refs (jax.new_ref), or say has_side_effect=True.")
    # 0.3's positional form holds arrays and scalars; a positional constexpr of another kind
    # (a function, a dtype, a str, a tuple) goes by name, as the placed form takes it.
    shaped = not by_keyword and not refs and all(
        [kind in ("input", "scalar") or (kind == "constexpr" and (
            value is None or isinstance(value, _spec.SCALAR_TYPES)))
         for kind, value in flat.entries.values()])
    trailing = list(range(len(args), len(args) + len(out_shapes)))
    placed = _checker.place_outputs(
        jit_fn, metaparams, flat.entries, flat.operands, flat.leaves, refs,
        convention=convention, out_shapes=out_shapes,
        input_output_aliases=call.input_output_aliases, zeroed=call.given["zeroed_outputs"],
        trailing=trailing if shaped and convention == "out_shape" else None,
        hint=lambda aliased: _checker.forgotten_hint(jit_fn, metaparams, by_keyword, flat,
                                                     len(out_shapes), aliased, own_keywords))
    # `_misplaced.check_written` on the plain input arrays (a Ref, or an input aliased to an
    # output, is written on purpose and never counts) and the unaliased outputs, by the
    # parameters they fill; the kernel read with the constexprs Triton compiles it with (a
    # heuristic or an autotune config may set others, or replace these).
    wrapped = _set_by_wrappers(unwrapped)
    results = set(placed.aliases.values())
    unaliased = [o for o in range(len(out_shapes)) if placed.user_results[o] not in results]
    leaves = {leaf.operand: leaf for leaf in flat.leaves if leaf.operand is not None}
    inputs = {i: leaves[entry[1]] for i, entry in flat.entries.items()
              if entry[0] == "input" and entry[1] not in placed.aliases
              and not is_ref(leaves[entry[1]].value)}
    _misplaced.check_written(
        jit_fn, inputs, dict(zip(placed.output_params, unaliased)),
        {k: v for k, v in placed.metaparams.items() if k not in wrapped}, leaves=flat.leaves,
        convention=convention, returned=bool(out_shapes or placed.refs))
    if shaped and placed.output_params == trailing:  # laid out as 0.3 lays it
        positional, n_arrays = [], 0
        for i, arg in enumerate(args):  # read from the entries: `shaped` says what they hold
            kind = flat.entries[i][0]
            if kind == "input":
                positional.append(("array", n_arrays))
                n_arrays += 1
                continue
            if kind == "constexpr" and arg is not None:  # `_operand_entry` typed the "scalar" ones
                _spec.scalar(arg, what=f"argument {i}")
            positional.append(("scalar", arg))
        # 0.3's form keeps the constexprs given positionally in `positional` only.
        metaparams = {k: v for k, v in placed.metaparams.items()
                      if k not in placed.positional_constexprs}
        placed = dataclasses.replace(placed, positional=tuple(positional), metaparams=metaparams)
    # A keyword named like one of triton_call's own arguments went to triton_call, so the
    # parameter it may have meant is left unfilled.
    param = own_named_parameter(unwrapped, set(own_keywords) - {*named_constexprs,
                                                                *named_operands},
                                len(args) + len(out_shapes))
    if param is not None:
        where = "constexprs" if param.is_constexpr else "operands"
        raise TypeError(
            f"Kernel {name}'s parameter {param.name!r} has the name "
            f"of an argument of triton_call itself ({param.name}=...), so a keyword "
            f"{param.name}= is triton_call's own and cannot fill it. Pass it by name in "
            f"{where}={{{param.name!r}: ...}} ("
            + ("a compile-time constant" if param.is_constexpr else
               "filled at launch; constexprs= compiles a value in") + ").")
    return placed, options, tuple([jit_fn.arg_names[i] for i in sorted(by_keyword)])

