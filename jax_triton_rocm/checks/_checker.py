"""The one checker of a kernel call: every argument of `triton_call` and `triton_call_lowering`,
checked once, into a `KernelCallSpec`.

Each API first turns its own form into the common one (`triton_call` splits its arguments and
`out_shape`; `triton_call_lowering` places the primitive's operands and results on the
kernel's parameters: `checks._arguments`); `check_call` then checks what both share, with
messages worded for the API the user called (`Api`): the same value gets the same verdict
from both.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from jax_triton_rocm.base import _values, _vendors
from jax_triton_rocm.launch import _autotuner, _grid, _kernel, _layout, _types
from jax_triton_rocm.launch._spec import KernelCallSpec


@dataclasses.dataclass(frozen=True)
class Api:
    """How messages name things for the API the user called.

    Attributes:
      name: the function ("triton_call").
      prefix: what each message starts with ("" or "triton_call_lowering: ").
      input, output: what one operand and one output are called ("input", "operand").
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
    index_hint: str = ""
    alias_fix: str = ""

    @property
    def an_output(self) -> str:
        return f"{'an' if self.output[0] in 'aeiou' else 'a'} {self.output}"


APIS = {
    "triton_call": Api("triton_call", "", "input", "output", "the {n} array arguments",
                       "the {n} outputs", index_hint=" (indices count arrays only, not scalars)"),
    "triton_call_lowering": Api(
        "triton_call_lowering", "triton_call_lowering: ", "operand", "result",
        "the primitive's {n} operands", "the primitive's {n} results",
        alias_fix="; fix the primitive's abstract eval"),
}


def takes_meta(fn: Callable, what: str) -> None:
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


def _grid_spec(api: Api, grid: Any) -> Any:
    """The grid as three ints, or a callable of the metaparameters (its results are checked per
    config, by `launch._plan`)."""
    if callable(grid):
        takes_meta(grid, f"{api.prefix}grid")
        return grid
    return _grid.normalize_grid(grid)


def aliases(api_name: str, given: Any, in_avals: tuple, out_avals: tuple) -> tuple:
    """`{input index: output index}` as sorted pairs of ints, each pair of one shape and dtype.

    `check_call` checks them; `triton_call_lowering` needs them first, to place its results.
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
                f"({_types.aval_text(src)}) and {api.output} {out_idx} "
                f"({_types.aval_text(dst)}) must have the same shape and dtype to share a "
                f"buffer{api.alias_fix}.")
        pairs.append((int(in_idx), int(out_idx)))
    if len({o for _, o in pairs}) != len(pairs):
        raise ValueError(f"{api.prefix}input_output_aliases={shown!r} aliases one {api.output} "
                         f"twice; give each {api.output} at most one {api.input}.")
    return tuple(sorted(pairs))


def _zeroed(api: Api, zeroed: Any, n_outs: int) -> Any:
    """The output indices to zero, sorted; a callable is checked here for its arity and per
    config (by `launch._plan`) for what it returns."""
    if callable(zeroed):
        takes_meta(zeroed, f"{api.prefix}zeroed_outputs")
        return zeroed
    return _values.output_indices(zeroed, n_outs, what=f"{api.prefix}zeroed_outputs",
                                  an_output=api.an_output)


def _buffers(api: Api, positional: tuple, in_avals: tuple, out_shapes: tuple) -> None:
    """A Triton pointer type for every operand's and output's dtype, and a fixed shape; each
    named as its API numbers it (`triton_call` counts positional arguments, scalars included).

    Raises:
      TypeError: a dtype Triton cannot take. ValueError: a symbolic dimension (`jax.export`).
    """
    names = {value: f"argument {i}" for i, (kind, value) in enumerate(positional)
             if kind == "array"}
    buffers = [(api.prefix + names.get(i, f"{api.input} {i}"), aval)
               for i, aval in enumerate(in_avals)]
    buffers += [(f"{api.prefix}{api.output} {i}", aval) for i, aval in enumerate(out_shapes)]
    for what, aval in buffers:
        _types.pointer_type(aval.dtype, what=what)
        if not all(isinstance(d, (int, np.integer)) for d in aval.shape):
            raise ValueError(
                f"{what} has shape {tuple(aval.shape)}, with a symbolic dimension, which "
                f"{api.name} cannot lower: the grid, the constexprs and the kernel are fixed "
                f"when the call is lowered, and jaxlib's Triton call has no grid that follows a "
                f"size known only at run time. Export for concrete shapes instead (one export "
                f"per shape).")


def _kernel_arguments(unwrapped: _kernel.Unwrapped, positional: tuple, in_avals: tuple,
                      out_shapes: tuple, metaparams: dict[str, Any]) -> None:
    """Checks the call against the kernel's parameters, so that a mistake fails at the call and
    not later at lowering.

    A plain kernel's arguments are laid out as the lowering will lay them. An autotuned kernel's
    constexprs come from its configs and heuristics at lowering, so for it the operands and
    keywords are checked (the same check, `_layout.check_operands`) and the autotuner's
    features.
    """
    jit_fn = unwrapped.jit_fn
    if unwrapped.autotuner is None and not unwrapped.heuristics:
        _layout.check_plain_call(jit_fn, positional, list(in_avals), list(out_shapes), metaparams)
        return
    if unwrapped.autotuner is not None:
        _autotuner.check_autotuner(unwrapped.autotuner, _kernel.kernel_name(jit_fn))
    n_trailing = 0 if _layout.places_outputs(positional) else len(out_shapes)
    _layout.check_operands(jit_fn, len(positional), n_trailing, metaparams)


def _scalar_options(api: Api, name: Any, serialized_metadata: Any, xla_native: Any) -> None:
    """The call's name, its metadata and its route switch."""
    if not isinstance(name, str):
        raise TypeError(f"{api.prefix}name={name!r} must be a str (the call's name for jaxlib "
                        f"and profilers), got {type(name).__name__}.")
    if not isinstance(serialized_metadata, bytes):
        raise TypeError(f"{api.prefix}serialized_metadata must be bytes, got "
                        f"{type(serialized_metadata).__name__}.")
    if xla_native is not None and not isinstance(xla_native, (bool, np.bool_)):
        raise TypeError(f"{api.prefix}xla_native={xla_native!r} must be True, False or None "
                        f"(None follows JAX_TRITON_ROCM_XLA_NATIVE).")


