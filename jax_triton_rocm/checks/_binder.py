"""A `triton_call`'s arguments bound to the kernel's parameters (docs/porting.md's rules): the
keywords split, the operands flattened, values Triton cannot take refused before the layout."""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.state import types as state_types

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env
from jax_triton_rocm.checks import _checker
from jax_triton_rocm.checks._arguments import CallArguments, check_canonical_dtype, holds_buffer
from jax_triton_rocm.kernel import _layout, _spec, _tensordesc
from jax_triton_rocm.kernel._tensordesc import TensorDescriptor



@functools.cache
def keyword_names(fn: Any) -> tuple[str, ...]:
    return tuple(name for name, param in inspect.signature(fn).parameters.items()
                 if param.kind is inspect.Parameter.KEYWORD_ONLY)


def check_not_a_function(what: str, value: Any, caller: str) -> None:
    """Raises TypeError for a constexpr that is a function other than a Triton builtin or a
    `@triton.jit` function, on which Triton fails deep in its compiler."""
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


def named_parameters(unwrapped: _spec.Unwrapped, constexprs: Any, operands: Any,
                     keywords: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`constexprs=` and `operands=` checked, as two dicts."""
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
class Binding:
    """A call's arguments laid onto the kernel's parameters: an entry per parameter given, the
    leaves (but None) depth first, the primitive's operands, each Ref leaf once, the keywords'
    constexprs and compile options, and which parameters were given by name."""

    entries: dict[int, Any] = dataclasses.field(default_factory=dict)
    leaves: list[Leaf] = dataclasses.field(default_factory=list)
    operands: list[Any] = dataclasses.field(default_factory=list)
    refs: list[Leaf] = dataclasses.field(default_factory=list)
    metaparams: dict[str, Any] = dataclasses.field(default_factory=dict)
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    by_keyword: set[int] = dataclasses.field(default_factory=set)
    named: set[str] = dataclasses.field(default_factory=set)


@dataclasses.dataclass(eq=False)
class Leaf:
    """One operand leaf: its value, how the call names it, its operand index (None: a scalar)."""

    value: Any
    what: str
    operand: int | None = None
    is_array: bool = True
    is_ref: bool = False


def _operand_entry(flat: Binding, value: Any, what: str, typed: bool = False) -> tuple[str, Any]:
    """`value`, given to one operand parameter, flattened into `flat`: its entry."""
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
    base = value.base if isinstance(value, TensorDescriptor) else value
    ref = isinstance(base, state_types.TransformedRef)
    if not ref and hasattr(base, "shape") and not isinstance(base, jax.Array):
        try:
            ref = isinstance(jax.typeof(base), state_types.AbstractRef)
        except TypeError:
            pass
    if isinstance(value, TensorDescriptor):
        leaf = Leaf(base, f"{what} (a TensorDescriptor's base)", len(flat.operands), is_ref=ref)
        flat.leaves.append(leaf)
        flat.operands.append(leaf.value)
        return ("descriptor", (leaf.operand, _tensordesc.abstract(value, value.base)))
    if ref and (seen := [leaf for leaf in flat.leaves if leaf.value is value]):
        # A Ref given again: the same operand, so both parameters point at its one buffer.
        flat.leaves.append(Leaf(value, what, seen[0].operand, is_ref=True))
        return ("input", seen[0].operand)
    if ref or (hasattr(value, "shape") and hasattr(value, "dtype")):
        if (not ref and not isinstance(value, jax.Array) and np.ndim(value)
                and np.issubdtype(value.dtype, np.inexact)):
            # A 0-d one is most likely meant as a scalar: the layout's hint says so instead.
            # Integers convert as jnp.asarray converts them (np.arange's int64 to int32), and
            # the kernel reads the values given; a float would lose precision unseen.
            check_canonical_dtype(value.dtype, what, "jnp.asarray(x, jnp.{})")
        leaf = Leaf(value if ref or isinstance(value, jax.Array)
                    else jnp.asarray(value), what, len(flat.operands), is_ref=ref)
        flat.leaves.append(leaf)
        flat.operands.append(leaf.value)
        return ("input", leaf.operand)
    raise TypeError(f"{what} has type {type(value).__name__} ({value!r}); triton_call takes "
                    f"arrays, Refs, TensorDescriptors, bool/int/float scalars, None and tuples "
                    f"of them.")


def bind_arguments(call: CallArguments, own_keywords: tuple[str, ...]) -> Binding:
    """Binds a `triton_call` to the kernel's parameters; a keyword named like a compile option
    is one unless the kernel has a parameter of that name."""
    unwrapped = call.unwrapped
    named_constexprs, named_operands = {}, {}  # nothing named, as in most calls
    if call.constexprs is not None or call.operands is not None:
        named_constexprs, named_operands = named_parameters(unwrapped, call.constexprs,
                                                            call.operands, call.keywords)
    jit_fn = unwrapped.jit_fn
    params, name = jit_fn.params, unwrapped.name
    index = {param.name: i for i, param in enumerate(params)}
    refuse_positional_given_again(call, [*call.keywords, *named_constexprs, *named_operands],
                                  index)
    # A keyword fills an operand with `out_type`, or where it holds an array; the others are
    # constexprs and compile options.
    operands, by_keyword, metaparams = dict(enumerate(call.args)), set(), {}
    for keyword, value in call.keywords.items():
        i = index.get(keyword)
        if i is not None and params[i].is_constexpr and keyword in call.buffers:
            raise TypeError(f"Kernel {name}'s parameter {keyword!r} is a tl.constexpr, but "
                            f"keyword argument {keyword}= holds an array. Pass a Python value "
                            f"there.")
        if i is None or params[i].is_constexpr or not (
                call.convention == "out_type" or keyword in call.buffers):
            metaparams[keyword] = value
        else:
            operands[i] = value
            by_keyword.add(i)
    metaparams.update(named_constexprs)
    for keyword, value in named_operands.items():
        operands[index[keyword]] = value
        by_keyword.add(index[keyword])
    check_metaparams(call, metaparams, own_keywords)
    names = list(jit_fn.arg_names)
    options = {k: metaparams.pop(k) for k in list(metaparams)
               if k in _vendors.COMPILE_OPTIONS and k not in names}
    flat = Binding(metaparams=metaparams, options=options, by_keyword=by_keyword,
                   named={*named_constexprs, *named_operands})
    for i, param in enumerate(jit_fn.params):
        if i not in operands:
            continue
        what = f"argument {i}" if i not in by_keyword else f"keyword argument {param.name!r}"
        if not param.is_constexpr:
            # A scalar typed by its value when the call was taken is not typed again.
            typed = call.roles.get(i) is not None and not unwrapped.params[i].declared
            flat.entries[i] = _operand_entry(flat, operands[i], what, typed)
        elif holds_buffer(operands[i]):
            raise TypeError(
                f"Kernel {name}'s parameter {param.name!r} is a "
                f"tl.constexpr, but {what} holds an array. Pass a Python value there.")
        else:
            check_not_a_function(param.name, operands[i], "")
            flat.entries[i] = ("constexpr", operands[i])
    # Each Ref once, where first given.
    flat.refs = list({leaf.operand: leaf for leaf in reversed(flat.leaves)
                      if leaf.is_ref}.values())[::-1]
    return flat


def refuse_positional_given_again(call: CallArguments, named: list[str],
                                  index: dict[str, int]) -> None:
    """Raises TypeError where a name (a keyword, or in `constexprs=` / `operands=`) fills a
    parameter a positional argument fills, or the call gives more values than parameters."""
    args, jit_fn = call.args, call.unwrapped.jit_fn
    twice = [k for k in named if index.get(k, len(args)) < len(args)]
    n_placed = len(args) + (len(call.out_shapes) if call.convention == "out_shape" else 0)
    if len(args) > len(jit_fn.params) or (twice and n_placed > len(jit_fn.params)):
        _layout.check_operands(jit_fn, len(args), n_placed - len(args))
    if twice:
        raise TypeError(f"triton_call() got multiple values for argument {twice[0]!r}: "
                        f"positional argument {index[twice[0]]} fills it (kernel "
                        f"{call.unwrapped.name}); pass it once.")


def check_metaparams(call: CallArguments, metaparams: dict[str, Any],
                     own_keywords: tuple[str, ...]) -> None:
    """Raises TypeError for jax-triton's `custom_call_target_name`, a keyword that names no
    parameter or compile option, or a value that is a plain function or unhashable."""
    if "custom_call_target_name" in metaparams:  # jax-triton's, which this package replaces
        raise TypeError(
            f"triton_call got custom_call_target_name={metaparams['custom_call_target_name']!r}: "
            f"jax_triton_rocm picks the custom-call target (jaxlib's typed FFI one, or its legacy "
            f"one where XLA_FLAGS keeps custom calls out of command buffers); drop this "
            f"argument, and set {_env.ENV_CALL_TARGET}=ffi or legacy to force one.")
    names = list(call.unwrapped.jit_fn.arg_names)
    unknown = sorted([k for k in metaparams
                      if k not in names and k not in _vendors.COMPILE_OPTIONS])
    if unknown:
        hint = _checker.close_names(unknown, [*own_keywords, *names, *_vendors.COMPILE_OPTIONS])
        raise TypeError(
            f"Unknown keyword argument(s) {', '.join(map(repr, unknown))} for kernel "
            f"{call.unwrapped.name}, whose parameters are ({', '.join(names)}), and no "
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
