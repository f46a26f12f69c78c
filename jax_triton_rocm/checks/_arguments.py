"""Each API's own arguments turned into the common form that `checks._checker.check_call`
checks, each error naming the fix.

`triton_call`: the positional arguments split into arrays and scalars, `out_shape` flattened,
the keywords split into constexprs and compile options. `triton_call_lowering`: its operands and
keywords, and its constexprs, checked before the call is mapped onto the kernel's parameters
(`api._library.place_arguments`), so that a mistake in a library's lowering rule is reported
against the rule's own arguments.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Iterable, Mapping
from typing import Any

import jax
import numpy as np
from jax.interpreters.mlir import ir

from jax_triton_rocm.base import _vendors
from jax_triton_rocm.checks import _given
from jax_triton_rocm.launch import _kernel, _types

_RENAMED_KEYWORDS = {
    "custom_call_target_name": "jax_triton_rocm picks the custom-call target from the "
                               "installed jaxlib (typed FFI where it exists); drop this argument.",
}

# Keyword options of `triton_call_lowering` beyond the vendor knobs (`_vendors.COMPILE_OPTIONS`).
GENERAL_OPTIONS = ("enable_fp_fusion", "debug")


def keyword_names(fn: Any) -> tuple[str, ...]:
    """The keyword-only parameters of `fn` (an API function's own keyword arguments)."""
    return tuple(name for name, param in inspect.signature(fn).parameters.items()
                 if param.kind is inspect.Parameter.KEYWORD_ONLY)


def close_names(unknown: Iterable[str], known: Iterable[str]) -> str:
    """" (did you mean ...?)" naming the close match among `known` of each of `unknown` that
    has one (difflib's), or ""."""
    unknown, known = list(unknown), list(known)
    guesses = [(name, match[0]) for name in unknown
               if (match := difflib.get_close_matches(name, known, n=1))]
    if not guesses:
        return ""
    if len(unknown) == 1:
        return f" (did you mean {guesses[0][1]}?)"
    return f" (did you mean {', '.join(f'{m} for {n!r}' for n, m in guesses)}?)"


_ONE_LEAF = jax.tree_util.tree_structure(0)


def out_shapes(out_shape: Any, what: str = "out_shape") -> tuple[list[jax.ShapeDtypeStruct], Any]:
    """`triton_call`'s `out_shape` (or `out_type`, `what`): its leaves as `ShapeDtypeStruct`s,
    and its tree; it may be empty (`checks._surface` says when a call may have no outputs).

    Only the shape and dtype of a leaf are read (an array's own sharding, as `out_shape=x`
    gives it, is not; `jax.typeof(x)` is a leaf too); a `ShapeDtypeStruct` that asks for a
    sharding is refused.

    Raises:
      ValueError: an output with a sharding or a negative dimension. TypeError: a leaf without
        a shape and a dtype.
    """
    if hasattr(out_shape, "shape") and hasattr(out_shape, "dtype"):  # one output, the most
        leaves, tree = [out_shape], _ONE_LEAF                       # common: flattened as one leaf
    else:
        leaves, tree = jax.tree_util.tree_flatten(
            out_shape, is_leaf=lambda x: hasattr(x, "shape") and hasattr(x, "dtype"))
    shapes = []
    for i, leaf in enumerate(leaves):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"{what} leaf {i} is {leaf!r}; each output needs a .shape and a "
                            f".dtype, e.g. jax.ShapeDtypeStruct((n,), jnp.float32).")
        if isinstance(leaf, jax.ShapeDtypeStruct) and leaf.sharding is not None:
            raise ValueError(
                f"{what} leaf {i} asks for sharding={leaf.sharding}, which triton_call cannot "
                f"honour: the kernel writes each output as one buffer, and JAX places it. Drop "
                f"the sharding (jax.ShapeDtypeStruct({tuple(leaf.shape)}, {leaf.dtype})) and "
                f"constrain the result instead (jax.lax.with_sharding_constraint), or call the "
                f"kernel per shard inside jax.shard_map.")
        shape = tuple(leaf.shape)
        if any(isinstance(size, (int, np.integer)) and size < 0 for size in shape):
            raise ValueError(f"{what} leaf {i} has shape {shape}, with a negative dimension; "
                             f"each dimension is a size >= 0: give the output's real shape.")
        shapes.append(jax.ShapeDtypeStruct(shape, np.dtype(leaf.dtype)))
    return shapes, tree


