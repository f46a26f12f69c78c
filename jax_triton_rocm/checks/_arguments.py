"""Each API's own arguments turned into the common form that `checks._checker.check_call`
checks, each error naming the fix.

`triton_call`: the positional arguments split into arrays and scalars, `out_shape` flattened,
the keywords split into constexprs and compile options, and its operands bound to the kernel's
parameters, for jax-triton 0.3's surface and 0.4's in one function (the rules, with 0.3 and 0.4
code side by side, are docs/porting.md's "Porting from jax-triton"). `triton_call_lowering`: its
operands and keywords, and its constexprs, checked before the call is mapped onto the kernel's
parameters (`api._library.place_arguments`), so that a mistake in a library's lowering rule is
reported against the rule's own arguments.

Values as a call gives them to a kernel's parameters, taken or refused before the layout:
a concrete 0-d array for a parameter that declares a scalar type is the scalar it holds, a
NumPy array in the other byte order (which JAX cannot take) is refused naming it, and a Python
function is no constexpr.

What the primitive sees is plain: arrays in kernel-parameter order (a `Ref` read before the call
and written back after it, as an operand aliased to an extra result), and results in the order
of their parameters; an output's parameter may come before an operand's (`place_outputs`).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
from jax._src.state import types as state_types
from jax.interpreters.mlir import ir

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env, _values
from jax_triton_rocm.checks import _checker
from jax_triton_rocm.spec import _layout, _misplaced, _spec, _tensordesc
from jax_triton_rocm.spec._tensordesc import TensorDescriptor

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction


@dataclasses.dataclass(frozen=True)
class CallArguments:
    """A `triton_call`'s arguments meant for the kernel and its outputs, as `call_arguments` takes
    them, before they are bound to the kernel's parameters.

    Attributes:
      args, keywords: the positional and keyword arguments (`taken_values`).
      convention: "out_shape" (jax-triton 0.3) or "out_type" (0.4), whichever was given.
      outputs: the outputs as given; `out_shapes` their leaves, `out_tree` their tree.
      runtime: {keyword: parameter index} for the keywords that are runtime scalar operands:
        with `out_type` (0.4), a scalar keyword naming a parameter that is no `tl.constexpr`.
      buffers: the keywords that hold something only an operand can be (`holds_buffer`).
      roles: each scalar or None given positionally (by index) or as a runtime keyword (by
        name), as `_spec.scalar_role` types it, or None where that fails (the full check says
        why); a constexpr parameter's value included.
    """

    args: tuple
    keywords: dict[str, Any]
    convention: str
    outputs: Any
    out_shapes: list
    out_tree: Any
    runtime: dict[str, int]
    buffers: frozenset[str]
    roles: dict[int | str, tuple | None]


def call_arguments(args: tuple, keywords: dict[str, Any], unwrapped: _spec.Unwrapped,
                   convention: str, outputs: Any) -> CallArguments:
    """`triton_call`'s arguments and outputs (`outputs`, in `convention`) taken: the outputs'
    leaves (`out_shapes`), the values given (`taken_values`), the keywords that are runtime
    scalar operands, and the scalars typed, once per call (`CallArguments.roles`).

    Raises:
      TypeError / ValueError: as `out_shapes` and `taken_values` say.
    """
    shapes, tree = out_shapes(outputs, convention)
    args, keywords = taken_values(unwrapped, args, keywords)
    runtime = {}
    if convention == "out_type" and keywords:
        index = {param.name: i for i, param in enumerate(unwrapped.params) if not param.constexpr}
        runtime = {name: index[name] for name, value in keywords.items()
                   if name in index and isinstance(value, _spec.SCALAR_TYPES)}
    buffers = frozenset([name for name, value in keywords.items() if holds_buffer(value)])
    params, facts = unwrapped.jit_fn.params, unwrapped.params
    scalars = [(i, params[i], value, f"argument {i}") for i, value in enumerate(args)
               if i < len(params) and not isinstance(value, jax.Array) and (
                   facts[i].constexpr or value is None or isinstance(value, _spec.SCALAR_TYPES))]
    scalars += [(name, params[i], keywords[name], f"keyword argument {name!r}")
                for name, i in runtime.items()]
    roles: dict[int | str, tuple | None] = {}
    for where, param, value, what in scalars:
        try:
            roles[where] = _spec.scalar_role(param, value, what=what)
        except (TypeError, ValueError, OverflowError):  # the full check says why
            roles[where] = None
    return CallArguments(args, keywords, convention, outputs, shapes, tree, runtime, buffers,
                         roles)


def taken_values(unwrapped: _spec.Unwrapped, args: tuple,
                 keywords: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """`args` and `keywords` with each concrete 0-d array given to a parameter whose annotation
    declares a scalar type (`x: tl.float32`, `_spec.Parameter.declared`) replaced by the scalar
    it holds (`np.float32(2)` for `jnp.float32(2)`), typed later by the annotation. Other arrays
    stay arrays (pointers, as in Triton; a traced one on such a parameter is refused, naming
    it, when the call is laid out).

    Raises:
      TypeError: a NumPy array in the other byte order, naming it and the fix.
    """
    pending = [*[(f"argument {i}", arg) for i, arg in enumerate(args)],
               *[(f"keyword argument {name!r}", value) for name, value in keywords.items()]]
    pending.reverse()  # a stack, walked depth first in the order given
    while pending:
        what, value = pending.pop()
        if isinstance(value, tuple):
            pending += reversed([(f"{what}[{j}]", element) for j, element in enumerate(value)])
        elif isinstance(value, np.ndarray) and not value.dtype.isnative:
            raise TypeError(
                f"{what} is a NumPy array of dtype {value.dtype.str!r}, in the other byte order "
                f"than this machine's, which JAX cannot take. Pass it in this machine's byte "
                f"order: x.astype(x.dtype.newbyteorder('=')).")
    params = unwrapped.params
    declared = {i for i, param in enumerate(params) if param.declared}
    if not declared:
        return args, keywords

    def held(value: Any) -> Any:
        if (isinstance(value, (np.ndarray, jax.Array)) and not isinstance(value, jax.core.Tracer)
                and value.ndim == 0):
            return np.asarray(value)[()]
        return value

    args = tuple([held(arg) if i in declared else arg for i, arg in enumerate(args)])
    names = {params[i].name for i in declared}
    return args, {name: held(value) if name in names else value
                  for name, value in keywords.items()}


def check_not_a_function(what: str, value: Any, caller: str) -> None:
    """Raises TypeError for a constexpr that is a function Triton cannot compile as one: an
    extern (`triton.language.extra.libdevice.tanh`), or a Python function (a lambda, a method).
    Triton takes values, its builtins (`tl.exp`, `tl.maximum`: they carry `__triton_builtin__`)
    and Triton functions (`@triton.jit`, `tl.sigmoid`) as constexprs, and fails deep in its
    compiler on other callables."""
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


_RENAMED_KEYWORDS = {
    "custom_call_target_name": "jax_triton_rocm picks the custom-call target (jaxlib's typed "
                               "FFI one, or its legacy one where XLA_FLAGS keeps custom calls out "
                               f"of command buffers); drop this argument, and set "
                               f"{_env.ENV_CALL_TARGET}=ffi or legacy to force one.",
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


def check_canonical_dtype(dtype: Any, what: str, fix: str, *, output: bool = False) -> None:
    """Raises TypeError for an array's or output's dtype that JAX holds as another one: with
    64-bit types off (`jax_enable_x64`, the default), float64, int64, uint64 and complex128
    become their 32-bit kind (`jax.dtypes.canonicalize_dtype`). A float input would reach the
    kernel converted (callers pass floats only: integers convert as `jnp.asarray` converts
    them), and an output declared float64 is a float32 buffer the kernel would overrun.
    `fix` is the code that makes it the dtype JAX holds, with {} for its name."""
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


_ONE_LEAF = jax.tree_util.tree_structure(0)


def out_shapes(out_shape: Any, what: str = "out_shape") -> tuple[list[jax.ShapeDtypeStruct], Any]:
    """`triton_call`'s `out_shape` (or `out_type`, `what`): its leaves as `ShapeDtypeStruct`s,
    and its tree; it may be empty (`checks._arguments` says when a call may have no outputs).

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
        if any([isinstance(size, (int, np.integer)) and size < 0 for size in shape]):
            raise ValueError(f"{what} leaf {i} has shape {shape}, with a negative dimension; "
                             f"each dimension is a size >= 0: give the output's real shape.")
        check_canonical_dtype(leaf.dtype, f"{what} leaf {i}",
                              f"jax.ShapeDtypeStruct({shape}, jnp.{{}})", output=True)
        shapes.append(jax.ShapeDtypeStruct(shape, np.dtype(leaf.dtype)))
    return shapes, tree


