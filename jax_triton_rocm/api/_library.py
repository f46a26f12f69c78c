"""`triton_call_lowering`: a kernel called from a library's own lowering rule, its parameters
filled as TransformerEngine fills them (constexprs by name, then pointers in order), lowered as
`triton_call` lowers ([Library authors](library-authors.md)).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
from jax.interpreters.mlir import ir

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.checks import _binder, _checker
from jax_triton_rocm.routes import _primitive
from jax_triton_rocm.checks import _kinds
from jax_triton_rocm.kernel import _spec
from jax_triton_rocm.kernel._spec import Grid, aval_text

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext

_PLATFORMS = ("cuda", "rocm", "cpu")


# Keyword options of `triton_call_lowering` beyond the vendor knobs (`_vendors.COMPILE_OPTIONS`).
GENERAL_OPTIONS = ("enable_fp_fusion", "debug")


def lowering_arguments(array_args: tuple, in_avals: tuple, compile_options: dict[str, Any],
                       constexprs: Any, unwrapped: _spec.Unwrapped) -> dict[str, Any]:
    """`triton_call_lowering`'s own arguments checked before the call is mapped onto the
    kernel's parameters, so that a mistake is reported against the rule's own arguments;
    returns `constexprs` as a dict. A `tl.constexpr` without a default must be there for a plain
    kernel only: autotuned and heuristics kernels are checked per config."""
    jit_fn = unwrapped.jit_fn
    names, kernel = list(jit_fn.arg_names), unwrapped.name
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
        if not isinstance(value, ir.Value):  # as a lowering rule receives an array operand
            raise TypeError(
                f"triton_call_lowering: array_args[{i}] is {value!r} ({type(value).__name__}), "
                f"not an operand. Pass the operands the lowering rule received after ctx (MLIR "
                f"values), not ctx.avals_in (their abstract values) or arrays.")
    known = GENERAL_OPTIONS + _vendors.COMPILE_OPTIONS
    unknown = sorted(set(compile_options) - set(known))
    params = [name for name in unknown if name in names]
    if params:
        raise TypeError(
            f"triton_call_lowering got {', '.join(f'{p}=' for p in params)}, a parameter of "
            f"kernel {kernel}: kernel parameters go in constexprs, e.g. "
            f"constexprs={{{params[0]!r}: {compile_options[params[0]]!r}}}.")
    if unknown:
        raise TypeError(
            f"triton_call_lowering got unknown keyword(s) {', '.join(map(repr, unknown))}"
            f"{_checker.close_names(unknown, [*_LOWERING_KEYWORDS, *known])}. Fix the spelling: "
            f"kernel parameters go in constexprs={{...}}, and the compile options are "
            f"{', '.join(known)}.")
    if constexprs is not None and not isinstance(constexprs, Mapping):
        raise TypeError(f"triton_call_lowering: constexprs={constexprs!r} must be a mapping of "
                        f"kernel parameter names to Python values, e.g. {{'n': x.size}}.")
    checked = dict(constexprs or {})
    unknown = sorted(str(k) for k in checked if k not in names)
    if unknown:
        raise TypeError(
            f"triton_call_lowering: constexprs names {', '.join(map(repr, unknown))}, which "
            f"kernel {kernel} has no parameter for; its parameters are ({', '.join(names)}).")
    for name, value in checked.items():
        _binder.check_not_a_function(f"constexprs[{name!r}]", value, "triton_call_lowering: ")
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
    missing = [] if unwrapped.autotuner is not None or unwrapped.heuristics else [
        p.name for p in jit_fn.params
        if p.is_constexpr and not p.has_default and p.name not in checked]
    if missing:
        raise TypeError(
            f"triton_call_lowering: kernel {kernel} needs tl.constexpr "
            f"{', '.join(map(repr, missing))}: add "
            f"{', '.join(f'{m!r}: ...' for m in missing)} to constexprs.")
    return checked


def place_arguments(unwrapped: _spec.Unwrapped, constexprs: dict[str, Any], in_avals: tuple,
                    out_avals: tuple,
                    aliases: tuple[tuple[int, int], ...]) -> tuple[tuple[str, Any], ...]:
    """Per kernel parameter, as TransformerEngine maps them: ("keyword", None) where set by name,
    else its buffer, ("input", i) or ("output", j); TypeError where they do not fit."""
    jit_fn = unwrapped.jit_fn
    names, kernel = list(jit_fn.arg_names), unwrapped.name
    pointers = [i for i, p in enumerate(jit_fn.params)
                if p.name not in constexprs and not p.is_constexpr]
    n_in, n_out = len(in_avals), len(out_avals)
    aliased_outputs = {o for _, o in aliases}
    unwritten = [o for o in range(max(len(pointers) - n_in, 0), n_out) if o not in aliased_outputs]
    problem = None
    if len(pointers) > n_in + n_out:
        found = _kinds.roles(jit_fn)
        scalars = [f"{names[i]!r} ({found.shown(names[i])})" for i in pointers
                   if found.of(names[i]) == "scalar"]
        problem = (f"it has {len(pointers)} pointer parameters but the primitive has only "
                   f"{n_in + n_out} operands and results; name the extra scalars in constexprs"
                   + (f" (most likely {' and '.join(scalars)})" if scalars else ""))
    elif len(pointers) < n_in:
        problem = (f"operand {len(pointers)} and later get no parameter ({len(pointers)} "
                   f"pointer parameters for {n_in} operands)")
    elif unwritten:
        problem = (f"result(s) {unwritten} get no parameter and are not aliased to an operand, so "
                   f"the kernel would never write them; only results aliased by "
                   f"input_output_aliases (in-place kernels) may go without a pointer")
    if problem is not None:
        ins = ", ".join(f"in{i}={aval_text(a)}" for i, a in enumerate(in_avals)) or "none"
        outs = ", ".join(f"out{i}={aval_text(a)}" for i, a in enumerate(out_avals)) or "none"
        runtime = [p.name for p in jit_fn.params if p.name in constexprs and not p.is_constexpr]
        if runtime and len(pointers) < n_in + n_out:
            problem += (f". constexprs names {', '.join(runtime)}, not tl.constexpr in the "
                        f"kernel: each becomes a compile-time constant and takes no buffer; "
                        f"drop from constexprs any that should receive an operand or a result")
        raise TypeError(
            f"triton_call_lowering: kernel {kernel} does not fit the primitive: {problem}. "
            f"Kernel parameters: ({', '.join(names)}); constexprs: "
            f"{sorted(constexprs) or 'none'}; pointer parameters left: "
            f"({', '.join(names[i] for i in pointers)}), filled in order by the operands "
            f"({ins}), results ({outs}); input_output_aliases: {dict(aliases)}.")
    buffers = [("input", i) for i in range(n_in)] + [("output", o) for o in range(n_out)]
    placed: list[tuple[str, Any]] = [("keyword", None)] * len(names)
    for position, buffer in zip(pointers, buffers):
        placed[position] = buffer
    return tuple(placed)


def triton_call_lowering(
    ctx: LoweringRuleContext,
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
      num_warps: warps per program; None takes the target backend's default (4). An
        autotune config's own value wins (as for the next two).
      num_stages: software-pipelining stages; None takes the target backend's own count.
      num_ctas: CTAs per cluster; None takes 1.
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
    # JAX narrows `ctx.platforms` for a per-platform rule; one registered for all sees them all.
    platforms = tuple(getattr(ctx, "platforms", None) or ctx.module_context.platforms)
    if len(platforms) != 1 or platforms[0] not in _PLATFORMS:
        raise ValueError(
            f"triton_call_lowering lowers for one platform at a time, one of "
            f"{', '.join(_PLATFORMS)}; this lowering is for {platforms!r}. Register the rule "
            f"per platform: mlir.register_lowering(prim, rule, platform='cuda') (and 'rocm', "
            f"'cpu'), not once for every platform.")
    in_avals, out_avals = tuple(ctx.avals_in), tuple(ctx.avals_out)
    unwrapped = _spec.unwrap(kernel)
    constexprs = lowering_arguments(array_args, in_avals, compile_options, constexprs, unwrapped)
    out_shapes = tuple(jax.ShapeDtypeStruct(a.shape, a.dtype) for a in out_avals)
    aliases = _checker.alias_pairs("triton_call_lowering", input_output_aliases, in_avals,
                                   out_shapes)
    spec = _checker.check_call(
        "triton_call_lowering", kernel=kernel, unwrapped=unwrapped,
        positional=place_arguments(unwrapped, constexprs, in_avals, out_avals, aliases),
        in_avals=in_avals, out_shapes=out_shapes, aliases=aliases, grid=grid, name=name,
        num_warps=num_warps, num_stages=num_stages, num_ctas=num_ctas,
        zeroed_outputs=zeroed_outputs,
        **{k: v for k, v in compile_options.items() if k in GENERAL_OPTIONS},
        metaparams=constexprs,
        options={k: v for k, v in compile_options.items() if k in _vendors.COMPILE_OPTIONS})
    return _primitive.lower(platforms[0], ctx, array_args, spec)


# triton_call_lowering's own keyword arguments, which a misspelt keyword is compared with.
_LOWERING_KEYWORDS = _binder.keyword_names(triton_call_lowering)
