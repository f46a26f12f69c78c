"""jaxlib's Triton custom call: the route every vendor shares.

Data flow, top to bottom: the compile target and what the plugin loads
(`_target.resolve_target`) -> the launches (`launch._plan`: configurations, warps, grids, zeroed
outputs, arguments laid onto the kernel's parameters) -> every launch compiled at once through
the shared kernel cache (`compile._parallel`, `compile._compile`) -> per kernel, the call as the
installed jaxlib loads it (`kernel_image`) -> the call encoded (`_proto`) -> a custom call in the
module (`emit`).

The platform's backend (`backends._backend.Backend`) answers the vendor questions on the way;
this module never asks which vendor it talks to. `_rules` chooses between this route and XLA's
own (`_xla_native`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from jax_triton_rocm.backends._backend import Backend, Target
from jax_triton_rocm.base import _compat, _state, _vendors
from jax_triton_rocm.compile import _compile, _globals, _parallel
from jax_triton_rocm.launch import _layout, _limits, _plan
from jax_triton_rocm.launch._spec import KernelCallSpec
from jax_triton_rocm.lowering import _choices, _proto, _target, _tma

logger = logging.getLogger("jax_triton_rocm")


@dataclasses.dataclass(frozen=True)
class LoweredCall:
    """What a lowering produced, before it becomes MLIR (kept for tests and the prewarm)."""

    opaque: bytes
    serialized: bytes
    custom_call_target: str
    features: _compat.PluginFeatures
    target: Target
    kernels: tuple[_compile.CompiledKernel, ...]
    calls: tuple[_proto.KernelCall, ...]
    aliases: tuple[tuple[int, int], ...] = ()
    undecided: _choices.Undecided | None = None
    has_side_effect: bool = False
    cost_estimate: tuple[tuple[str, int], ...] | None = None


def _compiled_launches(backend: Backend, spec: KernelCallSpec, target: Target,
                       launches: list[_plan.Launch]) -> list[tuple]:
    """(launch, job, compiled kernel) for each launch that compiled and fits the target."""
    jit_fn = spec.unwrapped.jit_fn
    triton_target = backend.triton_target(target)
    jobs = [_compile.make_job(
        jit_fn, triton_target, launch.bound, backend.triton_options(launch, spec),
        gluon=jit_fn.is_gluon(), binary_key=backend.binary_key, asm_key=backend.asm_key)
        for launch in launches]
    compiled = _parallel.kept_configs(launches, jobs, _parallel.compile_jobs(jobs))
    limits = backend.launch_limits(target)
    return _limits.keep_launchable(
        compiled, lambda item: limits.shared_problem(item[2].shared_mem_bytes),
        _limits.config_description, kernel=spec.kernel_name)


def kernel_image(backend: Backend, compiled: _compile.CompiledKernel, target: Target,
                 features: _compat.PluginFeatures) -> _proto.KernelImage:
    """The compiled kernel as the installed jaxlib loads it."""
    _limits.check_launch_features(compiled)
    if compiled.global_scratch_size and not features.global_scratch:
        raise NotImplementedError(
            f"Kernel {compiled.name} needs {compiled.global_scratch_size} bytes of Triton "
            f"global scratch memory, which this jaxlib {backend.platform} plugin "
            f"({features.detected_from}) does not allocate. Upgrade jax and its plugin to "
            f"0.11.1 or newer.")
    if backend.embeds_binary(features):
        ptx, object_file = _proto.module_image_ptx(compiled.binary), compiled.binary
    else:
        ptx, object_file = backend.ptx_field(compiled), None
    return _proto.KernelImage(
        name=compiled.name,
        num_warps=backend.launch_warps(compiled),
        num_ctas=compiled.num_ctas,
        shared_mem_bytes=compiled.shared_mem_bytes,
        ptx=ptx,
        ttir=compiled.ttir,
        compute_capability=backend.capability(target),
        object_file=object_file,
        global_scratch_size=compiled.global_scratch_size,
        global_scratch_align=compiled.global_scratch_align,
    )


def kernel_call(image: _proto.KernelImage, launch: _plan.Launch, out_avals: tuple,
                aliases: tuple[tuple[int, int], ...] = (),
                descriptors: Callable[..., list] | None = None) -> _proto.KernelCall:
    """One launch of `image`, as jaxlib's kernel call carries it; `descriptors` gives the
    parameters of the kernel's tensor descriptors (`_tma.descriptor_params`)."""
    return _proto.KernelCall(kernel=image, grid=launch.grid, params=_launch_params(
        launch.bound, out_avals, set(launch.zeroed), aliases, descriptors))