def _is_operand(value: Any) -> bool:
    """An MLIR value, as a lowering rule receives each operand of an array type."""
    return isinstance(value, ir.Value)


def check_operands_and_options(array_args: tuple, in_avals: tuple,
                               compile_options: dict[str, Any],
                               own_keywords: Iterable[str] = (),
                               jit_fn: JITFunction | None = None) -> None:
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
            f"kernel {_spec.kernel_name(jit_fn)}: kernel parameters go in constexprs, e.g. "
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
        check_not_a_function(f"constexprs[{name!r}]", value, "triton_call_lowering: ")
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


def check_constexprs_given(unwrapped: _spec.Unwrapped, constexprs: dict[str, Any]) -> None:
    """A plain kernel's `tl.constexpr` without default must be in `constexprs` (nothing else can
    set it); autotuned and heuristics kernels are checked per config by the core."""
    if unwrapped.autotuner is not None or unwrapped.heuristics:
        return
    missing = [p.name for p in unwrapped.jit_fn.params
               if p.is_constexpr and not p.has_default and p.name not in constexprs]
    if missing:
        raise TypeError(
            f"triton_call_lowering: kernel {_spec.kernel_name(unwrapped.jit_fn)} needs "
            f"tl.constexpr {', '.join(map(repr, missing))}: add "
            f"{', '.join(f'{m!r}: ...' for m in missing)} to constexprs.")


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
        hasattr(value, "shape") and hasattr(value, "dtype")
        and not isinstance(value, _spec.SCALAR_TYPES))


