"""The launches of one call: a spec, the operands' types and a target turned into what a route
launches. Every route asks this module, and nothing else decides these things:

- jaxlib's Triton call (`lowering._jaxlib_call`) compiles each launch and encodes them all;
- XLA's Triton call (`lowering._xla_native`) compiles its one launch;
- Triton's interpreter (`interpret._interpret`) runs the first;
- the `jax.vmap` rule (`api._batching`) checks a batched call's grid with `launch_grid`.

Per launch configuration (`_configs`): the number of warps (Triton's default where none is set),
the grid (a callable one evaluated and normalised; batched along `batch_grid_axis` under
`jax.vmap`), within the target's limits, the outputs to zero, and the arguments laid onto the
kernel's parameters (`_layout`). Configurations that cannot launch on the target are dropped as
Triton's autotuner drops them (`_limits.keep_launchable`); clusters (`num_ctas`) and fp8 dtypes
the target cannot take are refused before anything compiles. A callable grid or
`zeroed_outputs` that raises is named (`_callbacks`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax

from jax_triton_rocm.base import _values
from jax_triton_rocm.launch import (_callbacks, _configs, _kinds, _layout, _limits, _nested,
                                    _types)
from jax_triton_rocm.launch._grid import normalize_grid
from jax_triton_rocm.launch._spec import KernelCallSpec

DEFAULT_NUM_WARPS = 4  # Triton's, for every backend


@dataclasses.dataclass(frozen=True)
class LaunchTarget:
    """What the plan needs to know of where the launches run.

    Attributes:
      triton_backend: Triton's compiler backend class (it parses specialisation attributes).
      limits: what a block and a grid may use there; None where nothing is checked.
      check_ctas: raises if clusters of that many CTAs cannot launch there.
      first_config_only: launch the first configuration only (no timing happens there).
      name: the target as messages name it ("sm_90").
      fp8_types: Triton's fp8 types the target's compiler takes ("fp8e4nv", ...); None where
        any is taken.
    """

    triton_backend: Any
    limits: _limits.LaunchLimits | None
    check_ctas: Callable[[int], None] = lambda num_ctas: None
    first_config_only: bool = False
    name: str = "the host"
    fp8_types: tuple[str, ...] | None = None


def gpu_target(backend: Any, target: Any) -> LaunchTarget:
    """What the plan needs of a GPU target (`backends._backend.Target`), as its backend answers
    it (`backends._backend.Backend`)."""
    return LaunchTarget(backend.triton_backend(), backend.launch_limits(target),
                        functools.partial(backend.check_launch, target), name=target.arch,
                        fp8_types=backend.fp8_types(target))


def interpreter_target() -> LaunchTarget:
    """The host, where Triton's interpreter runs the first configuration, unchecked."""
    from triton.backends.compiler import BaseBackend

    return LaunchTarget(BaseBackend, None, first_config_only=True)


@dataclasses.dataclass(frozen=True)
class Launch:
    """One launch of the kernel.

    Attributes:
      config: the launch configuration (constexprs, settings, what a callable grid saw).
      num_warps: warps per program (the configuration's, else Triton's default).
      grid: three program counts, within the target's limits.
      zeroed: output indices zeroed before the launch.
      bound: the arguments laid onto the parameters of `jit_fn`.
      jit_fn: the function to compile: the call's kernel, or a route's trampoline around it
        (`_trampoline`).
    """

    config: _configs.LaunchConfig
    num_warps: int
    grid: tuple[int, int, int]
    zeroed: tuple[int, ...]
    bound: _layout.BoundKernel
    jit_fn: Any

    @property
    def description(self) -> str:
        """The configuration as jaxlib's autotuner shows it ("" for a plain call)."""
        return self.config.description


def _unbatched_meta(meta: dict[str, Any], depth: int) -> dict[str, Any]:
    """`meta` with the `depth` leading batch dimensions taken off every array's shape."""
    return {name: jax.ShapeDtypeStruct(tuple(value.shape)[depth:], value.dtype)
            if hasattr(value, "shape") and hasattr(value, "dtype") else value
            for name, value in meta.items()}


_META_FIX = ("It receives the kernel's arguments by name (arrays as their shape and dtype), the "
             "constexprs and the launch settings set by the call or the config.")


