"""`check_call`: what `triton_call` and `triton_call_lowering` share, checked into a
`KernelCallSpec` with messages worded for the API called."""

from __future__ import annotations

import dataclasses
import difflib
import inspect
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from jax_triton_rocm import backends
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env, _values
from jax_triton_rocm.kernel import _layout, _spec
from jax_triton_rocm.kernel._spec import KernelCallSpec


# The explicit arguments `backend_options` may give instead, with their defaults.
SETTINGS = {"num_warps": None, "num_stages": None, "num_ctas": None, "debug": False,
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


@dataclasses.dataclass(frozen=True)
class Api:
    """How messages name things for the API the user called."""

    name: str
    prefix: str
    input: str
    output: str
    inputs: str
    outputs: str
    an_output: str
    alias_fix: str = ""


APIS = {
    # triton_call's input indices are checked as its outputs are placed (`_bound`).
    "triton_call": Api("triton_call", "", "input", "output", "the {n} array arguments",
                       "the {n} outputs", "an output"),
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
        for index, avals, which, among in ((in_idx, in_avals, "input", api.inputs),
                                           (out_idx, out_avals, "output", api.outputs)):
            if not (_values.is_int(index) and 0 <= index < len(avals)):
                raise ValueError(
                    f"{api.prefix}input_output_aliases={shown!r}: {which} index {index!r} is not "
                    f"one of {among.format(n=len(avals))} (0..{len(avals) - 1}).")
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


def _has_descriptor(entries: Sequence[tuple[str, Any]]) -> bool:
    return any(kind == "descriptor" or (kind == "tuple" and _has_descriptor(value))
               for kind, value in entries)


def check_call(api_name: str, *, kernel: Any, unwrapped: _spec.Unwrapped, positional: tuple,
               in_avals: tuple, out_shapes: tuple, aliases: tuple[tuple[int, int], ...],
               grid: Any, name: Any = "", num_warps: Any = None, num_stages: Any = None,
               num_ctas: Any = None, compute_capability: Any = None, enable_fp_fusion: Any = True,
               debug: Any = False, serialized_metadata: Any = b"", batch_grid_axis: Any = None,
               xla_native: Any = None, zeroed_outputs: Any = (),
               metaparams: Mapping[str, Any] | None = None,
               options: Mapping[str, Any] | None = None,
               has_side_effect: bool = False, cost_estimate: Any = None,
               backend_options: Any = None, by_keyword: tuple[str, ...] = (),
               words: _spec.CallWords | None = None, roles: dict | None = None) -> KernelCallSpec:
    """Checks a call in the common form; returns its spec. `aliases` come checked, `roles`
    typed. `triton_call`'s `backend_options` is merged with the launch settings and the
    vendor knobs given as keywords (`options`); a value given both ways is refused."""
    api = APIS[api_name]
    metaparams, options, others = dict(metaparams or {}), dict(options or {}), {}
    if api.name == "triton_call_lowering":  # triton_call checks them as it takes its arguments
        _env.check_variables()  # each variable as its reader takes it, on every platform
    else:
        settings, others = merge_backend_options(backend_options, dict(zip(SETTINGS, (
            num_warps, num_stages, num_ctas, debug, enable_fp_fusion))), options)
        num_warps, num_stages, num_ctas, debug, enable_fp_fusion = settings
        refuse_batched_descriptors(batch_grid_axis, positional)
        cost_estimate = checked_cost_estimate(cost_estimate)
    check_call_labels(api, name, serialized_metadata, xla_native)
    _values.launch_settings(num_warps, num_stages, num_ctas, caller=api.prefix)
    cuda_arch = None if compute_capability is None else _vendors.normalize_arch(
        "cuda", compute_capability, what=f"{api.prefix}compute_capability")
    # The call's values typed once: the dtypes here, the kernel's parameters by the layout check.
    types = _spec.argument_types(unwrapped.jit_fn, tuple(positional), tuple(in_avals),
                                 tuple(out_shapes), metaparams, roles)
    check_buffers(api, positional, in_avals, out_shapes, types)
    grid = _values.grid_value(grid)  # a MetaGrid's results are checked per config (plan._plan)
    if isinstance(grid, _values.MetaGrid):
        check_takes_meta(grid.fn, f"{api.prefix}grid")
    check_batch_grid_axis(api, batch_grid_axis)
    check_flags(api, enable_fp_fusion, debug)
    zeroed = checked_zeroed(api, zeroed_outputs, len(out_shapes))
    spec = KernelCallSpec(
        kernel=kernel, unwrapped=unwrapped, positional=tuple(positional),
        out_shapes=tuple(out_shapes), grid=grid, name=name or unwrapped.name,
        num_warps=None if num_warps is None else int(num_warps),
        num_stages=None if num_stages is None else int(num_stages),
        num_ctas=None if num_ctas is None else int(num_ctas), cuda_arch=cuda_arch,
        enable_fp_fusion=bool(enable_fp_fusion), input_output_aliases=tuple(aliases),
        zeroed_outputs=zeroed, debug=bool(debug), serialized_metadata=serialized_metadata,
        batch_grid_axis=None if batch_grid_axis is None else int(batch_grid_axis),
        xla_native=None if xla_native is None else bool(xla_native),
        metaparams=tuple(sorted(metaparams.items())),
        options=tuple(sorted(_values.compile_options(options, caller=api.prefix).items()))
        if options else (),
        has_side_effect=has_side_effect, cost_estimate=cost_estimate,
        backend_options=tuple(sorted(others.items())), by_keyword=by_keyword, types=types,
        words=words or _spec.CallWords(api.prefix, "", ()))  # operands named by their index
    if api.name == "triton_call":  # triton_call_lowering's call is being lowered already
        _layout.check_kernel_arguments(spec, in_avals)
    return spec


def merge_backend_options(backend_options: Any, settings: dict[str, Any],
                          options: dict[str, Any]) -> tuple[list, dict[str, Any]]:
    """`triton_call`'s `backend_options` merged into its launch `settings` (None: not given)
    and its vendor knobs `options` (updated in place); returns the settings in `SETTINGS`'
    order, defaults filled, and the other Triton options. Raises for a value given twice, or
    an option the package sets itself or no installed vendor has."""
    given = {} if backend_options is None else backend_options
    if not isinstance(given, Mapping) or not all([isinstance(k, str) for k in given]):
        raise TypeError(f"backend_options={backend_options!r} must be a dict of Triton "
                        f"option names to values, e.g. {{'num_warps': 8}}.")
    settings = {key: value for key, value in settings.items() if value is not None}
    others = {}
    for key, value in given.items():
        try:
            hash(value)
        except TypeError:
            raise TypeError(
                f"backend_options[{key!r}] must be hashable, got {value!r} (JAX caches "
                f"compiled calls by their options): pass a tuple instead of a list, or a "
                f"tuple of (key, value) pairs instead of a dict.") from None
        if key in settings or key in options:
            raise ValueError(
                f"{key} is given both as an argument of triton_call ({key}="
                f"{settings.get(key, options.get(key))!r}) and in backend_options "
                f"({value!r}); give it once.")
        if key in SETTINGS:
            settings[key] = value
        elif key in _vendors.COMPILE_OPTIONS:
            options[key] = value
        elif key in _REFUSED:
            raise ValueError(f"backend_options[{key!r}] cannot be set here: {_REFUSED[key]}.")
        else:
            refuse_unknown_option(key)
            others[key] = value
    return [settings.get(key, default) for key, default in SETTINGS.items()], others


def refuse_unknown_option(key: str) -> None:
    """Raises ValueError where `key` is no Triton option of any installed vendor."""
    known = {}
    for platform in _vendors.GPU_PLATFORMS:
        try:
            known[platform] = backends.backend(platform).option_names
        except ImportError:  # a Triton built without that vendor's backend
            continue
    if not any(key in names for names in known.values()):
        every = sorted(set().union(*known.values()) - set(_REFUSED)) if known else []
        raise ValueError(
            f"backend_options[{key!r}] is no Triton compile option of any installed "
            f"vendor backend ({', '.join(known) or 'none'}); options are: "
            f"{', '.join(every)}.")


def refuse_batched_descriptors(batch_grid_axis: Any, positional: tuple) -> None:
    """Raises NotImplementedError for `batch_grid_axis` with a TensorDescriptor operand."""
    if batch_grid_axis is not None and _has_descriptor(positional):
        raise NotImplementedError(
            "batch_grid_axis with a TensorDescriptor operand: a descriptor describes one "
            "example. Leave batch_grid_axis=None (jax.vmap then calls the kernel once per "
            "example), or pass the base array and build the descriptor inside the kernel.")


def checked_cost_estimate(cost: Any) -> Any:
    """`cost_estimate` as sorted (key, count) pairs, or None; raises for another key, or a
    count that is no non-negative int."""
    if cost is None:
        return None
    if not isinstance(cost, Mapping):
        raise TypeError(f"cost_estimate={cost!r} must be a dict such as "
                        f"{{'flops': 2 * n, 'bytes_accessed': 12 * n}}.")
    for key, count in cost.items():
        if key not in COST_KEYS or not _values.is_int(count) or count < 0:
            raise ValueError(f"cost_estimate={dict(cost)!r}: {key!r}: {count!r} is not "
                             f"one of {', '.join(COST_KEYS)} with a non-negative int.")
    return tuple(sorted([(key, int(count)) for key, count in cost.items()]))


def check_call_labels(api: Api, name: Any, serialized_metadata: Any, xla_native: Any) -> None:
    """Raises TypeError unless `name` is a str, `serialized_metadata` bytes, and `xla_native`
    a bool or None."""
    if not isinstance(name, str):
        raise TypeError(f"{api.prefix}name={name!r} must be a str (the call's name for jaxlib "
                        f"and profilers), got {type(name).__name__}.")
    if not isinstance(serialized_metadata, bytes):
        raise TypeError(f"{api.prefix}serialized_metadata must be bytes, got "
                        f"{type(serialized_metadata).__name__}.")
    if xla_native is not None and not isinstance(xla_native, (bool, np.bool_)):
        raise TypeError(f"{api.prefix}xla_native={xla_native!r} must be True, False or None "
                        f"(None follows {_env.ENV_XLA_NATIVE}).")


def check_buffers(api: Api, positional: tuple, in_avals: tuple, out_shapes: tuple,
                  types: _spec.ArgumentTypes) -> None:
    """Raises for an input or output whose dtype Triton has no pointer type for, or whose
    shape has a symbolic dimension."""
    names = {value: f"argument {i}" for i, (kind, value) in enumerate(positional)
             if kind == "array"}
    buffers = [(api.prefix + names.get(i, f"{api.input} {i}"), aval)
               for i, aval in enumerate(in_avals)]
    buffers += [(f"{api.prefix}{api.output} {i}", aval) for i, aval in enumerate(out_shapes)]
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


def check_batch_grid_axis(api: Api, axis: Any) -> None:
    """Raises ValueError unless `batch_grid_axis` is None or a grid axis, 0, 1 or 2."""
    if axis is not None and (isinstance(axis, (bool, np.bool_)) or axis not in (0, 1, 2)):
        raise ValueError(
            f"{api.prefix}batch_grid_axis={axis!r} must be None (jax.vmap loops over the batch) "
            f"or the grid axis 0, 1 or 2 whose program id is the example index under jax.vmap.")


def check_flags(api: Api, enable_fp_fusion: Any, debug: Any) -> None:
    """Raises TypeError unless `enable_fp_fusion` and `debug` are bools."""
    for what, value in (("enable_fp_fusion", enable_fp_fusion), ("debug", debug)):
        if not isinstance(value, (bool, np.bool_)):  # a string such as "no" would be truthy
            raise TypeError(f"{api.prefix}{what}={value!r} must be a bool (True or False), got "
                            f"{type(value).__name__}.")


def checked_zeroed(api: Api, zeroed: Any, n_outputs: int) -> Any:
    """`zeroed_outputs` checked: a function of the metaparameters, or the indices of the
    outputs to zero (`triton_call`'s are checked as its outputs are placed)."""
    if callable(zeroed):
        check_takes_meta(zeroed, f"{api.prefix}zeroed_outputs")
    elif api.name != "triton_call":
        zeroed = _values.output_indices(zeroed, n_outputs, what=f"{api.prefix}zeroed_outputs",
                                        an_output=api.an_output)
    return zeroed