@dataclasses.dataclass
class ParameterValues:
    """What the call gives each parameter: operands and constexprs by parameter index."""

    operands: dict[int, Any]
    by_keyword: set[int]
    metaparams: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class NamedParameters:
    """`triton_call`'s `constexprs=` and `operands=`: parameters by name, checked."""

    constexprs: dict[str, Any] = dataclasses.field(default_factory=dict)
    operands: dict[str, Any] = dataclasses.field(default_factory=dict)


def named_parameters(unwrapped: _spec.Unwrapped, constexprs: Any, operands: Any,
                     keywords: dict[str, Any]) -> NamedParameters:
    """`constexprs=` and `operands=` checked: mappings of the kernel's parameter names, each
    parameter named once among them and the keywords; a `tl.constexpr` only in `constexprs`,
    an array only in `operands`.

    Raises:
      TypeError: naming the argument, the parameter, the value and the fix.
    """
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
                f"has no parameter for{close_names(unknown, list(params))}; its "
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
    return NamedParameters(checked["constexprs"], checked["operands"])


@dataclasses.dataclass
class Flat:
    """The operands flattened in kernel-parameter order (depth first), each numbered as it is
    met: the primitive takes them in that order.

    Attributes:
      entries: each operand parameter's entry, with the primitive's operand index where an
        operand goes.
      leaves: every operand leaf (arrays, Refs, descriptor bases, scalars but None), in order.
      operands: the primitive's operands (the arrays, Refs and descriptor bases), in order.
    """

    entries: dict[int, Any] = dataclasses.field(default_factory=dict)
    leaves: list[Leaf] = dataclasses.field(default_factory=list)
    operands: list[Any] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class Leaf:
    """One operand leaf: `value` (an array, a Ref or a scalar), where it is (`what`), the
    primitive's operand index (None for a scalar), and whether it is an array (or a Ref), not a
    scalar."""

    value: Any
    what: str
    operand: int | None = None
    is_array: bool = True


