"""A `triton_call` made again with new shapes or new runtime-scalar values reuses the layout the
first such call was checked into.

`checks._bound.check_triton_call` binds a call's arguments to the kernel's parameters, places
its outputs and checks every argument: about 100 µs, at every trace. A jitted function traced
again at a new shape (a new batch or sequence length) makes the same call with other arrays:
where its operands went, and every verdict on its keywords, settings and dtypes, stay the same.
So the first call's `Placed` and spec are kept under a `layout_key` of everything that decided
them, and a later call with the same key gets them with its own arrays, avals, runtime scalars
and grid put in (`reuse`), after the checks that depend on those: concrete dimensions, aliased
buffers of one shape, the grid, and the layout check (itself kept per layout).

Only plain calls are kept: array operands that are JAX arrays given positionally, scalars,
keywords that hold no array, no `Ref`, no operand made in place of an output. Anything else,
or a key that cannot be built (an unhashable value), takes the full check every time, and so
does any call whose reuse finds something to refuse: the full check then raises its own
message.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax

from jax_triton_rocm.base import _state, _values
from jax_triton_rocm.checks import _checker, _placement, _surface
from jax_triton_rocm.launch import _grid, _types
from jax_triton_rocm.launch._spec import KernelCallSpec


@dataclasses.dataclass(frozen=True)
class Layout:
    """A checked call's structure, without its arrays.

    Attributes:
      placed: its `Placed`, operands and avals left out.
      spec: its spec (its positional scalars and grid are replaced at reuse).
      operand_args: per primitive operand, the positional argument that gives it.
      scalars: (place in the spec's layout, positional argument index or keyword) per runtime
        scalar, whose value goes to that place.
      out_order: per primitive result, the output (leaf of `out_shape` / `out_type`) it is.
    """

    placed: _placement.Placed
    spec: KernelCallSpec
    operand_args: tuple[int, ...]
    scalars: tuple[tuple[int, int | str], ...]
    out_order: tuple[int, ...]


_PLAIN_TYPES = frozenset((type(None), bool, int, str, bytes))
_PLAIN_OR_TUPLE = _PLAIN_TYPES | {tuple}


def _key(value: Any) -> Any:
    """`_values.exact_key`, for mappings too (`backend_options`, `input_output_aliases`)."""
    if isinstance(value, Mapping):
        return type(value), tuple((_values.exact_key(k), _key(v)) for k, v in value.items())
    return _values.exact_key(value)


def _options_key(options: tuple) -> tuple:
    """`options` as exact keys: plain values (None, bools, ints, str, bytes, empty tuples) with
    their types, in one pass; otherwise each by `_key`."""
    types = tuple(map(type, options))
    if _PLAIN_TYPES.issuperset(types) or (  # empty tuples too (`zeroed_outputs=()`)
            _PLAIN_OR_TUPLE.issuperset(types) and options.count(()) == types.count(tuple)):
        return types, options
    return tuple(map(_key, options))


def _scalar_key(param: Any, value: Any, what: str) -> tuple:
    """A scalar operand as far as it decides the call (`_types.scalar_role`, as the layout
    check and the compile see it): compiled in, by its exact value; passed at launch, by its
    type, its Triton type and its specialisation, its value left out."""
    role = _types.scalar_role(param, value, what=what)
    if role[0] == "constexpr":
        return ("constexpr", _values.exact_key(value))
    return ("runtime", type(value), role[1].triton_type, role[2])


def _argument_key(params: Any, index: int, value: Any) -> Any:
    """What of a positional argument decides the layout and the checks: an array's dtype and
    whether it is 0-d; a scalar's `_scalar_key`; a constexpr's value. None where no layout is
    kept (or the full check must say what is wrong)."""
    if isinstance(value, jax.Array):
        return ("array", value.dtype, value.ndim == 0)
    if index >= len(params):
        return None
    if params[index].is_constexpr:
        return ("constexpr", _values.exact_key(value))
    if value is None or _types.is_scalar(value):
        return _scalar_key(params[index], value, f"argument {index}")
    return None


def _runtime_keywords(params: Any, keywords: dict[str, Any], convention: str) -> dict[str, int]:
    """{keyword: parameter index} for the keywords that are runtime scalar operands: with
    `out_type` (0.4), a scalar keyword naming a parameter that is no `tl.constexpr`."""
    if convention != "out_type" or not keywords:
        return {}
    index = {param.name: i for i, param in enumerate(params) if not param.is_constexpr}
    return {name: index[name] for name, value in keywords.items()
            if name in index and _types.is_scalar(value)}


def _grid_key(grid: Any) -> Any:
    """A grid of ints: nothing (checked at each reuse). A function: its code and how many
    defaults it has, which decide whether it takes the metaparameters (a `lambda meta: ...`
    made at each trace is the same grid). Another callable: itself."""
    if not callable(grid):
        return None
    code = getattr(grid, "__code__", None)
    if code is None or not hasattr(grid, "__defaults__"):
        return _values.exact_key(grid)
    return ("function", code, len(grid.__defaults__ or ()), bool(grid.__kwdefaults__))


def layout_key(args: tuple, keywords: dict[str, Any], out_shapes: list, out_tree: Any, *,
               kernel: Any, unwrapped: Any, grid: Any, convention: str,
               options: tuple) -> tuple | None:
    """The key of a call's layout: everything of the call but its arrays' shapes, its runtime
    scalars' values and a grid of ints; None where no layout is kept (see the module
    docstring). `options`: the rest of `check_triton_call`'s arguments but the grid and
    triton_call's own keywords (a constant), always in the same order (`triton_call` is the
    only caller)."""
    params = unwrapped.jit_fn.params
    try:
        parts = tuple(_argument_key(params, index, value) for index, value in enumerate(args))
        if None in parts or any(_surface.holds_buffer(v) for v in keywords.values()):
            return None
        runtime = _runtime_keywords(params, keywords, convention)
        given = tuple((name, _key(value) if name not in runtime else _scalar_key(
            params[runtime[name]], value, f"keyword argument {name!r}"))
            for name, value in keywords.items())
        key = (kernel, convention, parts, given, out_tree,
               tuple((s.dtype, len(s.shape) == 0) for s in out_shapes),
               _grid_key(grid),
               _options_key(options))
        hash(key)
    except (TypeError, ValueError, OverflowError):  # unhashable, or a bad scalar: full check
        return None
    return key


def remember(key: tuple | None, args: tuple, keywords: dict[str, Any],
             placed: _placement.Placed, spec: KernelCallSpec, convention: str) -> None:
    """Keeps a checked call's layout under `key`, where the call is one a layout serves."""
    if key is None or placed.refs or len(placed.out_shapes) != len(placed.user_results):
        return
    operand_args: list[int | None] = [None] * len(placed.operands)
    scalars = []
    for index, value in enumerate(args):
        kind, where = spec.positional[index]
        if isinstance(value, jax.Array):
            if kind not in ("array", "input") or placed.operands[where] is not value:
                return
            operand_args[where] = index
        elif kind == "scalar" and where is value:
            scalars.append((index, index))
    runtime = _runtime_keywords(spec.unwrapped.jit_fn.params, keywords, convention)
    for name, index in runtime.items():
        if spec.positional[index] != ("scalar", keywords[name]):
            return
        scalars.append((index, name))
    if None in operand_args:
        return  # an operand no positional argument gives (one given by keyword)
    out_order = tuple(placed.user_results.index(r) for r in range(len(placed.user_results)))
    structure = dataclasses.replace(placed, operands=(), in_avals=())
    _state.CALL_LAYOUTS.put(key, Layout(structure, spec, tuple(operand_args), tuple(scalars),
                                        out_order))


