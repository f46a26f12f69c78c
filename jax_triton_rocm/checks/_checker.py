"""The one checker of a kernel call: every argument of `triton_call` and `triton_call_lowering`,
checked once, into a `KernelCallSpec`.

Each API first turns its own form into the common one (`triton_call` splits its arguments and
`out_shape`; `triton_call_lowering` places the primitive's operands and results on the
kernel's parameters: `checks._arguments`); `check_call` then checks what both share, with
messages worded for the API the user called (`Api`): the same value gets the same verdict
from both. Where a `triton_call`'s outputs go is `checks._arguments.place_outputs`.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env, _values
from jax_triton_rocm.spec import _layout, _spec
from jax_triton_rocm.spec._spec import CallOptions, KernelCallSpec, Surface


@dataclasses.dataclass(frozen=True)
class Api:
    """How messages name things for the API the user called.

    Attributes:
      name: the function ("triton_call").
      prefix: what each message starts with ("" or "triton_call_lowering: ").
      input, output: what one operand and one output are called ("input", "operand").
      an_output: one output, with its article ("an output", "a result").
      inputs, outputs: "the N ..." for N of them, with `{n}` in place of N.
      index_hint: said after an input index that is out of range.
      alias_fix: said after aliased buffers that differ.
    """

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
    """`{input index: output index}` as sorted pairs of ints, each pair of one shape and dtype.

    Each API checks them once, before it places its results, and hands `check_call` the
    primitive's pairs.
    """
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
               surface: Surface = Surface()) -> KernelCallSpec:
    """Checks a call in the common form; returns its spec.

    Args:
      api_name: "triton_call" or "triton_call_lowering": how messages name things.
      kernel, unwrapped: the kernel as given, and taken apart (`_spec.unwrap`).
      positional: the arguments' layout (`KernelCallSpec.positional`).
      in_avals, out_shapes: the operands' and outputs' shapes and dtypes.
      aliases: the primitive's (operand, result) pairs, checked already (`alias_pairs`, once per
        call: each API checks them in its own indices, before it places its results).
      given: the call's options, checked here.
      metaparams, options: constexprs and vendor compile options by name.
      surface: `triton_call`'s own options, checked by `checks._bound`.

    Every operand's and output's dtype must have a Triton pointer type, and a fixed shape;
    each is named as its API numbers it (`triton_call` counts positional arguments, scalars
    included). A callable `zeroed_outputs` is checked here for its arity, and per config (by
    `plan._plan`) for what it returns; otherwise the output indices to zero are sorted.

    Raises:
      TypeError / ValueError: naming the argument, its value and the fix (a dtype Triton cannot
        take is a TypeError, a symbolic dimension (`jax.export`) a ValueError).
    """
    _env.check_variables()  # each variable as its reader takes it, on every platform
    api = APIS[api_name]
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
    grid = _spec.grid_value(g.grid)  # a MetaGrid's results are checked per config (plan._plan)
    if isinstance(grid, _spec.MetaGrid):
        check_takes_meta(grid.fn, f"{api.prefix}grid")
    axis = g.batch_grid_axis
    if axis is not None and (isinstance(axis, (bool, np.bool_)) or axis not in (0, 1, 2)):
        raise ValueError(
            f"{api.prefix}batch_grid_axis={axis!r} must be None (jax.vmap loops over the batch) "
            f"or the grid axis 0, 1 or 2 whose program id is the example index under jax.vmap.")
    enable_fp_fusion = _values.flag(g.enable_fp_fusion, f"{api.prefix}enable_fp_fusion")
    zeroed = g.zeroed_outputs
    if callable(zeroed):
        check_takes_meta(zeroed, f"{api.prefix}zeroed_outputs")
    else:
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
        debug=_values.flag(g.debug, f"{api.prefix}debug"),
        serialized_metadata=serialized_metadata,
        batch_grid_axis=None if axis is None else int(axis),
        xla_native=None if xla_native is None else bool(xla_native),
        metaparams=tuple(sorted(metaparams.items())),
        options=tuple(sorted(_values.compile_options(options, caller=api.prefix).items())),
        has_side_effect=surface.has_side_effect, cost_estimate=surface.cost_estimate,
        backend_options=surface.backend_options, by_keyword=surface.by_keyword)
    if api.name == "triton_call":  # triton_call_lowering's call is being lowered already
        _layout.check_kernel_arguments(unwrapped, spec.positional, in_avals, spec.out_shapes,
                                       metaparams, types)
    return spec
