"""The launches of one call (`launches`), which every route asks and nothing else decides, each
checked against what a block may use on the target (`LaunchLimits`); docs/design.md, "Launch
configurations"."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import jax

from jax_triton_rocm.base import _values
from jax_triton_rocm.kernel import _autotuner, _callbacks, _hooks, _layout, _spec
from jax_triton_rocm.kernel._autotuner import LAUNCH_SETTINGS
from jax_triton_rocm.kernel._spec import MAX_GRID_SIZE, KernelCallSpec, MetaGrid, normalize_grid

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction

logger = logging.getLogger("jax_triton_rocm")

T = TypeVar("T")


MAX_THREADS_PER_BLOCK = 1024  # every NVIDIA GPU since sm_20 and every AMD GPU Triton targets


@dataclasses.dataclass(frozen=True)
class LaunchLimits:
    """What one block may use on a target (`arch`, for messages; None: not known or not bounded
    beyond `max_grid`), `max_threads_x` the threads along the grid's x axis (HIP)."""

    arch: str
    warp_size: int
    max_threads: int = MAX_THREADS_PER_BLOCK
    max_shared_bytes: int | None = None
    max_grid: tuple[int, int, int] = (MAX_GRID_SIZE,) * 3
    max_threads_x: int | None = None


@dataclasses.dataclass(frozen=True)
class LaunchSite:
    """What the plan needs to know of where the launches run: Triton's compiler backend class
    (it parses specialisation attributes), the `limits` (None: nothing checked), every vendor's
    compile options, `check_ctas` (raises for clusters that cannot launch there), whether only
    the first config launches, the target's name, and the fp8 types it takes (None: any)."""

    triton_backend: Any
    limits: LaunchLimits | None
    compile_options: tuple[str, ...]
    check_ctas: Callable[[int], None] = lambda num_ctas: None
    first_config_only: bool = False
    name: str = "the host"
    fp8_types: tuple[str, ...] | None = None


def interpreter_launch_site(compile_options: tuple[str, ...]) -> LaunchSite:
    """The host, where Triton's interpreter runs the first configuration, unchecked."""
    from triton.backends.compiler import BaseBackend

    return LaunchSite(BaseBackend, None, compile_options, first_config_only=True)