def _operand_entry(flat: Flat, value: Any, what: str, typed: bool = False) -> tuple[str, Any]:
    """`value`, given to one operand parameter, flattened into `flat`: its entry. A scalar is
    typed (`_spec.scalar`) to be refused here where it cannot be passed, unless `typed`."""
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


def _kind(entry: tuple[str, Any]) -> str | None:
    """What an entry gives its parameter, for `_misplaced.forgotten`: "pointer" (an array),
    "scalar" (a value), or None (None, a tuple, a descriptor)."""
    kind, value = entry
    return "pointer" if kind == "input" else "scalar" if kind == "scalar" and value is not None \
        else None


def forgotten_hint(jit_fn: JITFunction, given: ParameterValues, flat: Flat, n_outs: int,
                   aliased: set[int], own_keywords: tuple[str, ...]) -> str:
    """The parameter a call most likely forgot (`_misplaced.forgotten`): the parameters that
    neither a keyword nor a constexpr fills take the positional values, then the outputs' (or,
    failing that, the unaliased outputs') pointers, in order. A parameter left unfilled that is
    named like one of triton_call's own arguments (`own_keywords`) is said to go in
    `operands=`."""
    slots = [i for i, p in enumerate(jit_fn.params) if not p.is_constexpr
             and p.name not in given.metaparams and i not in given.by_keyword]
    values = [_kind(flat.entries[i]) for i in slots if i in flat.entries]
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


def check_outputs_written(jit_fn: JITFunction, flat: Flat, placed: Placed, convention: str,
                          n_outs: int, constexprs: Mapping[str, Any]) -> None:
    """`_misplaced.check_written` on the call's plain input arrays (a Ref, or an input aliased
    to an output, is written on purpose and never counts) and unaliased outputs, by the
    parameters they fill; the kernel read as compiled with the call's `constexprs`."""
    results = set(placed.aliases.values())
    unaliased = [o for o in range(n_outs) if placed.user_results[o] not in results]
    leaves = {leaf.operand: leaf for leaf in flat.leaves if leaf.operand is not None}
    inputs = {i: leaves[entry[1]] for i, entry in flat.entries.items()
              if entry[0] == "input" and entry[1] not in placed.aliases
              and not is_ref(leaves[entry[1]].value)}
    _misplaced.check_written(jit_fn, inputs, dict(zip(placed.output_params, unaliased)),
                             constexprs, leaves=flat.leaves, convention=convention,
                             returned=bool(n_outs or placed.refs))


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


