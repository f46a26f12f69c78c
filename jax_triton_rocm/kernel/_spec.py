"""`KernelCallSpec`: one Triton kernel call as one frozen value, the primitive's parameter; the
dtypes, scalars and constexprs in it as Triton and jaxlib see them, and a kernel taken apart."""

from __future__ import annotations

import dataclasses
import re
import struct
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import jax
import numpy as np

from jax_triton_rocm.base import _values
from jax_triton_rocm.base._values import (  # noqa: F401  (their home; named here for importers)
    MAX_GRID_SIZE, Grid, MetaGrid, grid_value, normalize_grid)

if TYPE_CHECKING:
    from triton.runtime.autotuner import Autotuner
    from triton.runtime.jit import JITFunction


# Array dtypes Triton takes, by the pointer type in a Triton signature ("*" + this).
_ARRAY_TYPES: dict[str, str] = {
    "bool": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "uint8": "u8",
    "uint16": "u16", "uint32": "u32", "uint64": "u64", "float16": "fp16", "bfloat16": "bf16",
    "float32": "fp32", "float64": "fp64", "float8_e4m3fn": "fp8e4nv", "float8_e5m2": "fp8e5",
    "float8_e4m3fnuz": "fp8e4b8", "float8_e5m2fnuz": "fp8e5b16", "float8_e4m3b11fnuz": "fp8e4b15"}
# Triton's fp8 type names, with the JAX dtype of each.
FP8_DTYPES = {triton_type: dtype for dtype, triton_type in _ARRAY_TYPES.items()
              if triton_type.startswith("fp8")}


def aval_text(aval: Any) -> str:
    """An array's dtype and shape as messages show it: "float32[1024]"."""
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}"


def exact_key(value: Any) -> Any:
    """`value` as a memo key equal only to the key of the same value of the same type, written
    alike: 2, 2.0, True and np.int32(2) differ, as do 0.0 and -0.0 (each compiles differently)."""
    kind = type(value)
    if kind in (int, str, bytes, type(None)):  # the common cases, at the cost of a tuple
        return kind, value
    if isinstance(value, (tuple, list)):
        return kind, tuple([exact_key(item) for item in value])
    if kind.__name__ == "constexpr":  # Triton's wrapper compares by its value
        return kind, exact_key(getattr(value, "value", None))
    if isinstance(value, float):  # its bits: the sign of zero and a NaN's payload count
        return kind, struct.pack("<d", value)
    if isinstance(value, (np.floating, np.complexfloating)):
        return kind, value.tobytes()
    if isinstance(value, complex):
        return kind, struct.pack("<dd", value.real, value.imag)
    if hasattr(value, "cache_key") and hasattr(value, "src"):
        # A Triton function by identity: its own hash parses its source (slow, and not safe
        # across threads on 3.11); keys that outlive it hold its call graph's digest too.
        return kind, id(value)
    return kind, value


def plain_constexpr(value: Any) -> Any:
    """A NumPy scalar as the Python scalar it equals; any other value as it is. (Triton's code
    generator fails on a NumPy constexpr, which its cache key writes as the Python one.)"""
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


_F32_MAX = float(np.finfo(np.float32).max)
_F32_NORMAL = (float(np.finfo(np.float32).tiny), _F32_MAX)


# By the dtype object given (np.dtype() of it is slow): one entry per dtype the process uses.
_POINTER_TYPES: dict[Any, str] = {}


def pointer_type(dtype: Any, *, what: str) -> str:
    """The Triton pointer type ("*fp32") for arrays of `dtype`; TypeError naming `what`."""
    try:
        return _POINTER_TYPES[dtype]
    except (KeyError, TypeError):
        pass
    name = np.dtype(dtype).name
    try:
        return _POINTER_TYPES.setdefault(dtype, "*" + _ARRAY_TYPES[name])
    except KeyError:
        raise TypeError(
            f"{what} has dtype {name}, which Triton kernels cannot take. Supported dtypes: "
            f"{', '.join(_ARRAY_TYPES)}. Cast it first (x.astype(...)) or pass its "
            f"bits through a same-width integer view (jax.lax.bitcast_convert_type).") from None


@dataclasses.dataclass(frozen=True)
class Scalar:
    """A scalar argument, typed as Triton's launcher types it; `proto_kind`: jaxlib's type."""

    value: bool | int | float
    triton_type: str
    proto_kind: str
    declared: bool = False  # the type is the parameter's annotation (`declared_type`)


