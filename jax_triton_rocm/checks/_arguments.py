"""Each API's own arguments turned into the common form that `checks._checker.check_call`
checks, each error naming the fix.

`triton_call`: the positional arguments split into arrays and scalars, `out_shape` flattened,
the keywords split into constexprs and compile options. `triton_call_lowering`: its operands and
keywords, and its constexprs, checked before the call is mapped onto the kernel's parameters
(`api._library.place_arguments`), so that a mistake in a library's lowering rule is reported
against the rule's own arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.interpreters.mlir import ir

from jax_triton_rocm.base import _vendors
from jax_triton_rocm.launch import _kernel, _types

_RENAMED_KEYWORDS = {
    "custom_call_target_name": "jax_triton_rocm picks the custom-call target from the "
                               "installed jaxlib (typed FFI where it exists); drop this argument.",
}

# Keyword options of `triton_call_lowering` beyond the vendor knobs (`_vendors.COMPILE_OPTIONS`).
GENERAL_OPTIONS = ("enable_fp_fusion", "debug")


def aval_text(aval: Any) -> str:
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}"


def out_shapes(out_shape: Any, what: str = "out_shape") -> tuple[list[jax.ShapeDtypeStruct], Any]:
    """`triton_call`'s `out_shape` (or `out_type`, `what`): its leaves as `ShapeDtypeStruct`s
    (anything with `.shape` and `.dtype`, `jax.typeof(x)` too), and its tree; it may be empty
    (`checks._surface` says when a call may have no outputs)."""
    leaves, tree = jax.tree_util.tree_flatten(
        out_shape, is_leaf=lambda x: hasattr(x, "shape") and hasattr(x, "dtype"))
    shapes = []
    for i, leaf in enumerate(leaves):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"{what} leaf {i} is {leaf!r}; each output needs a .shape and a "
                            f".dtype, e.g. jax.ShapeDtypeStruct((n,), jnp.float32).")
        shapes.append(jax.ShapeDtypeStruct(tuple(leaf.shape), np.dtype(leaf.dtype)))
    return shapes, tree


def split_compile_options(jit_fn: Any, metaparams: dict[str, Any]) -> tuple[dict, dict]:
    """Splits `triton_call`'s keywords into constexprs and vendor compile options.

    A keyword named like a compile option (`waves_per_eu`, `maxnreg`, ...) is one unless the
    kernel has a parameter of that name.

    Raises:
      TypeError: a jax-triton keyword this package replaces, or an unhashable value.
    """
    for keyword, advice in _RENAMED_KEYWORDS.items():
        if keyword in metaparams:
            raise TypeError(f"triton_call got {keyword}={metaparams[keyword]!r}: {advice}")
    constexprs = dict(metaparams)
    options = {k: constexprs.pop(k) for k in metaparams
               if k in _vendors.COMPILE_OPTIONS and k not in jit_fn.arg_names}
    for keyword, value in metaparams.items():
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


def check_operands_and_options(array_args: tuple, in_avals: tuple,
                               compile_options: dict[str, Any]) -> None:
    """One operand per `ctx.avals_in`, and no keyword beyond the known compile options."""
    if len(array_args) != len(in_avals):
        raise TypeError(f"triton_call_lowering got {len(array_args)} array_args, but the "
                        f"primitive has {len(in_avals)} operands (ctx.avals_in); pass every "
                        f"operand the rule received, in order.")
    unknown = sorted(set(compile_options) - set(GENERAL_OPTIONS + _vendors.COMPILE_OPTIONS))
    if unknown:
        raise TypeError(
            f"triton_call_lowering got unknown keyword(s) {', '.join(map(repr, unknown))}. "
            f"Kernel parameters go in constexprs={{...}}; compile options are "
            f"{', '.join(GENERAL_OPTIONS + _vendors.COMPILE_OPTIONS)}.")


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
