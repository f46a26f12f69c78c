"""The lowering shell of both GPU routes, jaxlib's Triton call and XLA's: the lowered-call memo
around the plan memo and the launches planned, then each route's `plan` (and jaxlib's
`encode`); docs/design.md.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.base import _compat, _state
from jax_triton_rocm.compile import _compile
from jax_triton_rocm.plan import _plan, _trampoline
from jax_triton_rocm.routes import _arch, _choices
from jax_triton_rocm.spec import _spec
from jax_triton_rocm.routes.jaxlib import _jaxlib_call
from jax_triton_rocm.routes.xla import _xla_native

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext
    from jax_triton_rocm.backends._backend import Backend, LaunchLimits
    from jax_triton_rocm.base import _env
    from jax_triton_rocm.routes._arch import GpuArch
    from jax_triton_rocm.spec._spec import ArgumentTypes, KernelCallSpec


@dataclasses.dataclass(frozen=True)
class Kept:
    """A call's plan as kept (`made`: the kernels and images, or XLA's call)."""

    made: Any
    launches: tuple[_plan.Launch, ...]
    limits: LaunchLimits | None


def lowered_call(route: str, backend: Backend, ctx: LoweringRuleContext, spec: KernelCallSpec,
                 settings: _env.LoweringSettings | None = None) -> Any:
    """The call lowered for `route`, without MLIR (`_jaxlib_call.LoweredCall`,
    `_xla_native.NativeCall` or `Unfit`), kept in the kernel's record (fetched once here, passed
    down) by all that decides it, and jaxlib's by the environment's `settings`. A call left
    undecided is told to a tuning session."""
    in_avals, out_avals = tuple(ctx.avals_in), tuple(ctx.avals_out)
    record = _state.KERNEL_RECORDS.record(spec.kernel)
    if route == "jaxlib":
        where = _arch.where_it_runs(backend, ctx, spec, record, settings)
        plain_call_name = _compat.plain_call_name(where.settings, exporting=where.exporting)
        # `Where` as plain values (its fields but `exporting`): hashed without a call per field.
        place = (where.platform, dataclasses.astuple(where.arch),
                 None if where.devices is None else dataclasses.astuple(where.devices),
                 dataclasses.astuple(where.features), where.globals, where.settings.variables)
        decides = (place, where.exporting, plain_call_name)
        graph = where.globals
    else:
        if (unfit := _xla_native.unfit_before_compile(spec)) is not None:
            return unfit
        where, _ = _arch.resolve_arch(backend, ctx, spec)
        graph = _compile.call_graph_key(spec, record)
        decides = (backend.platform, dataclasses.astuple(where))
        place, plain_call_name = (_xla_native.CUSTOM_CALL_NAME, *decides, graph), ""
    # A plain kernel has one launch: no autotune choice nor target decides it.
    decided = () if spec.unwrapped.autotuner is None else _choices.decided()
    key = (route, in_avals, out_avals, spec, graph, decided, decides)
    kept = record.get(_state.LOWERED_CALLS, {})
    try:
        with _state.LOCKS.guard:  # a call found is now the most recently used
            if (lowered := kept.get(key)) is not None:
                kept.move_to_end(key)
    except TypeError:  # a constexpr in the key that hashes badly
        lowered, key = None, None
    if lowered is None:
        lowered = _lower_uncached(route, backend, ctx, spec, where, place, plain_call_name, record,
                                  settings)
        if key is not None:
            _state.LOWERED_CALLS.put(key, lowered, record=record)
    if getattr(lowered, "undecided", None) is not None:
        _choices.report_undecided(lowered.undecided)
    return lowered


def _lower_uncached(route: str, backend: Backend, ctx: LoweringRuleContext,
                    spec: KernelCallSpec, where: _arch.Where | GpuArch, place: tuple,
                    plain_call_name: str, record: dict,
                    settings: _env.LoweringSettings | None) -> Any:
    """The call planned, then on jaxlib's route encoded. A plain kernel's plan is kept by
    `place` and `plan_key` and relaunched for a later call (XLA's `refilled`, unless None), so a
    new shape or scalar value compiles, lays out and encodes nothing anew."""
    in_avals, out_avals = tuple(ctx.avals_in), tuple(ctx.avals_out)
    types = _argument_types(spec, in_avals, out_avals)
    try:
        key = plan_key(spec, in_avals, out_avals, types)
    except TypeError:  # an unhashable parameter: no plan kept
        key = None
    planned = found = None
    kept = record.get(_state.PLANS, {})
    with _state.LOCKS.guard:  # a plan found is now the most recently used
        if key is not None and (found := kept.get((place, key))) is not None:
            kept.move_to_end((place, key))
    if found is not None:
        launches = _plan.relaunch(list(found.launches), spec, in_avals, out_avals, found.limits)
        if route == "xla":
            planned = _xla_native.refilled(found.made, *launches)
        else:  # each launch as jaxlib launches it, with the kept kernel and image
            planned = [(launch, _trampoline.for_jaxlib(spec.unwrapped, launch, len(in_avals),
                                                       record), kernel, image)
                       for launch, (_, _, kernel, image) in zip(launches, found.made)]
    if planned is None:
        # On XLA's route an autotuned kernel's one launch is the config remembered for jaxlib's
        # call, which keys choices on its compiled configs and runs the autotuner's functions once.
        arch = where.arch if route == "jaxlib" else where
        answers = backend.answers(arch)
        if route == "xla" and spec.unwrapped.autotuner is not None:
            lowered = lowered_call("jaxlib", backend, ctx, spec, settings)
            if lowered.undecided is not None or len(lowered.launches) != 1:
                return _xla_native.Unfit(
                    "the kernel is autotuned and no configuration is remembered for this call "
                    "(jaxlib's call times them at its first run; jax_triton_rocm.autotune picks "
                    "one once, on real data, and the call can then take XLA's)")
            launches = list(lowered.launches)
        else:
            # Those a trace planned for it, taken: the kernel's functions (pruning, heuristics,
            # pre_hooks, a callable grid) run once for a trace and its lowering (`start_compiles`).
            launches = (_state.TRACED_LAUNCHES.pop(
                (spec, in_avals, out_avals, arch.platform, arch.arch), record)
                or _plan.launches(spec, in_avals, out_avals, answers.launch_site, types))
        if route == "xla":
            [launch] = launches  # XLA's call launches one configuration
            planned = _xla_native.plan(backend, spec, answers, launch, in_avals, out_avals,
                                       record)
            if isinstance(planned, _xla_native.Unfit):
                return planned
        else:
            planned = _jaxlib_call.plan(backend, spec, where, answers, launches, in_avals,
                                        out_avals, record)
            launches = [launch for launch, *_ in planned]  # those that compiled and fit
        if key is not None:
            _state.PLANS.put((place, key), Kept(planned, tuple(launches),
                                                answers.launch_site.limits), record=record)
    if route == "xla":
        return planned
    return _jaxlib_call.encode(backend, ctx, spec, where, planned,
                               plain_call_name=plain_call_name)


def _argument_types(spec: KernelCallSpec, in_avals: tuple, out_avals: tuple) -> ArgumentTypes:
    """The call's values typed: as the check typed them, again where it typed other dtypes."""
    types = spec.types
    if types is None or not all([a.dtype in types.pointers for a in (*in_avals, *out_avals)]):
        types = _spec.argument_types(spec.unwrapped.jit_fn, spec.positional, in_avals,
                                     out_avals, dict(spec.metaparams))
    return types


def start_compiles(backend: Backend, spec: KernelCallSpec, arch: GpuArch, in_avals: tuple,
                   out_avals: tuple) -> None:
    """Starts, at trace time, the compiles jaxlib's route makes when it lowers the call for
    `arch`: the launches `_lower_uncached` plans, from the same inputs (the call, its operands'
    types, the architecture), and their jobs (`_jaxlib_call.compile_jobs`), handed to the
    compile pool, the launches kept for that lowering (`_state.TRACED_LAUNCHES`). Raises what
    they raise, a value that does not hash too (the trace drops it: the lowering raises it
    again, or plans anew). A plain kernel with a plan kept for another shape starts nothing: its
    lowering refills that plan and compiles nothing."""
    record = _state.KERNEL_RECORDS.record(spec.kernel)
    types = _argument_types(spec, in_avals, out_avals)
    if (key := plan_key(spec, in_avals, out_avals, types)) is not None:
        with _state.LOCKS.guard:
            if any([kept == key for _, kept in record.get(_state.PLANS, {})]):
                return
    answers = backend.answers(arch)
    launches = _plan.launches(spec, in_avals, out_avals, answers.launch_site, types)
    _, jobs = _jaxlib_call.compile_jobs(backend, spec, answers, launches, len(in_avals), record)
    _compile.start_compiles(jobs)
    _state.TRACED_LAUNCHES.put((spec, in_avals, out_avals, arch.platform, arch.arch), launches,
                               record=record)


def plan_key(spec: KernelCallSpec, in_avals: tuple, out_avals: tuple,
             types: ArgumentTypes | None = None) -> tuple | None:
    """What decides a plain kernel's launches but the shapes and runtime scalars' values (which
    change no configuration, layout or binary, only what `_plan.relaunch` refills); None for a
    kernel with an autotuner or heuristics (they see both). A TypeError: an unhashable value."""
    unwrapped = spec.unwrapped
    if unwrapped.autotuner is not None or unwrapped.heuristics:
        return None
    view = None if types is None else types.view
    if view is None:  # not typed yet, or a value whose typing failed: raised here, as always
        view = _spec.compile_view(unwrapped.jit_fn, spec.positional)
    key = (spec.kernel_id, view, len(in_avals),
           tuple([(not aval.shape, aval.dtype) for aval in (*in_avals, *out_avals)]),
           spec.exact_values[1], spec.options, spec.backend_options,
           spec.num_warps, spec.num_stages, spec.num_ctas, spec.cuda_arch, spec.enable_fp_fusion,
           spec.debug)
    hash(key)
    return key
