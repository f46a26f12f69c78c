"""The checks `triton_call_lowering` runs on its arguments, each error naming the fix.

They run before the call is mapped onto the kernel's parameters (`_library.place_arguments`), so
that a mistake in a library's lowering rule is reported against the rule's own arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
from jax.interpreters.mlir import ir

from jax_triton_rocm import _checks, _grid, _kernel, _types

# Keyword options of `triton_call_lowering` beyond the vendor knobs (`_kernel.COMPILE_OPTIONS`).
GENERAL_OPTIONS = ("enable_fp_fusion", "debug")


def aval_text(aval: Any) -> str:
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}"


def check_operands_and_options(array_args: tuple, in_avals: tuple,
                               compile_options: dict[str, Any]) -> None:
    """One operand per `ctx.avals_in`, and no keyword beyond the known compile options."""
    if len(array_args) != len(in_avals):
        raise TypeError(f"triton_call_lowering got {len(array_args)} array_args, but the "
                        f"primitive has {len(in_avals)} operands (ctx.avals_in); pass every "
                        f"operand the rule received, in order.")
    unknown = sorted(set(compile_options) - set(GENERAL_OPTIONS + _kernel.COMPILE_OPTIONS))
    if unknown:
        raise TypeError(
            f"triton_call_lowering got unknown keyword(s) {', '.join(map(repr, unknown))}. "
            f"Kernel parameters go in constexprs={{...}}; compile options are "
            f"{', '.join(GENERAL_OPTIONS + _kernel.COMPILE_OPTIONS)}.")


def check_launch(grid: Any, num_warps: Any, num_stages: Any, num_ctas: Any, in_avals: tuple,
                 out_avals: tuple) -> None:
    """The grid (a callable one is checked per config at lowering), the launch settings, and a
    pointer type for every operand's and result's dtype."""
    if not callable(grid):
        _grid.normalize_grid(grid)
    _checks.launch_settings(num_warps, num_stages, num_ctas, caller="triton_call_lowering: ")
    for i, aval in enumerate(in_avals + out_avals):
        what = f"operand {i}" if i < len(in_avals) else f"result {i - len(in_avals)}"
        _types.pointer_type(aval.dtype, what=f"triton_call_lowering: {what}")


def checked_zeroed(zeroed_outputs: Any, n_out: int) -> Any:
    """The result indices to zero, sorted; a callable is checked per config at lowering."""
    if callable(zeroed_outputs):
        return zeroed_outputs
    _checks.not_a_string(zeroed_outputs, "zeroed_outputs", caller="triton_call_lowering: ",
                         wanted="a sequence of result indices, e.g. (0,)")
    zeroed_outputs = tuple(sorted(set(zeroed_outputs)))
    for index in zeroed_outputs:
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n_out:
            raise ValueError(f"triton_call_lowering: zeroed_outputs={zeroed_outputs!r}: "
                             f"{index!r} is not a result index (0..{n_out - 1}).")
    return zeroed_outputs


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


def checked_aliases(aliases: Mapping[int, int] | None, in_avals: tuple,
                    out_avals: tuple) -> tuple[tuple[int, int], ...]:
    """`{input index: output index}` as sorted pairs, each pair of one shape and dtype."""
    _checks.not_a_string(aliases, "input_output_aliases", caller="triton_call_lowering: ",
                         wanted="a dict {operand index: result index}, e.g. {0: 0}")
    if not aliases:
        return ()
    pairs = []
    for in_idx, out_idx in dict(aliases).items():
        if isinstance(in_idx, bool) or not isinstance(in_idx, int) or not (
                0 <= in_idx < len(in_avals)):
            raise ValueError(f"triton_call_lowering: input_output_aliases={dict(aliases)!r}: "
                             f"input index {in_idx!r} is not one of the primitive's "
                             f"{len(in_avals)} operands (0..{len(in_avals) - 1}).")
        if isinstance(out_idx, bool) or not isinstance(out_idx, int) or not (
                0 <= out_idx < len(out_avals)):
            raise ValueError(f"triton_call_lowering: input_output_aliases={dict(aliases)!r}: "
                             f"output index {out_idx!r} is not one of the primitive's "
                             f"{len(out_avals)} results (0..{len(out_avals) - 1}).")
        src, dst = in_avals[in_idx], out_avals[out_idx]
        if tuple(src.shape) != tuple(dst.shape) or np.dtype(src.dtype) != np.dtype(dst.dtype):
            raise ValueError(
                f"triton_call_lowering: input_output_aliases={dict(aliases)!r}: operand "
                f"{in_idx} ({aval_text(src)}) and result {out_idx} ({aval_text(dst)}) must "
                f"have one shape and dtype to share a buffer; fix the primitive's abstract eval.")
        pairs.append((in_idx, out_idx))
    if len({o for _, o in pairs}) != len(pairs):
        raise ValueError(f"triton_call_lowering: input_output_aliases={dict(aliases)!r} aliases "
                         f"one result twice; give each result at most one operand.")
    return tuple(sorted(pairs))


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