def launch_problem(limits: LaunchLimits, num_warps: int | None = None,
                   grid: tuple[int, int, int] | None = None, compiled: Any = None) -> str | None:
    """Why a launch cannot run within `limits`, or None: its block of `num_warps` warps, its
    `grid` and its `compiled` kernel, each where given. NotImplementedError for a compiled kernel
    that needs a launch feature neither jaxlib's Triton call nor XLA's provides."""
    threads = (num_warps or 0) * limits.warp_size
    if threads > limits.max_threads:
        return (f"num_warps={num_warps} makes blocks of {threads} threads ({num_warps} warps "
                f"of {limits.warp_size}) on {limits.arch}, whose limit is {limits.max_threads}; use "
                f"num_warps={limits.max_threads // limits.warp_size} or fewer")
    for axis, (size, limit) in enumerate(zip(grid or (), limits.max_grid)):
        if size > limit:
            return (f"dimension {axis} has {size} programs and {limits.arch} launches at most "
                    f"{limit} along it; put the large size on dimension 0 (up to "
                    f"{limits.max_grid[0]}) or give each program more work")
    if grid is not None and limits.max_threads_x is not None and (
            grid[0] * threads > limits.max_threads_x):
        return (f"dimension 0 has {grid[0]} programs of {threads} threads ({num_warps} warps "
                f"of {limits.warp_size}), {grid[0] * threads} threads in all, and {limits.arch} "
                f"launches at most {limits.max_threads_x} threads along it; give each program "
                f"more work (at most {limits.max_threads_x // threads} programs of this size), "
                f"or move programs to dimension 1 (up to {limits.max_grid[1]})")
    if compiled is None:
        return None
    shared_bytes = compiled.shared_mem_bytes
    if limits.max_shared_bytes is not None and shared_bytes > limits.max_shared_bytes:
        return (f"the kernel needs {shared_bytes} bytes of shared memory per block, and "
                f"{limits.arch} allows {limits.max_shared_bytes}; use smaller blocks or fewer "
                f"num_stages")
    if compiled.profile_scratch_size:
        raise NotImplementedError(
            f"Kernel {compiled.name} was compiled with Triton's profiling instrumentation "
            f"(profile scratch of {compiled.profile_scratch_size} bytes), which jaxlib does "
            f"not allocate. Unset TRITON's instrumentation mode (TRITON_INSTRUMENTATION_MODE).")
    for flag in ("launch_cooperative_grid", "launch_pdl"):
        if compiled.metadata.get(flag):
            raise NotImplementedError(
                f"Kernel {compiled.name} needs a {flag.removeprefix('launch_')} launch, "
                f"which jaxlib's Triton launcher does not do. Compile without it.")
    return None


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """One way to launch the kernel: constexprs by name, the settings (None: the backend's
    default), vendor compile `options`, Triton's `description` of the config, what a callable
    `grid` or `zeroed_outputs` receives (`meta`) and the layout the config's `pre_hook` re-blocked
    (`positional`; None: the spec's own)."""

    constexprs: dict[str, Any]
    num_warps: int | None
    num_stages: int | None
    num_ctas: int | None
    options: dict[str, Any]
    description: str
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    positional: tuple | None = None

    def kwargs_view(self) -> dict[str, Any]:
        """The keyword arguments Triton's launcher would hold: options, settings, constexprs."""
        settings = {k: getattr(self, k) for k in LAUNCH_SETTINGS if getattr(self, k) is not None}
        return {**self.options, "num_ctas": 1, **settings, **self.constexprs}


DEFAULT_NUM_WARPS = 4  # Triton's, for every backend


@dataclasses.dataclass(frozen=True)
class Launch:
    """One launch of the kernel: `grid` within the target's limits, `bound` the arguments laid
    onto `jit_fn`'s parameters (the call's kernel, or a route's trampoline around it)."""

    config: LaunchConfig
    num_warps: int
    grid: tuple[int, int, int]
    zeroed: tuple[int, ...]
    bound: _layout.BoundKernel
    jit_fn: JITFunction

    @property
    def description(self) -> str:
        """The configuration as jaxlib's autotuner shows it ("" for a plain call)."""
        return self.config.description


_META_FIX = ("It receives the kernel's arguments by name (arrays as their shape and dtype), the "
             "constexprs and the launch settings set by the call or the config.")


def named_value(entry: tuple[str, Any], in_avals: tuple) -> Any:
    """How heuristics, pruning functions and grids see a nested argument: a tuple of what they
    see for its elements (arrays as abstract values), a descriptor over an abstract base."""
    kind, value = entry
    if kind == "tuple":
        return tuple(named_value(element, in_avals) for element in value)
    if kind == "descriptor":
        return value[1]
    return in_avals[value] if kind == "input" else value


def named_args(jit_fn: JITFunction, positional: tuple, in_avals: tuple, out_avals: tuple) -> dict:
    """Argument values by name, as heuristics and pruning functions see them: arrays as their
    abstract values; parameters filled by name ("keyword" entries) left to the constexprs."""
    names = list(jit_fn.arg_names)
    named: dict[str, Any] = {}
    for name, (kind, value) in zip(names, positional):
        if kind in ("array", "input", "output"):  # a buffer: its abstract value
            named[name] = (out_avals if kind == "output" else in_avals)[value]
        elif kind == "scalar":
            named[name] = value
        elif kind in _layout.NESTED_KINDS:
            named[name] = named_value((kind, value), in_avals)
    # The outputs' names follow the arguments; a placed layout (one entry per parameter) has none.
    named.update(zip(names[len(positional):], out_avals))
    return named