def _choose(backend: Backend, ctx: Any, spec: KernelCallSpec, target: Target, compiled: list,
            calls: list) -> tuple[list, _choices.Undecided | None]:
    """The launches to encode: the one remembered or forced (`_choices.pick`), else all of them.

    Returns ((launch, job, kernel), call) pairs, and the call left undecided or None. A call
    lowered for no device here (cross-compiling) cannot have been tuned, and is left to jaxlib.
    """
    pairs = list(zip(compiled, calls))
    if len(compiled) == 1:
        return pairs, None
    kind = _target.device_kind(backend.platform, ctx.module_context)
    if kind is None:
        return pairs, None
    key = _choices.tune_key(
        platform=backend.platform, arch=target.arch, device_kind=kind,
        versions=(_compat.jaxlib_version(), _compat.triton_info().version),
        avals=tuple(ctx.avals_in) + tuple(ctx.avals_out), aliases=spec.input_output_aliases,
        configs=[(launch.description, kernel.binary, call.grid, call.params)
                 for (launch, _, kernel), call in pairs])
    descriptions = tuple(launch.description for launch, _, _ in compiled)
    index = _choices.pick(key, descriptions)
    if index is None:
        return pairs, _choices.Undecided(key, descriptions, spec.kernel_name)
    return [pairs[index]], None


def _encode(calls: list, launches: list, spec: KernelCallSpec,
            in_avals: tuple) -> tuple[bytes, str]:
    """The serialized call and its custom-call target: one kernel call, or an autotuned one."""
    name = spec.name
    if len(calls) == 1:
        serialized = _proto.encode_call(calls[0], name=name, metadata=spec.serialized_metadata)
        return serialized, _compat.FFI_TARGET
    # jaxlib compares buffers[input] with buffers[output] in its list of all buffers
    # (operands, then results), so the output's index counts the operands before it.
    aliases = [_proto.Alias(i, len(in_avals) + o, _size_bytes(in_avals[i]))
               for i, o in spec.input_output_aliases]
    serialized = _proto.encode_autotuned_call(
        [(call, launch.description) for call, launch in zip(calls, launches)], aliases,
        call_name=f"{name} ({spec.kernel_name})", name=name, metadata=spec.serialized_metadata)
    return serialized, _compat.autotuned_call_target()


def lower_call(backend: Backend, ctx: Any, spec: KernelCallSpec) -> LoweredCall:
    """Compiles and encodes one `triton_kernel_p` equation (no MLIR is emitted here).

    Lowering the same call again (a new `jit` of a cached kernel, a retrace) encodes nothing
    anew: the result is kept in `_state.LOWERED_CALLS` (bounded: a call it forgot is encoded
    again).

    The key covers the target, the plugin's features, the avals, every parameter (the kernel by
    identity), the current values of the globals the kernel reads, and the settings read from
    the environment at lowering; a parameter that cannot be hashed just skips the memo.
    """
    target, features = _target.resolve_target(backend, ctx, spec)
    key = (backend.platform, target, features, tuple(ctx.avals_in), tuple(ctx.avals_out), spec,
           _globals.global_values(spec.unwrapped.jit_fn), backend.lowering_settings(),
           os.environ.get(_compat.ENV_AUTOTUNE_TARGET), _choices.lowering_token())
    try:
        entry = _state.LOWERED_CALLS.get(key)
    except TypeError:  # an unhashable parameter (a constexpr that hashes badly): no memo
        entry = (spec.kernel, _lower_call(backend, ctx, spec, target, features))
    if entry is None:
        lowered = _lower_call(backend, ctx, spec, target, features)
        entry = _state.LOWERED_CALLS.put(key, (spec.kernel, lowered))
    _choices.note_undecided(entry[1].undecided)
    return entry[1]


