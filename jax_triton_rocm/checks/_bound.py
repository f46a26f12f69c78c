"""`triton_call`'s arguments, in jax-triton 0.3's or 0.4's form, checked into a `BoundCall`: the
call's spec (`checks._checker.check_call`), and the primitive's operands and results around it.

The primitive never sees a `Ref`: each is read before the call, passed as an operand aliased to
an extra result, and written back after it, so every route sees plain aliasing.

A `triton_call` made again with new shapes or new runtime-scalar values gets the layout the
first such call was checked into (`relaid_call`), after the checks that depend on those. Which
calls are kept, and under what key: docs/design.md, "Re-used layouts".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax

from jax_triton_rocm import backends
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _state, _values
from jax_triton_rocm.checks import _binder, _checker
from jax_triton_rocm.spec import _layout, _spec
from jax_triton_rocm.spec._spec import CallOptions, KernelCallSpec

if TYPE_CHECKING:
    from jax_triton_rocm.api._call import CallArguments


# The explicit arguments `backend_options` may give instead, with their defaults.
SETTINGS = {"num_warps": None, "num_stages": None, "num_ctas": 1, "debug": False,
            "enable_fp_fusion": True}
# Triton options the package sets itself per target, or that jaxlib cannot launch with.
_REFUSED = {
    "arch": "the target's architecture comes from the device or target_arch",
    "backend_name": "the backend comes from the platform lowered for",
    "warp_size": "the warp size comes from the target",
    "ir_override": "kernels are compiled from their source",
    "launch_cooperative_grid": "jaxlib launches no cooperative grids",
    "launch_pdl": "jaxlib launches no programmatic dependent launches",
    "instrumentation_mode": "jaxlib allocates no profiling buffer",
}
COST_KEYS = ("flops", "transcendentals", "bytes_accessed")


class _NotGiven:
    """The default of `triton_call`'s `out_type` and `out_shape`: not given (None is a value,
    and gives no output)."""

    def __repr__(self) -> str:
        return "<not given>"


NOT_GIVEN = _NotGiven()


@dataclasses.dataclass(frozen=True)
class Layout:
    """A checked call's structure, without its arrays: `operand_args`, per primitive operand
    the positional argument that gives it; `scalars`, (place in the spec's layout, positional
    index or keyword) per runtime scalar; `out_order`, per primitive result its output."""

    placed: _checker.Placed
    spec: KernelCallSpec
    operand_args: tuple[int, ...]
    scalars: tuple[tuple[int, int | str], ...]
    out_order: tuple[int, ...]


_PLAIN_TYPES = frozenset((type(None), bool, int, str, bytes))
_PLAIN_OR_TUPLE = _PLAIN_TYPES | {tuple}
# The options a call's layout is kept by, besides the grid (`layout_key`).
_KEYED_OPTIONS = tuple(f.name for f in dataclasses.fields(CallOptions) if f.name != "grid")


@dataclasses.dataclass(frozen=True)
class BoundCall:
    """A checked `triton_call`: bind `operands` (each Ref read) with `spec`."""

    spec: KernelCallSpec
    placed: _checker.Placed
    out_tree: Any
    operands: tuple  # the primitive's operands: arrays as given, each Ref read


def check_triton_call(call: CallArguments, own_keywords: tuple[str, ...]) -> BoundCall:
    """Checks a `triton_call` in full, or relays it into the layout of an earlier one
    (`relaid_call`); returns it bound. `own_keywords`: triton_call's own keyword arguments.
    `backend_options` is merged with the launch settings and the vendor knobs given as keywords
    (`waves_per_eu=2`); a value given both ways is an error that names both (docs/porting.md).
    """
    kept_as = None if call.operands else layout_key(call)
    layout = None if kept_as is None else _state.CALL_LAYOUTS.get(kept_as, kernel=call.kernel)
    if layout is not None and (bound := relaid_call(layout, call)) is not None:
        return bound
    # A kernel that takes nothing at launch (no parameters, or constexprs only) can only be
    # called for what it does besides outputs (a print, an assert): kept, as Triton launches it.
    given, backend_options, unwrapped = call.given, call.backend_options, call.unwrapped
    side_effect = (_checker.flag(call.has_side_effect, "has_side_effect")
                   or all([param.constexpr for param in unwrapped.params]))
    placed, keyword_options, by_keyword = _binder.bind_arguments(
        call, has_side_effect=side_effect, own_keywords=own_keywords)
    # `backend_options` merged with the launch settings and the vendor knobs.
    options = {} if backend_options is None else backend_options
    if not isinstance(options, Mapping) or not all([isinstance(k, str) for k in options]):
        raise TypeError(f"backend_options={backend_options!r} must be a dict of Triton option "
                        f"names to values, e.g. {{'num_warps': 8}}.")
    settings = {k: given[k] for k in SETTINGS if given[k] is not None}
    compile_options = dict(keyword_options)
    others, known = {}, None
    for key, value in options.items():
        try:
            hash(value)
        except TypeError:
            raise TypeError(
                f"backend_options[{key!r}] must be hashable, got {value!r} (JAX caches compiled "
                f"calls by their options): pass a tuple instead of a list, or a tuple of (key, "
                f"value) pairs instead of a dict.") from None
        if key in settings or key in compile_options:
            raise ValueError(
                f"{key} is given both as an argument of triton_call ({key}="
                f"{settings.get(key, compile_options.get(key))!r}) and in backend_options "
                f"({value!r}); give it once.")
        if key in SETTINGS:
            settings[key] = value
        elif key in _vendors.COMPILE_OPTIONS:
            compile_options[key] = value
        elif key in _REFUSED:
            raise ValueError(f"backend_options[{key!r}] cannot be set here: {_REFUSED[key]}.")
        else:
            if known is None:  # each installed vendor's Triton option fields, by platform
                known = {}
                for platform in _vendors.GPU_PLATFORMS:
                    try:
                        known[platform] = backends.backend(platform).triton_option_names()
                    except ImportError:  # a Triton built without that vendor's backend
                        continue
            if not any(key in names for names in known.values()):
                every = sorted(set().union(*known.values()) - set(_REFUSED)) if known else []
                raise ValueError(
                    f"backend_options[{key!r}] is no Triton compile option of any installed "
                    f"vendor backend ({', '.join(known) or 'none'}); options are: "
                    f"{', '.join(every)}.")
            others[key] = value
    for key, default in SETTINGS.items():
        settings.setdefault(key, default)
    if given["batch_grid_axis"] is not None and _has_descriptor(placed.positional):
        raise NotImplementedError(
            "batch_grid_axis with a TensorDescriptor operand: a descriptor describes one "
            "example. Leave batch_grid_axis=None (jax.vmap then calls the kernel once per "
            "example), or pass the base array and build the descriptor inside the kernel.")
    cost = call.cost_estimate
    if cost is not None:
        if not isinstance(cost, Mapping):
            raise TypeError(f"cost_estimate={cost!r} must be a dict such as "
                            f"{{'flops': 2 * n, 'bytes_accessed': 12 * n}}.")
        for key, count in cost.items():
            if key not in COST_KEYS or not _values.is_int(count) or count < 0:
                raise ValueError(f"cost_estimate={dict(cost)!r}: {key!r}: {count!r} is not one "
                                 f"of {', '.join(COST_KEYS)} with a non-negative int.")
        cost = tuple(sorted([(key, int(count)) for key, count in cost.items()]))
    spec = _checker.check_call(
        "triton_call", kernel=call.kernel, unwrapped=unwrapped, positional=placed.positional,
        in_avals=placed.in_avals, out_shapes=placed.out_shapes,
        aliases=tuple(sorted(placed.aliases.items())),
        given=CallOptions(**{**given, **settings, "zeroed_outputs": placed.zeroed}),
        metaparams=placed.metaparams, options=compile_options,
        has_side_effect=side_effect, cost_estimate=cost,
        backend_options=tuple(sorted(others.items())), by_keyword=by_keyword)
    refs = {operand for operand, _ in placed.refs}  # each Ref is read: the primitive takes values
    bound = BoundCall(spec, placed, call.out_tree, tuple(
        [value[...] if i in refs else value for i, value in enumerate(placed.operands)]))
    if kept_as is not None:
        keep_layout(kept_as, call, bound)
    return bound


def _has_descriptor(entries: Sequence[tuple[str, Any]]) -> bool:
    return any(kind == "descriptor" or (kind == "tuple" and _has_descriptor(value))
               for kind, value in entries)


def layout_key(call: CallArguments) -> tuple | None:
    """The key a call's layout is kept under, or None where no layout is kept or the full check
    must say what is wrong. It holds everything of the call but its arrays' shapes, its runtime
    scalars' values and a grid of ints (docs/design.md, "Re-used layouts"); a grid function by
    its code and defaults, so that a `lambda meta: ...` made at each trace is the same grid."""
    try:
        parts, roles = [], []
        for index, value in enumerate(call.args):
            if isinstance(value, jax.Array):
                parts.append(("array", value.dtype, value.ndim == 0))
            elif index in call.roles:  # a scalar or None, or a constexpr parameter's value
                parts.append("scalar")
                roles.append((index, value))
            else:
                return None  # no layout kept, or the full check must say what is wrong
        names, values = [], [call.backend_options, call.cost_estimate, call.has_side_effect,
                              call.input_output_aliases, call.constexprs,
                              *[call.given[name] for name in _KEYED_OPTIONS]]
        for name, value in call.keywords.items():
            if name in call.buffers:
                return None
            names.append(name)
            if name in call.runtime:
                roles.append((name, value))
            else:
                values.append(value)
        for n, (where, value) in enumerate(roles):
            role = call.roles[where]
            if role is None:  # a bad scalar: the full check says why
                return None
            roles[n] = (("constexpr", _values.exact_key(value)) if role[0] == "constexpr"
                        else ("runtime", type(value), role[1].triton_type, role[2]))
        types = tuple(map(type, values))
        if not (_PLAIN_TYPES.issuperset(types) or (  # empty tuples too (`zeroed_outputs=()`)
                _PLAIN_OR_TUPLE.issuperset(types) and values.count(()) == types.count(tuple))):
            types, values = None, [
                (type(value), tuple([(_values.exact_key(k), _values.exact_key(v))
                                     for k, v in value.items()]))
                if isinstance(value, Mapping) else _values.exact_key(value) for value in values]
        grid, grid_key = call.given["grid"], None
        if callable(grid):  # a function of the metaparameters (`_values.grid_value`)
            fn = grid.fn if isinstance(grid, _values.MetaGrid) else grid
            grid_key = (
                ("function", fn.__code__, len(fn.__defaults__ or ()), bool(fn.__kwdefaults__))
                if getattr(fn, "__code__", None) is not None and hasattr(fn, "__defaults__")
                else _values.exact_key(fn))
        key = (call.kernel, call.convention, tuple(parts), tuple(names), tuple(roles),
               call.out_tree, tuple([(s.dtype, len(s.shape) == 0) for s in call.out_shapes]),
               grid_key, types, tuple(values))
        hash(key)
    except (TypeError, ValueError, OverflowError):  # unhashable, or a bad scalar: full check
        return None
    return key


def relaid_call(layout: Layout, call: CallArguments) -> BoundCall | None:
    """The call checked into the kept `layout`, with its own arrays, scalars, shapes and grid;
    None where a check fails (the full check then says why)."""

    try:
        grid = _values.grid_value(call.given["grid"])
    except (TypeError, ValueError):
        return None
    args = call.args
    operands = tuple([args[index] for index in layout.operand_args])
    in_avals = tuple([x.aval for x in operands])
    outs = tuple([call.out_shapes[o] for o in layout.out_order])
    for aval in (*in_avals, *outs):
        for d in aval.shape:
            if type(d) is not int:  # a symbolic dimension
                return None
    for i, r in layout.placed.aliases.items():
        if in_avals[i].shape != tuple(outs[r].shape):
            return None
    positional = list(layout.spec.positional)
    for index, source in layout.scalars:
        positional[index] = ("scalar", args[source] if isinstance(source, int)
                             else call.keywords[source])
    positional = tuple(positional)
    spec = layout.spec.relaid(positional, outs, grid)
    try:  # the full check's own: kept per what it reads, so a plain kernel's is a lookup
        _layout.check_kernel_arguments(spec, in_avals)
    except (TypeError, ValueError):
        return None
    placed = _values.replaced(layout.placed, positional=positional, operands=operands,
                              in_avals=in_avals, out_shapes=outs)
    return BoundCall(spec, placed, call.out_tree, operands)


def keep_layout(key: tuple, call: CallArguments, bound: BoundCall) -> None:
    """Keeps `bound`'s layout under `key`, where it serves later calls: every operand an array
    given positionally, no Ref, no operand made in place of an output."""
    placed, spec = bound.placed, bound.spec
    if placed.refs or len(placed.out_shapes) != len(placed.user_results):
        return
    operand_args: list[int | None] = [None] * len(placed.operands)
    scalars = []
    for index, value in enumerate(call.args):
        kind, where = spec.positional[index]
        if isinstance(value, jax.Array):
            if kind not in ("array", "input") or placed.operands[where] is not value:
                return
            operand_args[where] = index
        elif kind == "scalar" and where is value:
            scalars.append((index, index))
    for name, index in call.runtime.items():
        if spec.positional[index] != ("scalar", call.keywords[name]):
            return
        scalars.append((index, name))
    if None in operand_args:  # an operand no positional argument gives
        return
    structure = dataclasses.replace(placed, operands=(), in_avals=())
    out_order = tuple([placed.user_results.index(r) for r in range(len(placed.user_results))])
    _state.CALL_LAYOUTS.put(key, Layout(structure, spec, tuple(operand_args), tuple(scalars),
                                        out_order), kernel=call.kernel)