def check_own_names(unwrapped: _kernel.Unwrapped, n_filled: int,
                    own_keywords: Iterable[str], filled: Iterable[str] = ()) -> None:
    """Raises TypeError for a parameter of the kernel that `triton_call` would have to fill by a
    keyword it takes for itself (`grid`, `name`, `debug`, ...): after the `n_filled` parameters
    the arguments and outputs fill, without a default, not `filled` by `constexprs=` or
    `operands=`, and set by no autotune config or heuristic.

    A keyword of that name always goes to `triton_call`; the message says how to set the
    parameter instead.
    """
    jit_fn = unwrapped.jit_fn
    configs = getattr(unwrapped.autotuner, "configs", ())
    set_elsewhere = ({key for config in configs for key in config.kwargs}
                     | {key for wrapper in unwrapped.heuristics for key in wrapper.values})
    own = set(own_keywords) - set_elsewhere - set(filled)
    for param in list(jit_fn.params)[n_filled:]:
        if param.name in own and not param.has_default:
            where = "constexprs" if param.is_constexpr else "operands"
            raise TypeError(
                f"Kernel {_kernel.kernel_name(jit_fn)}'s parameter {param.name!r} has the name "
                f"of an argument of triton_call itself ({param.name}=...), so a keyword "
                f"{param.name}= is triton_call's own and cannot fill it. Pass it by name in "
                f"{where}={{{param.name!r}: ...}} ("
                + ("a compile-time constant" if param.is_constexpr else
                   "filled at launch; constexprs= compiles a value in") + ").")


def split_compile_options(jit_fn: Any, metaparams: dict[str, Any],
                          own_keywords: Iterable[str] = ()) -> tuple[dict, dict]:
    """Splits `triton_call`'s keywords into constexprs and vendor compile options.

    A keyword named like a compile option (`waves_per_eu`, `maxnreg`, ...) is one unless the
    kernel has a parameter of that name.

    Raises:
      TypeError: a jax-triton keyword this package replaces, a keyword that is neither a
        parameter of the kernel nor a compile option (the close match among those and
        `own_keywords`, triton_call's own, suggested), or an unhashable value.
    """
    for keyword, advice in _RENAMED_KEYWORDS.items():
        if keyword in metaparams:
            raise TypeError(f"triton_call got {keyword}={metaparams[keyword]!r}: {advice}")
    names = list(jit_fn.arg_names)
    unknown = sorted(k for k in metaparams if k not in names and k not in _vendors.COMPILE_OPTIONS)
    if unknown:
        hint = close_names(unknown, [*own_keywords, *names, *_vendors.COMPILE_OPTIONS])
        raise TypeError(
            f"Unknown keyword argument(s) {', '.join(map(repr, unknown))} for kernel "
            f"{_kernel.kernel_name(jit_fn)}, whose parameters are ({', '.join(names)}), and no "
            f"argument of triton_call{hint}. Keyword arguments of triton_call fill the kernel's "
            f"constexpr parameters by name; fix the spelling.")
    constexprs = dict(metaparams)
    options = {k: constexprs.pop(k) for k in metaparams
               if k in _vendors.COMPILE_OPTIONS and k not in jit_fn.arg_names}
    for keyword, value in metaparams.items():
        _given.check_not_a_function(keyword, value, "")
        try:
            hash(value)
        except TypeError:
            raise TypeError(
                f"{keyword}={value!r} must be hashable (JAX caches compiled calls by their "
                f"static arguments): pass a tuple instead of a list, or a plain value.") from None
    return constexprs, options


def split_arguments(args: tuple) -> tuple[list[Any], tuple[tuple[str, Any], ...]]:
    """`triton_call`'s array operands, and each positional argument as ("array", operand index)
    or ("scalar", value).

    Raises:
      TypeError: an argument that is neither an array nor a scalar, or a scalar type Triton
        cannot take; each names the argument.
    """
    arrays: list[Any] = []
    positional: list[tuple[str, Any]] = []
    for i, arg in enumerate(args):
        if arg is None or _types.is_scalar(arg):
            if arg is not None:
                _types.scalar(arg, what=f"argument {i}")
            positional.append(("scalar", arg))
        elif hasattr(arg, "shape") and hasattr(arg, "dtype"):
            positional.append(("array", len(arrays)))
            arrays.append(arg if isinstance(arg, jax.Array) else jax.numpy.asarray(arg))
        else:
            raise TypeError(f"argument {i} has type {type(arg).__name__} ({arg!r}); triton_call "
                            f"takes arrays and bool/int/float scalars.")
    return arrays, tuple(positional)


def _is_operand(value: Any) -> bool:
    """An MLIR value, as a lowering rule receives each operand of an array type."""
    return isinstance(value, ir.Value)