# The Triton type of a NumPy scalar of each dtype, passed as `DECLARABLE` says.
_NUMPY_SCALARS = {"bool": "u1", "int8": "i32", "int16": "i32", "int32": "i32", "int64": "i64",
                  "uint8": "u32", "uint16": "u32", "uint32": "u32", "uint64": "u64",
                  "float32": "fp32", "float64": "fp64"}


# The types a kernel takes by value (a static scalar), not as an array, for `isinstance` tests.
# (No NumPy array is an `np.generic`.)
SCALAR_TYPES = (bool, int, float, np.generic)


# Declarable scalar types jaxlib can pass: Triton type -> (jaxlib's, Triton's name, range);
# `_layout` names an annotation by it where an array is given to a scalar parameter.
DECLARABLE: dict[str, tuple[str, str, Any]] = {
    "u1": ("bool", "tl.int1", (0, 2)), "i32": ("i32", "tl.int32", (-(2**31), 2**31)),
    "u32": ("u32", "tl.uint32", (0, 2**32)), "i64": ("i64", "tl.int64", (-(2**63), 2**63)),
    "u64": ("u64", "tl.uint64", (0, 2**64)), "fp32": ("f32", "tl.float32", float),
    "fp64": ("f64", "tl.float64", float)}


def declared_type(param: Any) -> str | None:
    """The scalar Triton type `param`'s annotation declares ("i32" for `n: tl.int32`), or None."""
    declared = getattr(param, "annotation_type", "") or ""
    if not declared or declared.startswith("*") or param.is_constexpr:
        return None
    return declared


def scalar(value: Any, *, what: str, declared: str | None = None) -> Scalar:
    """Types a scalar argument as Triton's launcher does: by the parameter's annotation where it
    declares one (`declared`), else by the value (jax-triton 0.4's rule). OverflowError or
    TypeError naming `what` where it cannot be passed."""
    if declared is not None:  # as Triton's launcher packs it: an int for a float is converted
        if declared not in DECLARABLE:
            raise TypeError(
                f"{what} is annotated {declared}, a type jaxlib's kernel call cannot pass by value "
                f"(it passes bools and 32- and 64-bit integers and floats). Annotate it tl.int32, "
                f"tl.float32 or another of those (and cast in the kernel), or make it a "
                f"tl.constexpr.")
        proto_kind, name, holds = DECLARABLE[declared]
        plain = value.item() if isinstance(value, np.generic) else value
        if holds is float:
            number = isinstance(plain, float) or (isinstance(plain, int) and abs(plain) < 2**1023)
            if number and (declared == "fp64" or abs(plain) <= _F32_MAX or not np.isfinite(plain)):
                return Scalar(float(plain), declared, proto_kind, True)
            raise (OverflowError if isinstance(plain, (int, float)) else TypeError)(
                f"{what} is annotated {name}, and {value!r} ({type(value).__name__}) does not fit "
                f"it. Pass a {name.removeprefix('tl.')} value, or change the annotation.")
        if isinstance(plain, int) and holds[0] <= plain < holds[1]:
            return Scalar(bool(plain) if declared == "u1" else int(plain), declared, proto_kind,
                          True)
        raise (OverflowError if isinstance(plain, int) else TypeError)(
            f"{what} is annotated {name}, which holds integers in [{holds[0]}, {holds[1]}), and "
            f"{value!r} ({type(value).__name__}) does not fit it. Pass a value in that range, or "
            f"annotate the parameter with a wider type (tl.int64, tl.uint64, tl.float32).")
    if isinstance(value, (bool, np.bool_)):
        return Scalar(bool(value), "u1", "bool")
    if isinstance(value, np.generic):
        name = value.dtype.name
        if name not in _NUMPY_SCALARS:
            raise TypeError(
                f"{what} is a NumPy {name} scalar, which a Triton kernel call cannot pass by "
                f"value. Use one of: {', '.join(_NUMPY_SCALARS)}, or a Python bool/int/float.")
        triton_type = _NUMPY_SCALARS[name]
        proto_kind, _, bounds = DECLARABLE[triton_type]
        plain = value.item()
        if bounds is not float and not bounds[0] <= plain < bounds[1]:
            raise OverflowError(f"{what} = {plain} does not fit in {name}.")
        return Scalar(plain, triton_type, proto_kind)
    if isinstance(value, int):
        for name in ("i32", "i64", "u64"):  # the first that holds it
            if DECLARABLE[name][2][0] <= value < DECLARABLE[name][2][1]:
                return Scalar(value, name, name)
        raise OverflowError(
            f"{what} = {value} is out of range for a Triton integer argument, which must lie in "
            f"[-2**63, 2**64). Pass it as an array, or split it into two 64-bit halves.")
    if isinstance(value, float):
        if value == 0 or not np.isfinite(value) or _F32_NORMAL[0] <= abs(value) <= _F32_NORMAL[1]:
            return Scalar(value, "fp32", "f32")
        return Scalar(value, "fp64", "f64")
    raise TypeError(f"{what} has type {type(value).__name__}; expected an array or a scalar.")