def _lower_call(backend: Backend, ctx: Any, spec: KernelCallSpec, target: Target,
                features: _compat.PluginFeatures) -> LoweredCall:
    in_avals, out_avals = tuple(ctx.avals_in), tuple(ctx.avals_out)
    launches = _plan.launches(spec, in_avals, out_avals, _plan.gpu_target(backend, target))
    compiled = _compiled_launches(backend, spec, target, launches)
    calls = []
    for launch, _, kernel in compiled:
        if spec.debug:
            print(f"jax_triton_rocm: {kernel.name} for {target.arch}\n--- TTIR ---\n"
                  f"{kernel.ttir}\n--- {backend.asm_key.upper()} ---\n{kernel.asm}")
        calls.append(kernel_call(
            kernel_image(backend, kernel, target, features), launch, out_avals,
            spec.input_output_aliases,
            _tma.descriptor_params(kernel, _vendors.vendor(backend.platform), features,
                                   target.arch)))
    chosen, undecided = _choose(backend, ctx, spec, target, compiled, calls)
    serialized, custom_call_target = _encode(
        [call for _, call in chosen], [launch for (launch, _, _), _ in chosen], spec, in_avals)
    return LoweredCall(
        opaque=_proto.compress(serialized),
        serialized=serialized,
        custom_call_target=custom_call_target,
        features=features,
        target=target,
        kernels=tuple(kernel for (_, _, kernel), _ in chosen),
        calls=tuple(call for _, call in chosen),
        aliases=tuple(spec.input_output_aliases),
        undecided=undecided,
        has_side_effect=spec.has_side_effect,
        cost_estimate=spec.cost_estimate,
    )


def _size_bytes(aval: Any) -> int:
    return int(math.prod(aval.shape)) * np.dtype(aval.dtype).itemsize


def _launch_params(bound: _layout.BoundKernel, out_avals: tuple, zeroed: set[int],
                   aliases: tuple[tuple[int, int], ...] = (),
                   descriptors: Callable[..., list] | None = None) -> tuple[_proto.Param, ...]:
    """The kernel call's parameters, in kernel order. An output to zero that has no pointer of
    its own is zeroed through the input it is aliased to (the same buffer).

    Raises:
      NotImplementedError: a zeroed output aliased to a TensorDescriptor's base.
    """
    params = []
    specs = dict(bound.specializations)
    own = {source.index for source in bound.sources if source.kind == "output"}
    zero_inputs = {i: o for i, o in aliases if o in zeroed and o not in own}
    n_descriptors = 0
    for source in bound.sources:
        if source.kind == "scalar":
            params.append(_proto.Param(source.scalar.proto_kind, source.scalar.value))
            continue
        if source.kind == "descriptor":
            if source.index in zero_inputs:
                raise NotImplementedError(
                    f"zeroed_outputs names output {zero_inputs[source.index]}, which is written "
                    f"through a TensorDescriptor; zero its base before the call instead.")
            params.extend(descriptors(source.descriptor, n_descriptors))
            n_descriptors += 1
            continue
        divisibility = 16 if "D" in specs.get(source.key, "") else 0
        if source.kind == "output":
            zeroes = source.index if source.index in zeroed else None
        else:
            zeroes = zero_inputs.get(source.index)
        zero = 0 if zeroes is None else _size_bytes(out_avals[zeroes])
        params.append(_proto.Param("array", bytes_to_zero=zero, ptr_divisibility=divisibility))
    return tuple(params)


def emit(ctx: Any, operands: tuple, lowered: LoweredCall):
    """Emits the custom call: typed FFI with an `opaque` attribute, or the legacy target."""
    from jax import ffi

    operand_output_aliases = dict(lowered.aliases)
    if lowered.custom_call_target == _compat.FFI_TARGET:
        rule = ffi.ffi_lowering(lowered.custom_call_target,
                                operand_output_aliases=operand_output_aliases,
                                has_side_effect=lowered.has_side_effect)
        attributes = {} if lowered.cost_estimate is None else {
            "cost_estimate_json": json.dumps(dict(lowered.cost_estimate), sort_keys=True)}
        return rule(ctx, *operands, opaque=lowered.opaque, **attributes)
    if lowered.cost_estimate is not None:  # the legacy target has no attributes to carry it
        logger.debug("jax_triton_rocm: cost_estimate dropped: %s carries no attributes",
                     lowered.custom_call_target)
    rule = ffi.ffi_lowering(lowered.custom_call_target, api_version=2,
                            backend_config=lowered.opaque,
                            operand_output_aliases=operand_output_aliases,
                            has_side_effect=lowered.has_side_effect)
    return rule(ctx, *operands)