def launch_grid(spec: KernelCallSpec, meta: dict[str, Any], *, num_warps: int,
                description: str = "",
                limits: LaunchLimits | None = None) -> tuple[int, int, int]:
    """The grid of one launch of `num_warps` warps per program: `spec.grid`, evaluated on `meta`
    when callable, batched along `batch_grid_axis` under `jax.vmap`. ValueError or TypeError for
    a grid that is not 1-3 sizes of 0 or more, a callable grid that raised, a batched call
    whose grid uses the batch axis, or a grid beyond `limits`."""
    grid, what = spec.grid, "grid"
    if isinstance(grid, MetaGrid):
        what = f"grid(meta) for config ({description})" if description else "grid(meta)"
        if spec.batch is not None:  # the grid sees the unbatched shapes
            meta = {name: jax.ShapeDtypeStruct(tuple(value.shape)[spec.batch.depth:], value.dtype)
                    if hasattr(value, "shape") and hasattr(value, "dtype") else value
                    for name, value in meta.items()}
        grid = normalize_grid(_callbacks.call(grid.fn, meta, what=what, given=meta,
                                              fix=f"Fix the grid function. {_META_FIX}"),
                              what=what)
    if spec.batch is not None:
        axis = spec.batch.axis
        if grid[axis] != 1:
            raise ValueError(
                f"batch_grid_axis={axis}, but the call's grid {grid} has {grid[axis]} programs "
                f"on axis {axis}. Under jax.vmap that axis counts the examples: leave it at 1 "
                f"in the grid, or name a free axis.")
        grid = grid[:axis] + (spec.batch.size,) + grid[axis + 1:]
    if limits is not None and (problem := launch_problem(limits, num_warps, grid)):
        raise ValueError(f"{what}={grid}: {problem}.")
    return grid


def zeroed_outputs(spec: KernelCallSpec, meta: dict[str, Any], n_outs: int) -> tuple[int, ...]:
    """The outputs one launch zeroes: `spec.zeroed_outputs`, evaluated on `meta` if callable."""
    zeroed = spec.zeroed_outputs
    if callable(zeroed):
        what = "zeroed_outputs(meta)"
        return _values.output_indices(
            _callbacks.call(zeroed, meta, what=what, given=meta,
                            fix=f"Fix the zeroed_outputs function. {_META_FIX}"),
            n_outs, what=what)
    return zeroed


@dataclasses.dataclass(frozen=True)
class Skipped:
    """A call that launches nothing (its grid has a 0): each output is zeros where `zeroed` lists
    it, else its aliased input, else empty."""

    grid: tuple[int, int, int]
    zeroed: tuple[int, ...]


def skipped(launches: Sequence[Launch], spec: KernelCallSpec, out_avals: tuple) -> Skipped:
    """The call skipped, where the grid of a launch has a 0. ValueError where the grids of some
    autotune configs have a 0 and others' not, or an output that is not empty is neither zeroed
    in every launch nor aliased to an input."""
    if not all([0 in launch.grid for launch in launches]):
        listed = "; ".join(f"config ({launch.description}): grid {launch.grid}"
                           for launch in launches)
        raise ValueError(
            f"Kernel {spec.kernel_name}: the grids of some autotune configs have a 0 and "
            f"others' not ({listed}). No program runs where a grid has a 0, and the autotuner "
            f"would time, and could pick, a config that writes nothing. Give every config a "
            f"grid that covers the problem (rounded up: triton.cdiv(n, meta['BLOCK'])), or "
            f"drop the configs whose grid is empty (prune_configs_by).")
    grid = launches[0].grid
    zeroed = set.intersection(*[set(launch.zeroed) for launch in launches])
    aliased = {o for _, o in spec.input_output_aliases}
    unwritten = [f"output {o} ({_spec.aval_text(aval)})" for o, aval in enumerate(out_avals)
                 if o not in zeroed | aliased and 0 not in aval.shape]
    if unwritten:
        raise ValueError(
            f"Kernel {spec.kernel_name}: its grid {grid} has a 0, so no program runs (Triton's "
            f"launcher skips such a launch) and nothing writes {', '.join(unwritten)}. List "
            f"the output in zeroed_outputs to get zeros, alias it to an input with "
            f"input_output_aliases to get the input's values, or give it a size of 0 where "
            f"the problem is empty.")
    return Skipped(grid, tuple(sorted(zeroed)))