def scalar_role(param: Any, value: Any, *, what: str, declared: str | None = None) -> tuple:
    """How a scalar reaches the kernel, as Triton's launcher decides: ("constexpr", value),
    compiled in, or ("runtime", typed scalar, "D" for an integer divisible by 16, "" for
    another, None where unspecialised), passed at launch; `declared`: its parameter's
    `declared_type` (a tuple's elements declare none)."""
    if param.is_constexpr or value is None:
        return "constexpr", value
    typed = scalar(value, what=what, declared=declared)
    integers = ("i32", "u32", "i64", "u64") if declared is not None else ("i32", "i64", "u64")
    if typed.triton_type not in integers or param.do_not_specialize:
        return "runtime", typed, None
    if declared is None and typed.value == 1:
        return "constexpr", 1
    return "runtime", typed, "D" if typed.value % 16 == 0 else ""


def compile_view(jit_fn: JITFunction, positional: tuple) -> tuple:
    """The positional entries as far as they decide the compiled kernel (`ArgumentTypes.view`);
    raises as `scalar` does."""
    return argument_types(jit_fn, positional, (), (), {}, strict=True).view


@dataclasses.dataclass(frozen=True)
class ArgumentTypes:
    """What Triton makes of one call's arguments, typed once per call; None where typing a
    value fails (the layout raises why where it reaches it)."""

    name: str
    roles: dict[int, tuple | None]
    view: tuple | None
    pointers: dict[Any, str | None]
    constexprs: dict[str, Any]


def argument_types(jit_fn: JITFunction, positional: tuple, in_avals: tuple, out_avals: tuple,
                   constexprs: dict[str, Any], known: dict | None = None,
                   strict: bool = False) -> ArgumentTypes:
    """`known`: the scalars' roles the call has already (`CallArguments.roles`), by parameter;
    `strict`: raise why a scalar cannot be typed (else its role is None)."""
    params, known = jit_fn.params, known or {}
    roles: dict[int, tuple | None] = {}
    view = []
    for i, (kind, value) in enumerate(positional):
        if kind != "scalar" or i >= len(params):  # a tuple's scalars count by value
            view.append((kind, exact_key(value) if kind == "tuple" else value))
            continue
        param = params[i]
        try:  # a role the call was taken with is read; one that failed is typed again, to fail
            role, *taken = known.get(i) or scalar_role(
                param, value, what=f"argument {i} ({param.name})", declared=declared_type(param))
        except (TypeError, OverflowError):  # raised again, naming it, where the layout reaches it
            if strict:
                raise
            roles[i] = None
            continue
        if role == "constexpr":
            roles[i] = (role, plain_constexpr(taken[0]))
            view.append((role, exact_key(taken[0])))
        else:
            roles[i] = (role, *taken)
            view.append((role, taken[0].triton_type, taken[1]))
    pointers: dict[Any, str | None] = {}
    for aval in (*in_avals, *out_avals):
        if aval.dtype not in pointers:
            try:
                pointers[aval.dtype] = pointer_type(aval.dtype, what="")
            except TypeError:  # raised again, naming the array, where the layout reaches it
                pointers[aval.dtype] = None
    return ArgumentTypes(
        kernel_name(jit_fn), roles, None if None in roles.values() else tuple(view), pointers,
        {name: plain_constexpr(constexprs[name]) for name in sorted(constexprs)})


@dataclasses.dataclass(frozen=True)
class Parameter:
    """What the checks read of one kernel parameter, made once per kernel by `unwrap`."""

    name: str
    constexpr: bool
    declared: str | None


@dataclasses.dataclass(frozen=True)
class Unwrapped:
    """A kernel taken apart: the @jit function inside and the wrappers around it, outermost
    first; `heuristics_outside`: how many of `heuristics` wrap the autotuner; `interpreted`: the
    kernel was Triton's InterpretedFunction (`jit_fn` is made of its function)."""

    jit_fn: JITFunction
    autotuner: Autotuner | None
    heuristics: tuple[Any, ...]
    heuristics_outside: int = 0
    interpreted: bool = False
    name: str = ""
    params: tuple[Parameter, ...] = ()
    symbol: str = ""
    set_by_wrappers: frozenset[str] = frozenset()  # the constexprs its configs and heuristics set