def launch_grid(spec: KernelCallSpec, meta: dict[str, Any], *, num_warps: int,
                description: str = "",
                limits: _limits.LaunchLimits | None = None) -> tuple[int, int, int]:
    """The grid of one launch of `num_warps` warps per program: `spec.grid`, evaluated on `meta`
    when callable (a batched call's grid sees the unbatched shapes), batched along
    `batch_grid_axis` under `jax.vmap`.

    Raises:
      ValueError / TypeError: a grid that is not 1-3 positive sizes, a callable grid that
        raised (`_callbacks.call`), a batched call whose grid uses the batch axis, or a grid
        beyond `limits`; each names the grid and the fix.
    """
    grid, what = spec.grid, "grid"
    if callable(grid):
        what = f"grid(meta) for config ({description})" if description else "grid(meta)"
        if spec.batch is not None:
            meta = _unbatched_meta(meta, spec.batch.depth)
        grid = normalize_grid(_callbacks.call(grid, meta, what=what, given=meta,
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
    if limits is not None and (problem := limits.grid_problem(grid, num_warps)):
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


def check_fp8_types(bound: _layout.BoundKernel, target: LaunchTarget, kernel: str) -> None:
    """Raises TypeError, naming the parameter, its dtype, the target and the fp8 dtypes it takes,
    if a buffer has an fp8 dtype the target's Triton compiler refuses."""
    if target.fp8_types is None:
        return
    for param, fp8 in ((p, t) for p, types in bound.signature.items()
                       for t in _nested.element_types(types)):
        if fp8 in _types.FP8_DTYPES and fp8 not in target.fp8_types:
            taken = ", ".join(f"{_types.FP8_DTYPES[t]} ({t})" for t in sorted(target.fp8_types)
                              if t in _types.FP8_DTYPES)
            raise TypeError(
                f"Kernel {kernel}'s parameter {param} is {_types.FP8_DTYPES[fp8]} (Triton's "
                f"{fp8}), which Triton does not compile for {target.name}; the fp8 dtypes it "
                f"takes there are {taken}. Cast the array to one of those (x.astype(...)), or "
                f"compile for a target that has {_types.FP8_DTYPES[fp8]}.")


def launches(spec: KernelCallSpec, in_avals: tuple, out_avals: tuple,
             target: LaunchTarget) -> list[Launch]:
    """The launches of `spec` on `target`, in the order jaxlib should try them.

    Raises:
      ValueError: no configuration can launch on the target (each one's reason named), or a
        grid or zeroed outputs that are not valid (`launch_grid`, `zeroed_outputs`).
      TypeError / NotImplementedError: as `_configs.resolve` and `_layout.lay_out_arguments`.
    """
    configs = _configs.resolve(spec, in_avals, out_avals)
    if target.first_config_only:
        configs = configs[:1]
    for config in configs:
        target.check_ctas(config.num_ctas)
    warps = [(config, config.num_warps or DEFAULT_NUM_WARPS) for config in configs]
    if target.limits is not None:
        warps = _limits.keep_launchable(
            warps, lambda item: target.limits.warps_problem(item[1]), _limits.config_description,
            kernel=spec.kernel_name)
    planned = [Launch(
        config=config,
        num_warps=num_warps,
        grid=launch_grid(spec, config.meta, description=config.description,
                         limits=target.limits, num_warps=num_warps),
        zeroed=zeroed_outputs(spec, config.meta, len(out_avals)),
        bound=_layout.lay_out_arguments(
            spec.unwrapped.jit_fn, target.triton_backend,
            positional=spec.positional if config.positional is None else config.positional,
            in_avals=in_avals, out_avals=out_avals, constexprs=config.constexprs),
        jit_fn=spec.unwrapped.jit_fn,
    ) for config, num_warps in warps]
    # Every config gives each parameter the same kind and dtype: the first launch speaks for all.
    check_fp8_types(planned[0].bound, target, spec.kernel_name)
    _kinds.check(spec.unwrapped.jit_fn, planned[0].bound, in_avals, out_avals, spec.kernel_name)
    return planned


def plan_key(spec: KernelCallSpec, in_avals: tuple, out_avals: tuple) -> tuple | None:
    """What decides a plain kernel's launches, but for the shapes and the runtime scalars'
    values; None for a kernel with an autotuner or heuristics (they see shapes and values).

    A new length or batch size changes no configuration, layout or binary of a plain kernel, only
    its grid, the scalars it receives and what a callable grid or `zeroed_outputs` sees: `relaunch`
    refills those. The key holds the kernel (by identity), the positional entries as they compile
    (`_types.compile_view`), the dtypes and which arrays are 0-d, the metaparameters (by exact
    value) and every setting that reaches the compiler.

    Raises:
      TypeError: a value that cannot be hashed (the caller then keeps no plan).
    """
    unwrapped = spec.unwrapped
    if unwrapped.autotuner is not None or unwrapped.heuristics:
        return None
    key = (spec.kernel_id, _types.compile_view(unwrapped.jit_fn, spec.positional), len(in_avals),
           tuple((not aval.shape, aval.dtype) for aval in (*in_avals, *out_avals)),
           spec.exact_values[1], spec.options, spec.backend_options,
           spec.num_warps, spec.num_stages, spec.num_ctas, spec.cuda_arch, spec.enable_fp_fusion,
           spec.debug)
    hash(key)
    return key


def relaunch(planned: list[Launch], spec: KernelCallSpec, in_avals: tuple, out_avals: tuple,
             limits: _limits.LaunchLimits | None) -> list[Launch]:
    """`planned` (the launches of an earlier call with the same `plan_key`) for this call: the
    grid (within `limits`, the target's), the outputs to zero, the runtime scalars and what a
    callable grid sees, as `launches` would give them.

    Raises:
      ValueError / TypeError: as `launch_grid` and `zeroed_outputs`.
    """
    named = _configs.named_args(spec.unwrapped.jit_fn, spec.positional, in_avals, out_avals)
    relaunched = []
    for launch in planned:
        config = _values.replaced(launch.config, meta={**named, **launch.config.kwargs_view()})
        relaunched.append(Launch(
            config=config,
            num_warps=launch.num_warps,
            grid=launch_grid(spec, config.meta, description=config.description, limits=limits,
                             num_warps=launch.num_warps),
            zeroed=zeroed_outputs(spec, config.meta, len(out_avals)),
            bound=_with_scalars(launch.bound, spec.positional),
            jit_fn=launch.jit_fn))
    return relaunched


def _with_scalars(bound: _layout.BoundKernel, positional: tuple) -> _layout.BoundKernel:
    """`bound` with each runtime scalar's value taken from `positional`, a call whose
    `compile_view` is the one `bound` was laid out for (so only the values differ)."""
    if not any(source.kind == "scalar" for source in bound.sources):
        return bound
    # A scalar inside a tuple is part of `compile_view` by value: only top-level ones change.
    sources = tuple(
        _layout.ArgSource("scalar", source.position, scalar=_types.retyped(
            source.scalar, positional[source.position][1], what=f"argument {source.position}"))
        if source.kind == "scalar" and not source.path else source for source in bound.sources)
    return _values.replaced(bound, sources=sources)