def _output_given_as_input(leaves: list, convention: str, out_shapes: list,
                           unaliased: list[int], extra: int) -> str:
    """For a call with `extra` outputs more than parameters left for them: the last array
    arguments with an output's shape and dtype (most likely that output passed as an input too,
    as 0.3's calls did), and the two fixes; "" where none matches."""
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
    operands follow the kernel's parameters and its results with a pointer come first, in
    parameter order; an output may sit in any parameter position, before an operand's too: the
    routes launch such a kernel through a trampoline that takes the buffers in their order
    (`plan._trampoline`), so no buffer is filled or copied for it. Each `Ref` operand gets one
    more result, aliased to it.

    `input_output_aliases` is read first, as (operand leaf, output index) pairs in the call's
    convention; then the outputs that get a pointer are given their parameters. Where neither
    layout fits, a call that 0.3 could have made (`trailing`) keeps 0.3's placement, so that the
    layout reports what is wrong as 0.3 did, unless `hint` names the parameter the call most
    likely forgot.

    Args:
      entries: each given parameter's entry, with the primitive's operand index where an
        operand goes (`Flat`); ("constexpr", value) for a value given positionally
        to a `tl.constexpr`.
      operands: the primitive's operands, in that order.
      leaves: every operand leaf in kernel-parameter order, each with its operand index (None
        for a scalar); `refs` those that are Refs.
      convention: "out_type" (jax-triton 0.4) or "out_shape" (0.3).
      zeroed: `zeroed_outputs`, put in the primitive's result indices here (a callable's
        through `MappedZeroed`, unless the results keep the outputs' order).
      trailing: for a call 0.3 could make, the parameters after its arguments.
      hint: the parameter the call most likely forgot, given the aliased outputs, for a call
        whose outputs fit no layout (`forgotten_hint`).

    Raises:
      TypeError / ValueError: `input_output_aliases` not a dict of ints, an index that is not
        an array operand's in this convention (the message states both conventions), shapes
        that differ, or aliases given with Ref operands; the parameters left unfilled fit
        neither layout (the message lists them and the counts, and says what `hint` says); and
        as `_values.output_indices` says (for `zeroed`).
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
                 for i, o in _checker.alias_pairs("triton_call", given, tuple(avals),
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
    else:
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


def own_named_parameter(unwrapped: Any, own_keywords: Iterable[str], start: int) -> Any:
    """The first of the kernel's parameters from position `start` on (those the arguments and
    outputs leave) named like one of `own_keywords` and set by nothing else (no default, no
    autotune config, no heuristic), or None: only a keyword could fill it, and that keyword is
    the API's own."""
    own = set(own_keywords) - _set_by_wrappers(unwrapped)
    return next((param for param in list(unwrapped.jit_fn.params)[start:]
                 if param.name in own and not param.has_default), None)


def _set_by_wrappers(unwrapped: Any) -> set[str]:
    """The constexprs the kernel's autotune configs and heuristics set."""
    configs = getattr(unwrapped.autotuner, "configs", ())
    return ({key for config in configs for key in config.kwargs}
            | {key for wrapper in unwrapped.heuristics for key in wrapper.values})


def bind_arguments(call: CallArguments, *, unwrapped: Any, input_output_aliases: Any,
                   zeroed_outputs: Any, has_side_effect: bool, own_keywords: tuple[str, ...],
                   constexprs: Any = None,
                   operands: Any = None) -> tuple[Placed, dict[str, Any], tuple]:
    """Binds a `triton_call` (its positional arguments, keywords and named parameters,
    `constexprs=` and `operands=`, checked by `named_parameters`, to the kernel's parameters),
    flattens its operands and places its outputs; returns them, the vendor compile options among
    the keywords, and the names of the operand parameters given by keyword
    (`KernelCallSpec.by_keyword`).

    A keyword named like a compile option (`waves_per_eu`, `maxnreg`, ...) is one unless the
    kernel has a parameter of that name. The operands are flattened in kernel-parameter order;
    a positional value on a `tl.constexpr` parameter is left to the layout, which makes it a
    constexpr. A call that 0.3 could have made (flat positional arrays and scalars only) whose
    outputs fill the parameters after its arguments keeps 0.3's positional form, each positional
    argument as ("array", operand index) or ("scalar", value).

    Last, a parameter of the kernel that `triton_call` would have to fill by a keyword it takes
    for itself (`own_keywords`: `grid`, `name`, `debug`, ...) is refused: one after the
    parameters the arguments and outputs fill, without a default, not filled by `constexprs=`
    or `operands=`, and set by no autotune config or heuristic. A keyword of that name always
    goes to `triton_call`; the message says how to set the parameter instead.

    Raises:
      TypeError: more arguments than parameters (with `out_shape`, counting the outputs, as
        0.3 places them after the arguments), a parameter given twice (Python's wording), a
        jax-triton keyword this package replaces, a keyword that is neither a parameter of the
        kernel nor a compile option (the close match among those and `own_keywords`
        suggested), an unhashable constexpr, an array given to a `tl.constexpr` parameter, an
        argument Triton cannot take (each names the argument), or a parameter only one of
        `own_keywords` could fill; and as `place_outputs` says.
      ValueError: the same Ref given twice, a call nothing would use; and as `place_outputs`
        says.
    """
    args, keywords, convention = call.args, call.keywords, call.convention
    outputs, out_shapes = call.outputs, call.out_shapes
    named = named_parameters(unwrapped, constexprs, operands, keywords)
    jit_fn = unwrapped.jit_fn
    params, name = jit_fn.params, unwrapped.name
    index = {param.name: i for i, param in enumerate(params)}
    twice = [k for k in [*keywords, *named.constexprs, *named.operands]
             if index.get(k, len(args)) < len(args)]
    n_placed = len(args) + (len(out_shapes) if convention == "out_shape" else 0)
    if len(args) > len(params) or (twice and n_placed > len(params)):
        _layout.check_operands(jit_fn, len(args), n_placed - len(args), {})
    if twice:
        raise TypeError(f"triton_call() got multiple values for argument {twice[0]!r}: "
                        f"positional argument {index[twice[0]]} fills it (kernel {name}); "
                        f"pass it once.")
    given = ParameterValues(dict(enumerate(args)), set(), {})
    for keyword, value in keywords.items():
        i = index.get(keyword)
        if i is not None and params[i].is_constexpr and keyword in call.buffers:
            raise TypeError(f"Kernel {name}'s parameter {keyword!r} is a tl.constexpr, but "
                            f"keyword argument {keyword}= holds an array. Pass a Python value "
                            f"there.")
        if i is None or params[i].is_constexpr or not (
                convention == "out_type" or keyword in call.buffers):
            given.metaparams[keyword] = value
        else:
            given.operands[i] = value
            given.by_keyword.add(i)
    given.metaparams.update(named.constexprs)
    for keyword, value in named.operands.items():
        given.operands[index[keyword]] = value
        given.by_keyword.add(index[keyword])
    metaparams = given.metaparams
    for keyword, advice in _RENAMED_KEYWORDS.items():
        if keyword in metaparams:
            raise TypeError(f"triton_call got {keyword}={metaparams[keyword]!r}: {advice}")
    names = list(jit_fn.arg_names)
    unknown = sorted([k for k in metaparams
                      if k not in names and k not in _vendors.COMPILE_OPTIONS])
    if unknown:
        hint = close_names(unknown, [*own_keywords, *names, *_vendors.COMPILE_OPTIONS])
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
        if i not in given.operands:
            continue
        what = f"argument {i}" if i not in given.by_keyword else f"keyword argument {param.name!r}"
        if not param.is_constexpr:
            # A positional scalar typed by its value when the call was taken is not typed again.
            typed = (i < len(args) and call.roles.get(i) is not None
                     and not unwrapped.params[i].declared)
            flat.entries[i] = _operand_entry(flat, given.operands[i], what, typed)
        elif holds_buffer(given.operands[i]):
            raise TypeError(
                f"Kernel {name}'s parameter {param.name!r} is a "
                f"tl.constexpr, but {what} holds an array. Pass a Python value there.")
        else:
            check_not_a_function(param.name, given.operands[i], "")
            flat.entries[i] = ("constexpr", given.operands[i])
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
    shaped = not given.by_keyword and not refs and all(
        [kind in ("input", "scalar") or (kind == "constexpr" and (
            value is None or isinstance(value, _spec.SCALAR_TYPES)))
         for kind, value in flat.entries.values()])
    trailing = list(range(len(args), len(args) + len(out_shapes)))
    placed = place_outputs(
        jit_fn, given.metaparams, flat.entries, flat.operands, flat.leaves, refs,
        convention=convention, out_shapes=out_shapes, input_output_aliases=input_output_aliases,
        zeroed=zeroed_outputs,
        trailing=trailing if shaped and convention == "out_shape" else None,
        hint=lambda aliased: forgotten_hint(jit_fn, given, flat, len(out_shapes), aliased,
                                            own_keywords))
    # The constexprs Triton compiles the kernel with: a heuristic or an autotune config may
    # set others, or replace these.
    wrapped = _set_by_wrappers(unwrapped)
    compiled_with = {k: v for k, v in placed.metaparams.items() if k not in wrapped}
    check_outputs_written(jit_fn, flat, placed, convention, len(out_shapes), compiled_with)
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
    param = own_named_parameter(unwrapped, set(own_keywords) - {*named.constexprs,
                                                                *named.operands},
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
    return placed, options, tuple([jit_fn.arg_names[i] for i in sorted(given.by_keyword)])