def unwrap(kernel: Any) -> Unwrapped:
    """Splits `kernel` into its @triton.jit (or @gluon.jit) function and its wrappers
    (@triton.autotune and @triton.heuristics nested in either order); TypeError or ValueError
    where it is no Triton kernel, or one Triton cannot compile under its function's names."""
    from jax_triton_rocm.base import _compat, _state

    triton = _compat.triton_info().module
    from triton.runtime.autotuner import Autotuner, Heuristics

    autotuner, heuristics, outside = None, [], 0
    node, interpreted = kernel, False
    while not isinstance(node, triton.JITFunction):
        if isinstance(node, Autotuner):
            if autotuner is not None:
                raise TypeError("kernel is wrapped in @triton.autotune twice; keep one.")
            for i, config in enumerate(getattr(node, "configs", ())):
                if not isinstance(config, triton.Config):
                    example = (f"triton.Config({config!r}, num_warps=4)"
                               if isinstance(config, dict)
                               else "triton.Config({'BLOCK': 256}, num_warps=4)")
                    raise TypeError(
                        f"@triton.autotune's configs[{i}] is a {type(config).__name__} "
                        f"({config!r}), not a triton.Config. Give each config as one, e.g. "
                        f"{example}.")
            autotuner, outside = node, len(heuristics)
        elif isinstance(node, Heuristics):
            heuristics.append(node)
        elif type(node).__name__ == "InterpretedFunction":
            # Its function and decorator settings made a @triton.jit function, once per kernel.
            twin, interpreted = node, True
            node = _state.KERNEL_RECORDS.derived(
                twin, "jit twin", lambda: triton.JITFunction(twin.fn, **twin.kwargs))
            continue
        else:
            what = "kernel" if node is kernel else f"the function inside kernel {kernel!r}"
            raise TypeError(
                f"{what} must be a Triton kernel (a function decorated with @triton.jit or "
                f"@gluon.jit, optionally wrapped in @triton.autotune / @triton.heuristics); got "
                f"{type(node).__module__}.{type(node).__qualname__}: {node!r}.")
        node = node.fn
    fn, name = node.fn, kernel_name(node)
    symbol = checked_symbol(fn, name)
    params = tuple([Parameter(param.name, param.is_constexpr, declared_type(param))
                    for param in node.params])
    configs = getattr(autotuner, "configs", ())
    wrapped = frozenset({key for config in configs for key in config.kwargs}
                        | {key for wrapper in heuristics for key in wrapper.values})
    return Unwrapped(node, autotuner, tuple(heuristics),
                     len(heuristics) if autotuner is None else outside, interpreted, name,
                     params, symbol, wrapped)


def checked_symbol(fn: Any, name: str) -> str:
    """The binary symbol Triton names kernel `name` after (its function `fn`); ValueError where
    that is no identifier, or `name` would put its cache files outside Triton's cache folder."""
    # Triton names the kernel's binary symbol after the last dotted part of its function's
    # module and qualified name (`add` for `pkg.add`, `outer.<locals>.add`), and its cache files
    # after its `__name__`.
    symbol = f"{fn.__module__}.{fn.__qualname__}".rsplit(".", 1)[-1]
    if not _SYMBOL.fullmatch(symbol):
        suggestion = re.sub(r"\W", "_", symbol, flags=re.ASCII)
        suggestion = f"_{suggestion}" if not suggestion or suggestion[0].isdigit() else suggestion
        raise ValueError(
            f"kernel {name!r} cannot be compiled: Triton names a kernel's binary symbol after the "
            f"last dotted part of its function's __qualname__ ({fn.__qualname__!r}), and "
            f"{symbol!r} is not an identifier (ASCII letters, digits and underscores, not "
            f"starting with a digit). Name the function with one before @triton.jit decorates "
            f"it, e.g. fn.__name__ = fn.__qualname__ = {suggestion!r}; a dotted name such as "
            f"'pkg.add' is fine, its symbol being 'add'.")
    if any([c in name for c in ("/", "\\", "\0")]):
        raise ValueError(
            f"kernel {name!r} cannot be compiled: Triton names a kernel's cache files after its "
            f"function's __name__, and {name!r} holds a path separator or NUL, which would put "
            f"them outside Triton's cache folder. Name the function without '/', '\\' or NUL "
            f"before @triton.jit decorates it, e.g. fn.__name__ = {symbol!r}.")
    return symbol


