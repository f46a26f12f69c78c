"""A plain kernel's compiled plan, reused when its call is lowered again at other shapes or
runtime scalar values.

A user whose batch or sequence length varies lowers the same call at a new shape each time: the
lowered-call memo (`_lowering.lower_call`) misses, while the kernel binary, its launch
configuration, its layout and its image for jaxlib stay the same, since the length is a runtime
scalar. The plan (configuration, layout, compiled kernel and image per launch) is kept here by
everything that decides it: the target and plugin, the kernel (by identity), the call's settings,
the dtypes of the arrays and whether each is 0-d, the positional scalars by how they compile
(`_layout.compile_view`: a runtime scalar by its Triton type and specialisation), the values of
the globals the kernel reads and the vendor's settings. A new shape then takes the plan, with the
scalars' new values and what a callable grid sees (`LaunchConfig.meta`) filled in; the grid, the
outputs to zero and the encoding are per call, as before.

Only plain kernels: an autotuner's pruning and heuristics see the shapes and scalar values, and
may pick other configurations for them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from jax_triton_rocm import _configs, _globals, _kernel, _layout, _state, _types

# The call's parameters read per launch only (the grid, the outputs to zero, the name and
# metadata, the aliases), and those the key sees through `compile_view` and the avals instead.
_PER_CALL = frozenset({"positional", "out_shapes", "grid", "name", "zeroed_outputs",
                       "serialized_metadata", "input_output_aliases"})


@dataclasses.dataclass(frozen=True)
class Planned:
    """One launch of a plan: its configuration, layout, compiled kernel and image for jaxlib."""

    config: _configs.LaunchConfig
    bound: _layout.BoundKernel
    kernel: Any  # _compile.CompiledKernel
    image: Any  # _proto.KernelImage


def plan_key(platform: str, unwrapped: _kernel.Unwrapped, params: dict[str, Any],
             decided: tuple, in_avals: tuple, out_avals: tuple) -> tuple | None:
    """What decides the plan of a call (see the module docstring); None where no plan is kept.

    `decided` holds what the lowering resolved beyond the parameters: the target, the plugin's
    features and the vendor's settings.
    """
    if unwrapped.autotuner is not None or unwrapped.heuristics:
        return None
    jit_fn = unwrapped.jit_fn
    return (platform, decided, len(in_avals),
            tuple((not aval.shape, aval.dtype) for aval in (*in_avals, *out_avals)),
            _layout.compile_view(jit_fn, params["positional"]),
            tuple((k, id(v) if k == "kernel" else v) for k, v in sorted(params.items())
                  if k not in _PER_CALL),
            _globals.global_values(jit_fn))


def reuse_or_make(make: Callable[[], list[Planned]], key: tuple | None, params: dict[str, Any],
                  jit_fn: Any, in_avals: tuple, out_avals: tuple) -> list[Planned]:
    """The plan under `key`, for this call; else `make()`, kept under `key` (a key that cannot
    be hashed keeps nothing)."""
    if key is None:
        return make()
    try:
        entry = _state.PLANS.get(key)
    except TypeError:  # an unhashable parameter (a grid in a list, say)
        return make()
    if entry is None:
        planned = make()
        _state.PLANS[key] = (params["kernel"], planned)  # the kernel kept: its id is in the key
        return planned
    return _for_call(entry[1], jit_fn, params["positional"], in_avals, out_avals)


def _for_call(planned: list[Planned], jit_fn: Any, positional: tuple, in_avals: tuple,
              out_avals: tuple) -> list[Planned]:
    """`planned` with this call's runtime scalar values, and its grid's view of the arguments."""
    named = _configs.named_args(jit_fn, positional, in_avals, out_avals)
    return [Planned(dataclasses.replace(item.config, meta={**named, **item.config.kwargs_view()}),
                    _with_scalars(item.bound, positional), item.kernel, item.image)
            for item in planned]


def _with_scalars(bound: _layout.BoundKernel, positional: tuple) -> _layout.BoundKernel:
    """`bound` with each runtime scalar's value taken from `positional` (its type and
    specialisation are the key's, so only the value differs)."""
    if not any(source.kind == "scalar" for source in bound.sources):
        return bound
    sources = tuple(
        _layout.ArgSource("scalar", source.position, scalar=_types.scalar(
            positional[source.position][1], what=f"argument {source.position}"))
        if source.kind == "scalar" else source for source in bound.sources)
    return dataclasses.replace(bound, sources=sources)
