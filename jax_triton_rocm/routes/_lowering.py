"""The lowering shell of both GPU routes, jaxlib's Triton call and XLA's: the lowered-call memo
around the plan memo, each asking the route (`Route`, which each route's module implements)
where the call runs, for its launches, to build them (compile, check, image) and to finish the
call it emits; docs/design.md, "One call, top-down, on each GPU route".
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from jax_triton_rocm.base import _state
from jax_triton_rocm.plan import _plan
from jax_triton_rocm.routes import _choices
from jax_triton_rocm.kernel import _spec

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext
    from jax_triton_rocm.backends._backend import ArchAnswers, Backend
    from jax_triton_rocm.backends._vendors import GpuArch, PluginFeatures
    from jax_triton_rocm.base import _env
    from jax_triton_rocm.kernel._spec import KernelCallSpec


@dataclasses.dataclass(frozen=True)
class Unfit:
    """Why a call cannot take a route."""

    reason: str


class Placed(NamedTuple):
    """Where a call runs, as its route sees it: the architecture the backend answers for,
    `place` (what decides its plan beyond the call, as plain values), `decides` (what decides
    the lowered call beyond the call; both hold the call graph's key), and what jaxlib's route
    keeps for itself: the devices' architecture where it differs (`_arch.placement`), the plugin's
    features, the lowering's settings and its custom call's name."""

    arch: GpuArch
    place: tuple
    decides: tuple
    devices: GpuArch | None = None
    features: PluginFeatures | None = None
    settings: _env.LoweringSettings | None = None
    call_name: str = ""


class Route(abc.ABC):
    """What the shell asks a GPU route, in the order of its methods (`lowered_call`)."""

    name = ""
    # The route whose tuning picks an autotuned kernel's launches, which this route's
    # `tuned_launches(what tuned_on lowered)` takes (or says `Unfit`).
    tuned_on: str | None = None

    @abc.abstractmethod
    def where(self, backend: Backend, ctx: LoweringRuleContext, spec: KernelCallSpec,
              record: dict, settings: _env.LoweringSettings | None) -> Placed | Unfit:
        """Where the call runs, or why it cannot take the route, known before any compile."""

    @abc.abstractmethod
    def build(self, backend: Backend, spec: KernelCallSpec, placed: Placed, answers: ArchAnswers,
              launches: list[_plan.Launch], in_avals: tuple, out_avals: tuple,
              record: dict) -> tuple[Any, list[_plan.Launch]] | Unfit:
        """(what the launches were built into, the launches kept), or why they do not fit."""

    @abc.abstractmethod
    def rebuild(self, made: Any, launches: list[_plan.Launch], spec: KernelCallSpec,
                in_avals: tuple, record: dict) -> Any:
        """A kept build for the launches relaunched at a new shape; None where it cannot be."""

    def finish(self, backend: Backend, ctx: LoweringRuleContext, spec: KernelCallSpec,
               placed: Placed, made: Any) -> Any:
        return made

    @abc.abstractmethod
    def emit(self, backend: Backend, ctx: LoweringRuleContext, operands: Sequence[Any],
             lowered: Any, spec: KernelCallSpec) -> list:
        """The finished call emitted as MLIR: its results."""


# Each route by name, as its module registers it: a route asks another through the shell, never
# by importing it (XLA's asks jaxlib's for the autotune config it remembered).
ROUTES: dict[str, Route] = {}


def lowered_call(route: Route, backend: Backend, ctx: LoweringRuleContext, spec: KernelCallSpec,
                 settings: _env.LoweringSettings | None = None) -> Any:
    """The call lowered on `route`, without MLIR (what the route finishes, `Unfit`, or
    `_plan.Skipped` where no program runs), kept in the kernel's record (fetched once here,
    passed down) by all that decides it. A call left undecided is told to a tuning session."""
    record = _state.KERNEL_RECORDS.record(spec.kernel)
    placed = route.where(backend, ctx, spec, record, settings)
    if isinstance(placed, Unfit):
        return placed
    key = lowering_key(route, ctx, spec, placed)
    kept = record.get(_state.LOWERED_CALLS, {})
    try:
        with _state.LOCKS.guard:  # a call found is now the most recently used
            if (lowered := kept.get(key)) is not None:
                kept.move_to_end(key)
    except TypeError:  # a constexpr in the key that hashes badly
        lowered, key = None, None
    if lowered is None:
        lowered = _lower_uncached(route, backend, ctx, spec, placed, record, settings)
        if key is not None:
            _state.LOWERED_CALLS.put(key, lowered, record=record)
    if getattr(lowered, "undecided", None) is not None:
        _choices.report_undecided(lowered.undecided)
    return lowered


def lowering_key(route: Route, ctx: LoweringRuleContext, spec: KernelCallSpec,
                 placed: Placed) -> tuple:
    """All that decides a lowered call: the route, the operands' and results' types, the call,
    the autotune choices remembered (a plain kernel has one launch: none decide it) and where
    it runs, with its call graph."""
    decided = () if spec.unwrapped.autotuner is None else _choices.decided()
    return (route.name, tuple(ctx.avals_in), tuple(ctx.avals_out), spec, decided, placed.decides)


def _lower_uncached(route: Route, backend: Backend, ctx: LoweringRuleContext,
                    spec: KernelCallSpec, placed: Placed, record: dict,
                    settings: _env.LoweringSettings | None) -> Any:
    """The call planned, built and finished. A plain kernel's build is kept by `placed.place`
    and `plan_key` and rebuilt for a later call (unless the route says it cannot be), so a new
    shape or scalar value compiles, lays out and encodes nothing anew."""
    in_avals, out_avals = tuple(ctx.avals_in), tuple(ctx.avals_out)
    types = spec.types  # as the call's check typed them (the layout types a dtype it lacks)
    try:
        key = plan_key(spec, in_avals, out_avals)
    except TypeError:  # an unhashable parameter: no plan kept
        key = None
    made = found = None
    kept = record.get(_state.PLANS, {})
    with _state.LOCKS.guard:  # a plan found is now the most recently used
        if key is not None and (found := kept.get((placed.place, key))) is not None:
            kept.move_to_end((placed.place, key))
    if found is not None:  # (what was made, its launches, the target's limits)
        launches = _plan.relaunch(list(found[1]), spec, in_avals, out_avals, found[2])
        if any([0 in launch.grid for launch in launches]):  # no program runs
            return _plan.skipped(launches, spec, out_avals)
        made = route.rebuild(found[0], launches, spec, in_avals, record)
    if made is None:
        answers = backend.answers(placed.arch)
        if route.tuned_on is not None and spec.unwrapped.autotuner is not None:
            tuned = lowered_call(ROUTES[route.tuned_on], backend, ctx, spec, settings)
            launches = tuned if isinstance(tuned, _plan.Skipped) else route.tuned_launches(tuned)
            if isinstance(launches, (Unfit, _plan.Skipped)):
                return launches
        else:
            # Those a trace planned for it, taken: the kernel's functions (pruning, heuristics,
            # pre_hooks, a callable grid) run once for a trace and its lowering (`start_compiles`).
            launches = (_state.TRACED_LAUNCHES.pop(
                (spec, in_avals, out_avals, placed.arch.platform, placed.arch.arch), record)
                or _plan.launches(spec, in_avals, out_avals, answers.launch_site, types))
        if any([0 in launch.grid for launch in launches]):  # nothing compiled, nor kept
            return _plan.skipped(launches, spec, out_avals)
        built = route.build(backend, spec, placed, answers, launches, in_avals, out_avals, record)
        if isinstance(built, Unfit):
            return built
        made, launches = built
        if key is not None:
            _state.PLANS.put((placed.place, key), (made, tuple(launches),
                                                   answers.launch_site.limits), record=record)
    return route.finish(backend, ctx, spec, placed, made)


def plan_key(spec: KernelCallSpec, in_avals: tuple, out_avals: tuple) -> tuple | None:
    """What decides a plain kernel's launches but the shapes and runtime scalars' values (which
    change no configuration, layout or binary, only what `_plan.relaunch` refills); None for a
    kernel with an autotuner or heuristics (they see both). A TypeError: an unhashable value."""
    unwrapped = spec.unwrapped
    if unwrapped.autotuner is not None or unwrapped.heuristics:
        return None
    view = None if spec.types is None else spec.types.view
    if view is None:  # not typed yet, or a value whose typing failed: raised here, as always
        view = _spec.compile_view(unwrapped.jit_fn, spec.positional)
    key = (spec.kernel_id, view, len(in_avals),
           tuple([(not aval.shape, aval.dtype) for aval in (*in_avals, *out_avals)]),
           spec.exact_values[1], spec.options, spec.backend_options,
           spec.num_warps, spec.num_stages, spec.num_ctas, spec.cuda_arch, spec.enable_fp_fusion,
           spec.debug)
    hash(key)
    return key