def kernel_name(jit_fn: JITFunction) -> str:
    return getattr(jit_fn, "__name__", None) or jit_fn.fn.__name__


# What Triton's compiler takes for a kernel's symbol (`check_identifier_legality`).
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass(frozen=True)
class BatchedLaunch:
    """A call its kernel batches itself under `jax.vmap` (`batch_grid_axis`): grid axis `axis`
    has `size` programs, one per example, after `depth` nested vmaps."""

    axis: int
    size: int
    depth: int


@dataclasses.dataclass(frozen=True)
class CallWords:
    """How a call names its operands, for the messages of checks made once the kernel is
    compiled: `prefix` ("triton_call_lowering: " or ""), the `convention` of its outputs
    ("out_type", "out_shape"; "" where operands fill the parameters in order), and per operand
    (its index, how the call names it, its index in input_output_aliases)."""

    prefix: str
    convention: str
    operands: tuple[tuple[int, str, int], ...]

    def operand(self, index: int, in_avals: tuple) -> tuple[str, int]:
        """("argument 0 (float32[16])", its alias index) for operand `index`."""
        what, alias = next(((what, alias) for i, what, alias in self.operands if i == index),
                           (f"operand {index}", index))
        return f"{what} ({aval_text(in_avals[index])})", alias


@dataclasses.dataclass(frozen=True)
class KernelCallSpec:
    """One kernel call, checked; hashable, compared by value: the kernel and callables by
    identity, the positional arguments and metaparameters by exact value (`exact_values`).

    Attributes:
      positional: ("array", operand index) or ("scalar", value) per positional argument; or one
        entry per kernel parameter, placed: ("input", i), ("output", j), ("keyword", None),
        ("scalar", value), ("tuple", entries) or ("descriptor", (i, static descriptor)).
      num_warps, num_stages, num_ctas: None takes the target's default.
      batch: set by the `jax.vmap` rule on a call batched along `batch_grid_axis`.
      by_keyword: the operand parameters given by keyword (Triton's launcher hands them to
        `early_config_prune` and `perf_model` in their `**kwargs`)."""

    kernel: Any = dataclasses.field(compare=False)
    unwrapped: Unwrapped = dataclasses.field(compare=False, repr=False)
    positional: tuple[tuple[str, Any], ...] = dataclasses.field(compare=False)
    out_shapes: tuple[jax.ShapeDtypeStruct, ...]
    grid: tuple[int, int, int] | MetaGrid
    name: str
    num_warps: int | None
    num_stages: int | None
    num_ctas: int | None
    cuda_arch: str | None
    enable_fp_fusion: bool
    input_output_aliases: tuple[tuple[int, int], ...]
    zeroed_outputs: tuple[int, ...] | Callable[[dict[str, Any]], Any]
    debug: bool
    serialized_metadata: bytes
    batch_grid_axis: int | None
    xla_native: bool | None
    metaparams: tuple[tuple[str, Any], ...] = dataclasses.field(compare=False)
    options: tuple[tuple[str, Any], ...]
    batch: BatchedLaunch | None = None
    has_side_effect: bool = False
    cost_estimate: tuple[tuple[str, int], ...] | None = None
    backend_options: tuple[tuple[str, Any], ...] = ()
    by_keyword: tuple[str, ...] = ()
    types: ArgumentTypes | None = dataclasses.field(default=None, compare=False, repr=False)
    words: CallWords | None = dataclasses.field(default=None, compare=False, repr=False)
    kernel_id: int = dataclasses.field(init=False, repr=False)
    kernel_name: str = dataclasses.field(init=False, repr=False, compare=False)
    exact_values: tuple = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kernel_id", id(self.kernel))
        object.__setattr__(self, "kernel_name", self.unwrapped.name)
        # The layout's and the metaparameters' exact keys, in one call.
        object.__setattr__(self, "exact_values",
                           exact_key((self.positional, self.metaparams))[1])

    def relaid(self, positional: tuple, out_shapes: tuple, grid: Any,
               types: ArgumentTypes) -> KernelCallSpec:
        """This spec with another layout, outputs and grid (faster than `dataclasses.replace`)."""
        return _values.replaced(self, positional=positional, out_shapes=out_shapes, grid=grid,
                                types=types, exact_values=(exact_key(positional),
                                              self.exact_values[1]))