def launches(spec: KernelCallSpec, in_avals: tuple, out_avals: tuple, site: LaunchSite,
             types: _spec.ArgumentTypes | None = None) -> list[Launch]:
    """The launches of `spec` on `site`, in the order jaxlib should try them: per launch
    configuration that can launch there (each checked where a config or a heuristic set it),
    its warps, grid, outputs to zero and arguments laid onto the kernel's parameters. `types`:
    the call's values and metaparameters as typed for the plan memo (None: typed here). Raises
    what the autotuner's configs and heuristics, `keep_launchable`, `launch_grid`,
    `zeroed_outputs` and `_layout.lay_out_arguments` raise.
    """
    unwrapped = spec.unwrapped
    jit_fn, kernel = unwrapped.jit_fn, spec.kernel_name
    # The call's own settings (triton_call checked them) and constexprs, and nothing else.
    own = unwrapped.autotuner is None and not unwrapped.heuristics
    named = named_args(jit_fn, spec.positional, in_avals, out_avals)
    param_names = set(jit_fn.arg_names)
    outside = unwrapped.heuristics[:unwrapped.heuristics_outside]
    inside = unwrapped.heuristics[unwrapped.heuristics_outside:]
    base = LaunchConfig(dict(spec.metaparams), spec.num_warps, spec.num_stages, spec.num_ctas,
                        dict(spec.options), "")
    if outside:  # most kernels have no heuristics
        config_keys = frozenset([key for config in getattr(unwrapped.autotuner, "configs", ())
                                 for key in config.kwargs])
        base = _autotuner.apply_heuristics(outside, base, named, kernel, param_names,
                                 site.compile_options, config_keys)
    if unwrapped.autotuner is None:
        pairs = [(None, base)]
    else:
        pairs = _autotuner.autotune_configs(unwrapped.autotuner, base, named, spec.by_keyword,
                                            kernel, param_names, site.compile_options)
    configs = []
    for triton_config, config in pairs:
        seen, positional = named, None
        hook = getattr(triton_config, "pre_hook", None)
        if hook is not None:
            descriptors = _hooks.run(hook, triton_config, {**named, **config.kwargs_view()},
                                     list(jit_fn.arg_names), kernel)
            if descriptors:
                positional = _hooks.reblocked(spec.positional, descriptors)
                seen = named_args(jit_fn, positional, in_avals, out_avals)
        if inside:
            config = _autotuner.apply_heuristics(inside, config, seen, kernel, param_names,
                                       site.compile_options)
        options = config.options
        if not own:  # what a config or a heuristic set, which triton_call never saw
            source = f"in autotune config ({config.description})" if config.description else ""
            _values.launch_settings(config.num_warps, config.num_stages, config.num_ctas,
                                    where=f"{source} of kernel {kernel}" if source
                                    else f"set by @triton.heuristics on kernel {kernel}")
            options = _values.compile_options(options, where=source)
        config = LaunchConfig(
            types.constexprs if own and types is not None
            else {k: _spec.plain_constexpr(v) for k, v in config.constexprs.items()},
            config.num_warps, config.num_stages, config.num_ctas or 1, options,
            config.description, positional=positional)
        # What a callable grid or zeroed_outputs receives, once the config is whole.
        config.meta.update({**seen, **config.kwargs_view()})
        configs.append(config)
    if site.first_config_only:
        configs = configs[:1]
    for config in configs:
        if config.num_ctas != 1:  # one CTA launches everywhere: only a cluster is asked about
            site.check_ctas(config.num_ctas)
    warps = [(config, config.num_warps or DEFAULT_NUM_WARPS) for config in configs]
    if site.limits is not None:
        warps = keep_launchable(
            warps, [launch_problem(site.limits, num_warps) for _, num_warps in warps],
            kernel=kernel)
    return [Launch(
        config=config,
        num_warps=num_warps,
        grid=launch_grid(spec, config.meta, description=config.description,
                         limits=site.limits, num_warps=num_warps),
        zeroed=zeroed_outputs(spec, config.meta, len(out_avals)),
        # Each parameter's dtype checked against the target's fp8 types as it is laid out.
        bound=_layout.lay_out_arguments(
            jit_fn, site.triton_backend,
            positional=spec.positional if config.positional is None else config.positional,
            in_avals=in_avals, out_avals=out_avals, constexprs=config.constexprs,
            fp8_types=site.fp8_types, target=site.name,
            types=None if types is None or config.positional is not None
            else types if own else _values.replaced(types, constexprs=config.constexprs)),
        jit_fn=jit_fn,
    ) for config, num_warps in warps]


