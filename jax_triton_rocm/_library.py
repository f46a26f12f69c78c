"""`triton_call_lowering`: a Triton kernel called from a library's own primitive's lowering rule.

Libraries (TransformerEngine first) define their own JAX primitives, with abstract evaluation,
sharding and batching rules, and launch a kernel from the primitive's lowering rule. This module
maps such a call onto the static parameters `triton_call` binds on `triton_kernel_p` and hands it
to the same lowering: the vendor's (`cuda`, `rocm`) or Triton's interpreter (`cpu`). One cache,
one encoding, every feature of `triton_call`.

The mapping is TransformerEngine's: every parameter named in `constexprs` is a compile-time
constant (runtime scalars such as sizes and strides included); the other parameters, apart from
`tl.constexpr` ones the autotune configs, heuristics or defaults fill, are pointers, filled in
order by the primitive's operands (`ctx.avals_in`) and then its results (`ctx.avals_out`).
Trailing results aliased to an operand may have no pointer (in-place kernels).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.interpreters.mlir import ir

from jax_triton_rocm import _grid, _kernel, _plugin, _types

Grid = int | tuple[int, ...] | Callable[[dict[str, Any]], Any]

# Keyword options of `triton_call_lowering` beyond the vendor knobs (`_kernel.COMPILE_OPTIONS`).
_GENERAL_OPTIONS = ("enable_fp_fusion", "debug")
_PLATFORMS = ("cuda", "rocm", "cpu")


def _platform(ctx: Any) -> str:
    """The one platform this lowering is for.

    In a multi-platform lowering JAX calls each platform's rule with `ctx.platforms` narrowed
    to that platform; a rule registered for all platforms at once sees them all.
    """
    platforms = tuple(getattr(ctx, "platforms", None) or ctx.module_context.platforms)
    if len(platforms) != 1 or platforms[0] not in _PLATFORMS:
        raise ValueError(
            f"triton_call_lowering lowers for one platform at a time, one of "
            f"{', '.join(_PLATFORMS)}; this lowering is for {platforms!r}. Register the rule "
            f"per platform: mlir.register_lowering(prim, rule, platform='cuda') (and 'rocm', "
            f"'cpu'), not once for every platform.")
    return platforms[0]


def _aval_text(aval: Any) -> str:
    return f"{np.dtype(aval.dtype).name}{list(aval.shape)}"


def _operands_text(in_avals: Sequence[Any], out_avals: Sequence[Any]) -> str:
    ins = ", ".join(f"in{i}={_aval_text(a)}" for i, a in enumerate(in_avals)) or "none"
    outs = ", ".join(f"out{i}={_aval_text(a)}" for i, a in enumerate(out_avals)) or "none"
    return f"operands ({ins}), results ({outs})"


def _check_positive_int(value: Any, what: str, *, power_of_two: bool = False) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"triton_call_lowering: {what}={value!r} must be a positive int or None "
                         f"(the target's Triton default).")
    if power_of_two and value & (value - 1):
        raise ValueError(f"triton_call_lowering: {what}={value!r} must be a power of two "
                         f"(1, 2, 4, 8, ...), as Triton requires.")


def _checked_constexprs(constexprs: Mapping[str, Any] | None, names: list[str],
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
            raise TypeError(f"triton_call_lowering: constexprs[{name!r}]={value!r} must be "
                            f"hashable: pass a tuple instead of a list, or a plain value.") from None
    return checked


def _checked_aliases(aliases: Mapping[int, int] | None, in_avals: tuple,
                     out_avals: tuple) -> tuple[tuple[int, int], ...]:
    """`{input index: output index}` as sorted pairs, each pair of one shape and dtype."""
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
                f"{in_idx} ({_aval_text(src)}) and result {out_idx} ({_aval_text(dst)}) must "
                f"have one shape and dtype to share a buffer; fix the primitive's abstract eval.")
        pairs.append((in_idx, out_idx))
    if len({o for _, o in pairs}) != len(pairs):
        raise ValueError(f"triton_call_lowering: input_output_aliases={dict(aliases)!r} aliases "
                         f"one result twice; give each result at most one operand.")
    return tuple(sorted(pairs))


def place_arguments(jit_fn: Any, constexprs: dict[str, Any], in_avals: tuple, out_avals: tuple,
                    aliases: tuple[tuple[int, int], ...]) -> tuple[tuple[str, Any], ...]:
    """One positional entry per kernel parameter, as TransformerEngine's helper maps them.

    Parameters named in `constexprs`, and `tl.constexpr` parameters (set by name: `constexprs`,
    autotune configs, heuristics or the default), are ("keyword", None); the others are
    pointers, filled in order by the operands ("input", i) and then the results ("output", j).

    Raises:
      TypeError: the pointers and the operands and results do not fit: more pointers than
        buffers, an operand without a pointer, or a result without one that is not aliased to an
        operand. The message lists the parameters, the constexprs and the operands.
    """
    names = list(jit_fn.arg_names)
    kernel = _kernel.kernel_name(jit_fn)
    pointers = [i for i, p in enumerate(jit_fn.params)
                if p.name not in constexprs and not p.is_constexpr]
    n_in, n_out = len(in_avals), len(out_avals)
    aliased_outputs = {o for _, o in aliases}
    unplaced = list(range(max(len(pointers) - n_in, 0), n_out))
    problem = None
    if len(pointers) > n_in + n_out:
        problem = (f"it has {len(pointers)} pointer parameters but the primitive has only "
                   f"{n_in + n_out} operands and results; name the extra scalars in constexprs")
    elif len(pointers) < n_in:
        problem = (f"operand {len(pointers)} and later get no parameter ({len(pointers)} "
                   f"pointer parameters for {n_in} operands)")
    elif any(o not in aliased_outputs for o in unplaced):
        missing = [o for o in unplaced if o not in aliased_outputs]
        problem = (f"result(s) {missing} get no parameter and are not aliased to an operand, so "
                   f"the kernel would never write them; only results aliased by "
                   f"input_output_aliases (in-place kernels) may go without a pointer")
    if problem is not None:
        pointer_names = [names[i] for i in pointers]
        raise TypeError(
            f"triton_call_lowering: kernel {kernel} does not fit the primitive: {problem}. "
            f"Kernel parameters: ({', '.join(names)}); constexprs: "
            f"{sorted(constexprs) or 'none'}; pointer parameters left: "
            f"({', '.join(pointer_names)}), filled in order by the "
            f"{_operands_text(in_avals, out_avals)}; input_output_aliases: {dict(aliases)}.")
    buffers = [("input", i) for i in range(n_in)] + [("output", o) for o in range(n_out)]
    placed: list[tuple[str, Any]] = [("keyword", None)] * len(names)
    for position, buffer in zip(pointers, buffers):
        placed[position] = buffer
    return tuple(placed)


def _check_constexprs_given(unwrapped: _kernel.Unwrapped, constexprs: dict[str, Any]) -> None:
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


def triton_call_lowering(
    ctx: Any,
    kernel: Any,
    *array_args: Any,
    grid: Grid,
    input_output_aliases: Mapping[int, int] | None = None,
    constexprs: Mapping[str, Any] | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    num_ctas: int | None = None,
    name: str = "",
    zeroed_outputs: Sequence[int] | Callable[[dict[str, Any]], Sequence[int]] = (),
    **compile_options: Any,
) -> Sequence[Any]:
    """Lowers a Triton kernel call inside a primitive's MLIR lowering rule.

    Use it from a rule registered with `mlir.register_lowering(prim, rule, platform=...)` for
    "cuda", "rocm" and/or "cpu" (Triton's interpreter):

        def _lowering(ctx, x):
            n = ctx.avals_in[0].size
            return triton_call_lowering(ctx, scale_kernel, x, grid=(triton.cdiv(n, 1024),),
                                        constexprs={"n": n, "BLOCK": 1024})

    Args:
      ctx: the `LoweringRuleContext` the rule received; its platform picks the lowering, its
        `avals_in`/`avals_out` the buffers, the devices lowered for (or `target_arch`) the GPU
        architecture.
      kernel: a @triton.jit or @gluon.jit function, optionally wrapped in @triton.autotune and
        @triton.heuristics.
      *array_args: the rule's operands (`ir.Value`s), one per `ctx.avals_in`.
      grid: an int, a tuple of 1-3 ints, or a callable of `meta` (the constexprs with each
        autotune config's kwargs and launch settings, and the pointers' avals by name).
      input_output_aliases: {operand index: result index}; an aliased trailing result may have
        no pointer parameter (the kernel writes through the operand's pointer).
      constexprs: kernel parameters by name, each a compile-time constant (sizes and strides
        included: one compile per distinct value).
      num_warps, num_stages, num_ctas: launch settings; None takes the target backend's default
        (4 warps, 1 CTA, its own stage count). An autotune config's own values win.
      name: the call's name, shown by jaxlib and profilers (default: the kernel's).
      zeroed_outputs: result indices zeroed before each launch, or a callable of `meta`.
      **compile_options: `enable_fp_fusion` (default True), `debug`, and the vendor knobs
        `waves_per_eu`, `matrix_instr_nonkdim`, `kpack` (AMD), `maxnreg` (NVIDIA).

    Returns:
      The results, one `ir.Value` per `ctx.avals_out`.

    Raises:
      TypeError / ValueError: a bad argument, or a kernel whose parameters do not fit the
        primitive; the message names the argument, its value and the fix.
    """
    platform = _platform(ctx)
    in_avals, out_avals = tuple(ctx.avals_in), tuple(ctx.avals_out)
    if len(array_args) != len(in_avals):
        raise TypeError(f"triton_call_lowering got {len(array_args)} array_args, but the "
                        f"primitive has {len(in_avals)} operands (ctx.avals_in); pass every "
                        f"operand the rule received, in order.")
    unknown = sorted(set(compile_options) - set(_GENERAL_OPTIONS + _kernel.COMPILE_OPTIONS))
    if unknown:
        raise TypeError(
            f"triton_call_lowering got unknown keyword(s) {', '.join(map(repr, unknown))}. "
            f"Kernel parameters go in constexprs={{...}}; compile options are "
            f"{', '.join(_GENERAL_OPTIONS + _kernel.COMPILE_OPTIONS)}.")
    unwrapped = _kernel.unwrap(kernel)
    jit_fn = unwrapped.jit_fn
    constexprs = _checked_constexprs(constexprs, list(jit_fn.arg_names),
                                     _kernel.kernel_name(jit_fn))
    if not callable(grid):
        _grid.normalize_grid(grid)
    _check_positive_int(num_warps, "num_warps", power_of_two=True)
    _check_positive_int(num_stages, "num_stages")
    _check_positive_int(num_ctas, "num_ctas")
    for i, aval in enumerate(in_avals + out_avals):
        what = f"operand {i}" if i < len(in_avals) else f"result {i - len(in_avals)}"
        _types.pointer_type(aval.dtype, what=f"triton_call_lowering: {what}")
    aliases = _checked_aliases(input_output_aliases, in_avals, out_avals)
    if not callable(zeroed_outputs):
        zeroed_outputs = tuple(sorted(set(zeroed_outputs)))
        for index in zeroed_outputs:
            if isinstance(index, bool) or not isinstance(index, int) or not (
                    0 <= index < len(out_avals)):
                raise ValueError(f"triton_call_lowering: zeroed_outputs={zeroed_outputs!r}: "
                                 f"{index!r} is not a result index (0..{len(out_avals) - 1}).")
    _check_constexprs_given(unwrapped, constexprs)
    positional = place_arguments(jit_fn, constexprs, in_avals, out_avals, aliases)
    options = {k: v for k, v in compile_options.items() if k in _kernel.COMPILE_OPTIONS}
    params = dict(
        kernel=kernel,
        positional=positional,
        out_shapes=tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in out_avals),
        grid=grid,
        name=name,
        num_warps=num_warps,
        num_stages=num_stages,
        num_ctas=num_ctas or 1,
        compute_capability=None,
        enable_fp_fusion=compile_options.get("enable_fp_fusion", True),
        input_output_aliases=aliases,
        zeroed_outputs=zeroed_outputs,
        debug=compile_options.get("debug", False),
        serialized_metadata=b"",
        batch_grid_axis=None,
        metaparams=tuple(sorted(constexprs.items())),
        options=tuple(sorted(options.items())),
    )
    if platform == "cpu":
        from jax_triton_rocm import _interpret  # imports Triton

        return _interpret.lower(ctx, *array_args, **params)
    return _plugin._vendor(platform).lower(ctx, *array_args, **params)