def _batch_grid_axis(api: Api, value: Any) -> int | None:
    if value is not None and (isinstance(value, (bool, np.bool_)) or value not in (0, 1, 2)):
        raise ValueError(
            f"{api.prefix}batch_grid_axis={value!r} must be None (jax.vmap loops over the batch) "
            f"or the grid axis 0, 1 or 2 whose program id is the example index under jax.vmap.")
    return None if value is None else int(value)


def check_call(api_name: str, *, kernel: Any, unwrapped: _kernel.Unwrapped, positional: tuple,
               in_avals: tuple, out_shapes: tuple, grid: Any, name: Any = "",
               num_warps: Any = None, num_stages: Any = None, num_ctas: Any = None,
               compute_capability: Any = None, enable_fp_fusion: Any = True,
               input_output_aliases: Any = None, zeroed_outputs: Any = (), debug: Any = False,
               serialized_metadata: Any = b"", batch_grid_axis: Any = None,
               xla_native: Any = None, metaparams: Mapping[str, Any] | None = None,
               options: Mapping[str, Any] | None = None, **surface: Any) -> KernelCallSpec:
    """Checks a call in the common form; returns its spec.

    Args:
      api_name: "triton_call" or "triton_call_lowering": how messages name things.
      kernel, unwrapped: the kernel as given, and taken apart (`_kernel.unwrap`).
      positional: the arguments' layout (`KernelCallSpec.positional`).
      in_avals, out_shapes: the operands' and outputs' shapes and dtypes.
      metaparams, options: constexprs and vendor compile options by name.
      surface: `triton_call`'s `has_side_effect`, `cost_estimate` and `backend_options`,
        checked by `checks._call_options`, and `by_keyword` (the spec's fields of those names).
      The rest: as `triton_call` takes them; None for `num_ctas` means 1.

    Raises:
      TypeError / ValueError: naming the argument, its value and the fix.
    """
    api = APIS[api_name]
    metaparams, options = dict(metaparams or {}), dict(options or {})
    _scalar_options(api, name, serialized_metadata, xla_native)
    _values.launch_settings(num_warps, num_stages, num_ctas, caller=api.prefix)
    cuda_arch = None if compute_capability is None else _vendors.normalize_arch(
        "cuda", compute_capability, what=f"{api.prefix}compute_capability")
    _buffers(api, positional, in_avals, out_shapes)
    spec = KernelCallSpec(
        kernel=kernel, unwrapped=unwrapped, positional=tuple(positional),
        out_shapes=tuple(out_shapes), grid=_grid_spec(api, grid),
        name=name or _kernel.kernel_name(unwrapped.jit_fn),
        num_warps=None if num_warps is None else int(num_warps),
        num_stages=None if num_stages is None else int(num_stages),
        num_ctas=1 if num_ctas is None else int(num_ctas),
        cuda_arch=cuda_arch,
        enable_fp_fusion=_values.flag(enable_fp_fusion, f"{api.prefix}enable_fp_fusion"),
        input_output_aliases=aliases(api_name, input_output_aliases, in_avals, out_shapes),
        zeroed_outputs=_zeroed(api, zeroed_outputs, len(out_shapes)),
        debug=_values.flag(debug, f"{api.prefix}debug"),
        serialized_metadata=serialized_metadata,
        batch_grid_axis=_batch_grid_axis(api, batch_grid_axis),
        xla_native=None if xla_native is None else bool(xla_native),
        metaparams=tuple(sorted(metaparams.items())),
        options=tuple(sorted(_values.compile_options(options, caller=api.prefix).items())),
        **surface)
    if api.name == "triton_call":  # triton_call_lowering's call is being lowered already
        _kernel_arguments(unwrapped, spec.positional, in_avals, spec.out_shapes, metaparams)
    return spec