def keep_launchable(items: Sequence[T], problems: Sequence[str | None], *, kernel: str) -> list[T]:
    """The items (one per launch config: tuples whose first element has the config's
    `description`) whose problem (why it cannot launch) is None; a ValueError naming each
    problem where none is left. jaxlib's route checks its launches again once compiled."""
    problems = list(zip(items, problems))
    kept = [item for item, problem in problems if problem is None]
    if len(items) == 1 and not kept:
        raise ValueError(f"Kernel {kernel} cannot launch: {problems[0][1]}.")
    if not kept:
        listed = "; ".join(f"config ({item[0].description}): {problem}"
                           for item, problem in problems)
        raise ValueError(f"Kernel {kernel}: no autotune config can launch. {listed}.")
    for item, problem in problems:
        if problem is not None:
            logger.debug("jax_triton_rocm: autotune config (%s) of kernel %s dropped: %s",
                         item[0].description, kernel, problem)
    return kept


def fitting(compiled: Sequence[T], limits: LaunchLimits, *, kernel: str) -> list[T]:
    """The (..., compiled kernel) items that fit `limits`, as `keep_launchable` keeps them."""
    return keep_launchable(
        compiled, [launch_problem(limits, compiled=item[-1]) for item in compiled], kernel=kernel)


def relaunch(planned: list[Launch], spec: KernelCallSpec, in_avals: tuple, out_avals: tuple,
             limits: LaunchLimits | None) -> list[Launch]:
    """`planned` (the launches of an earlier call with the same `_lowering.plan_key`) for this call:
    the grid (within `limits`, the target's), the outputs to zero, the runtime scalars and what a
    callable grid sees, as `launches` would give them (and raise)."""
    named = named_args(spec.unwrapped.jit_fn, spec.positional, in_avals, out_avals)
    relaunched = []
    for launch in planned:
        config = _values.replaced(launch.config, meta={**named, **launch.config.kwargs_view()})
        bound = launch.bound
        if any(source.kind == "scalar" for source in bound.sources):
            # Each runtime scalar's value from this call, whose `compile_view` is the one `bound`
            # was laid out for. Only top-level scalars change (a tuple's are part of
            # `compile_view` by value), each typed by the same annotation where it was declared.
            bound = _values.replaced(bound, sources=tuple(
                _layout.ArgSource("scalar", source.position, scalar=_spec.scalar(
                    spec.positional[source.position][1], what=f"argument {source.position}",
                    declared=source.scalar.triton_type if source.scalar.declared else None))
                if source.kind == "scalar" and not source.path else source
                for source in bound.sources))
        relaunched.append(_values.replaced(
            launch, config=config, bound=bound,
            grid=launch_grid(spec, config.meta, description=config.description, limits=limits,
                             num_warps=launch.num_warps),
            zeroed=zeroed_outputs(spec, config.meta, len(out_avals))))
    return relaunched