def check_operands_and_options(array_args: tuple, in_avals: tuple,
                               compile_options: dict[str, Any],
                               own_keywords: Iterable[str] = (),
                               jit_fn: Any = None) -> None:
    """One operand (an `ir.Value`) per `ctx.avals_in`, and no keyword beyond the known compile
    options: a kernel parameter (of `jit_fn`) belongs in `constexprs`, and for anything else the
    close match among the options and `own_keywords` is suggested."""
    if len(array_args) != len(in_avals):
        raise TypeError(f"triton_call_lowering got {len(array_args)} array_args, but the "
                        f"primitive has {len(in_avals)} operands (ctx.avals_in); pass every "
                        f"operand the rule received, in order.")
    for i, value in enumerate(array_args):
        if isinstance(value, (tuple, list)):
            raise TypeError(
                f"triton_call_lowering: array_args[{i}] is a {type(value).__name__} of "
                f"{len(value)} value(s), not one operand. Pass the operands one by one, "
                f"unpacked: triton_call_lowering(ctx, kernel, *operands, ...).")
        if not _is_operand(value):
            raise TypeError(
                f"triton_call_lowering: array_args[{i}] is {value!r} ({type(value).__name__}), "
                f"not an operand. Pass the operands the lowering rule received after ctx (MLIR "
                f"values), not ctx.avals_in (their abstract values) or arrays.")
    known = GENERAL_OPTIONS + _vendors.COMPILE_OPTIONS
    unknown = sorted(set(compile_options) - set(known))
    params = [name for name in unknown if jit_fn is not None and name in jit_fn.arg_names]
    if params:
        raise TypeError(
            f"triton_call_lowering got {', '.join(f'{p}=' for p in params)}, a parameter of "
            f"kernel {_kernel.kernel_name(jit_fn)}: kernel parameters go in constexprs, e.g. "
            f"constexprs={{{params[0]!r}: {compile_options[params[0]]!r}}}.")
    if unknown:
        raise TypeError(
            f"triton_call_lowering got unknown keyword(s) {', '.join(map(repr, unknown))}"
            f"{close_names(unknown, [*own_keywords, *known])}. Fix the spelling: kernel "
            f"parameters go in constexprs={{...}}, and the compile options are "
            f"{', '.join(known)}.")


def checked_constexprs(constexprs: Mapping[str, Any] | None, names: list[str],
                       kernel: str) -> dict[str, Any]:
    if constexprs is None:
        return {}
    if not isinstance(constexprs, Mapping):
        raise TypeError(f"triton_call_lowering: constexprs={constexprs!r} must be a mapping of "
                        f"kernel parameter names to Python values, e.g. {{'n': x.size}}.")
    checked = dict(constexprs)
    unknown = sorted(str(k) for k in checked if k not in names)
    if unknown:
        raise TypeError(
            f"triton_call_lowering: constexprs names {', '.join(map(repr, unknown))}, which "
            f"kernel {kernel} has no parameter for; its parameters are ({', '.join(names)}).")
    for name, value in checked.items():
        _given.check_not_a_function(f"constexprs[{name!r}]", value, "triton_call_lowering: ")
        if isinstance(value, (jax.Array, ir.Value)):
            raise TypeError(
                f"triton_call_lowering: constexprs[{name!r}] is a JAX value ({value!r}); "
                f"constexprs are compile-time Python values (sizes and strides from the avals, "
                f"e.g. ctx.avals_in[0].shape[0]). Pass data as an operand instead.")
        try:
            hash(value)
        except TypeError:
            raise TypeError(
                f"triton_call_lowering: constexprs[{name!r}]={value!r} must be hashable: pass a "
                f"tuple instead of a list, or a plain value.") from None
    return checked


def check_constexprs_given(unwrapped: _kernel.Unwrapped, constexprs: dict[str, Any]) -> None:
    """A plain kernel's `tl.constexpr` without default must be in `constexprs` (nothing else can
    set it); autotuned and heuristics kernels are checked per config by the core."""
    if unwrapped.autotuner is not None or unwrapped.heuristics:
        return
    missing = [p.name for p in unwrapped.jit_fn.params
               if p.is_constexpr and not p.has_default and p.name not in constexprs]
    if missing:
        raise TypeError(
            f"triton_call_lowering: kernel {_kernel.kernel_name(unwrapped.jit_fn)} needs "
            f"tl.constexpr {', '.join(map(repr, missing))}: add "
            f"{', '.join(f'{m!r}: ...' for m in missing)} to constexprs.")