def _concrete(avals: tuple) -> bool:
    for aval in avals:
        for d in aval.shape:
            if type(d) is not int:
                return False
    return True


def reuse(key: tuple | None, args: tuple, keywords: dict[str, Any], out_shapes: list,
          grid: Any) -> tuple[_placement.Placed, KernelCallSpec] | None:
    """The call's `Placed` and spec from the layout kept under `key`, with its own arrays,
    scalars, shapes and grid; None where none is kept, or where a check fails (the full check
    then says why)."""
    layout = None if key is None else _state.CALL_LAYOUTS.get(key)
    if layout is None:
        return None
    operands = tuple(args[index] for index in layout.operand_args)
    in_avals = tuple(x.aval for x in operands)
    outs = tuple(out_shapes[o] for o in layout.out_order)
    if not (_concrete(in_avals) and _concrete(outs)) or any(
            in_avals[i].shape != tuple(outs[r].shape) for i, r in layout.placed.aliases.items()):
        return None
    positional = list(layout.spec.positional)
    for index, source in layout.scalars:
        positional[index] = ("scalar", args[source] if isinstance(source, int)
                             else keywords[source])
    positional = tuple(positional)
    if not callable(grid):  # a callable is checked per config at lowering (`launch._plan`)
        try:
            grid = _grid.normalize_grid(grid)
        except (TypeError, ValueError):
            return None
    spec = layout.spec.relaid(positional, outs, grid)
    unwrapped = spec.unwrapped
    if unwrapped.autotuner is not None or unwrapped.heuristics:
        try:  # as the full check does: the autotuner's configs and heuristics may have changed
            _checker._kernel_arguments(unwrapped, positional, in_avals, outs,
                                       dict(layout.placed.metaparams))
        except (TypeError, ValueError):
            return None
    # A plain kernel's layout check (`_layout.check_plain_call`) reads nothing the key leaves
    # out: the dtypes, which arrays are 0-d, the scalars' Triton types and specialisations and
    # the constexprs; the call that made the layout passed it.
    placed = _values.replaced(layout.placed, positional=positional, operands=operands,
                              in_avals=in_avals, out_shapes=outs)
    return placed, spec
