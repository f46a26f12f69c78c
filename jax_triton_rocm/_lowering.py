"""The lowering of `triton_kernel_p`, shared by every vendor.

Data flow, top to bottom in this file: the compile target and what the plugin loads
(`resolve_target`) -> the launch configurations (`_configs.resolve`), within the target's launch
limits (`_limits`) -> per configuration, the arguments laid onto the kernel's parameters
(`_layout`) and compiled, all configurations at once, through the shared kernel cache
(`_parallel`, `_compile`), a plain kernel's plan kept for other shapes (`_plans`) -> per kernel,
the call as jaxlib loads it (`kernel_call`) -> encoded (`_proto`, `_opaque`) -> emitted (`emit`).

The platform's backend (`_backend.Backend`) answers the vendor questions on the way; this module
never asks which vendor it talks to. `_routes` chooses between this route (jaxlib's Triton call)
and XLA's own (`_xla_native`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import numpy as np

from jax_triton_rocm import (_checks, _choices, _compat, _compile, _configs, _globals, _kernel,
                             _layout, _limits, _opaque, _parallel, _plans, _proto, _state,
                             _target, _vendors)
from jax_triton_rocm._backend import Backend
from jax_triton_rocm._grid import normalize_grid

DEFAULT_NUM_WARPS = 4  # Triton's, for every backend


@dataclasses.dataclass(frozen=True)
class LoweredCall:
    """What a lowering produced, before it becomes MLIR (kept for tests and the prewarm)."""

    opaque: bytes
    serialized: bytes
    custom_call_target: str
    features: _compat.PluginFeatures
    target: _target.Target
    kernels: tuple[_compile.CompiledKernel, ...]
    calls: tuple[_proto.KernelCall, ...]
    aliases: tuple[tuple[int, int], ...] = ()
    undecided: _choices.Undecided | None = None


def resolve_target(backend: Backend, ctx: Any,
                   params: dict[str, Any]) -> tuple[_target.Target, _compat.PluginFeatures]:
    """The target to compile for, and what the jaxlib plugin that will load the kernel reads.

    Raises:
      RuntimeError: no plugin for the platform and no architecture named (says how to name one).
    """
    platform = backend.platform
    named = backend.call_target(params) or _target.named_arch(platform)
    features = _compat.plugin_features(platform)
    if features is None and named is None:
        vendor = _vendors.vendor(platform)
        example = vendor.example_arch
        raise RuntimeError(
            f"Lowering triton_call for platform '{platform}' needs JAX's {platform.upper()} "
            f"plugin, which is not installed: {vendor.install_hint}. To only "
            f"cross-compile (no GPU here), name the architecture: `with "
            f"jax_triton_rocm.target_arch({platform}='{example}'):` around the lowering, or "
            f"{_target.ENV_TARGET_ARCH}='{platform}={example}'.")
    features = features or _compat.assumed_features(platform)
    return named or _target.lowering_target(platform, ctx.module_context), features


def compile_options(backend: Backend, config: _configs.LaunchConfig,
                    params: dict[str, Any]) -> dict[str, Any]:
    """Options for `triton.compile`: the common ones and the backend's own where set.

    Other vendors' options are left out, as Triton's backends do.
    """
    options: dict[str, Any] = {
        "num_warps": config.num_warps or DEFAULT_NUM_WARPS,
        "num_ctas": config.num_ctas,
        "enable_fp_fusion": params["enable_fp_fusion"],
        "debug": params["debug"],
    }
    if config.num_stages is not None:
        options["num_stages"] = config.num_stages
    options.update({name: config.options[name] for name in backend.compile_options
                    if config.options.get(name) is not None})
    return options


def _launch_configs(backend: Backend, unwrapped: _kernel.Unwrapped, target: _target.Target,
                    params: dict[str, Any], in_avals: tuple, out_avals: tuple) -> list:
    """The call's launch configurations that can launch on `target` (`_limits`)."""
    configs = _configs.resolve(
        unwrapped, metaparams=dict(params["metaparams"]), options=dict(params["options"]),
        num_warps=params["num_warps"], num_stages=params["num_stages"],
        num_ctas=params["num_ctas"], positional=params["positional"], in_avals=in_avals,
        out_avals=out_avals)
    for config in configs:
        backend.check_launch(target, config.num_ctas)
    limits = backend.launch_limits(target)
    return _limits.keep_launchable(
        configs, lambda c: limits.warps_problem(c.num_warps or DEFAULT_NUM_WARPS),
        _limits.config_description, kernel=_kernel.kernel_name(unwrapped.jit_fn))


def _compiled_configs(backend: Backend, unwrapped: _kernel.Unwrapped, target: _target.Target,
                      configs: list, params: dict[str, Any], in_avals: tuple,
                      out_avals: tuple) -> list[tuple]:
    """(config, job, compiled kernel) for each configuration that compiled and fits the target."""
    jit_fn = unwrapped.jit_fn
    triton_target = backend.triton_target(target)
    triton_backend = backend.triton_backend()
    jobs = []
    for config in configs:
        bound = _layout.lay_out_arguments(
            jit_fn, triton_backend, positional=params["positional"], in_avals=in_avals,
            out_avals=out_avals, constexprs=config.constexprs)
        jobs.append(_compile.make_job(
            jit_fn, triton_target, bound, compile_options(backend, config, params),
            gluon=jit_fn.is_gluon(), binary_key=backend.binary_key, asm_key=backend.asm_key))
    compiled = _parallel.kept_configs(configs, jobs, _parallel.compile_jobs(jobs))
    limits = backend.launch_limits(target)
    return _limits.keep_launchable(
        compiled, lambda item: limits.shared_problem(item[2].shared_mem_bytes),
        _limits.config_description, kernel=_kernel.kernel_name(jit_fn))


def check_compiled(compiled: _compile.CompiledKernel) -> None:
    """Raises if jaxlib cannot launch `compiled` as Triton built it."""
    if compiled.profile_scratch_size:
        raise NotImplementedError(
            f"Kernel {compiled.name} was compiled with Triton's profiling instrumentation "
            f"(profile scratch of {compiled.profile_scratch_size} bytes), which jaxlib does "
            f"not allocate. Unset TRITON's instrumentation mode (TRITON_INSTRUMENTATION_MODE).")
    for flag in ("launch_cooperative_grid", "launch_pdl"):
        if compiled.metadata.get(flag):
            raise NotImplementedError(
                f"Kernel {compiled.name} needs a {flag.removeprefix('launch_')} launch, which "
                f"jaxlib's Triton launcher does not do. Compile without it.")


def kernel_image(backend: Backend, compiled: _compile.CompiledKernel, target: _target.Target,
                 features: _compat.PluginFeatures) -> _proto.KernelImage:
    """The compiled kernel as the installed jaxlib loads it."""
    check_compiled(compiled)
    if compiled.global_scratch_size and not features.global_scratch:
        raise NotImplementedError(
            f"Kernel {compiled.name} needs {compiled.global_scratch_size} bytes of Triton "
            f"global scratch memory, which this jaxlib {backend.platform} plugin "
            f"({features.detected_from}) does not allocate. Upgrade jax and its plugin to "
            f"0.11 or newer.")
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


def kernel_call(image: _proto.KernelImage, config: _configs.LaunchConfig,
                bound: _layout.BoundKernel, params: dict[str, Any], out_avals: tuple,
                limits: _limits.LaunchLimits) -> _proto.KernelCall:
    """One launch of `image`: the grid and the zeroed outputs evaluated for `config`."""
    grid_spec = params["grid"]
    if callable(grid_spec):
        what = (f"grid(meta) for config ({config.description})" if config.description
                else "grid(meta)")
        grid = normalize_grid(grid_spec(config.meta), what=what)
    else:
        what, grid = "grid", normalize_grid(grid_spec)
    if problem := limits.grid_problem(grid):
        raise ValueError(f"{what}={grid_spec if not callable(grid_spec) else grid}: {problem}.")
    zeroed = params["zeroed_outputs"]
    if callable(zeroed):
        zeroed = _checks.output_indices(zeroed(config.meta), len(out_avals),
                                        what="zeroed_outputs(meta)")
    return _proto.KernelCall(kernel=image, grid=grid,
                             params=_launch_params(bound, out_avals, set(zeroed)))


def _choose(backend: Backend, ctx: Any, target: _target.Target, compiled: list,
            calls: list, params: dict[str, Any]) -> tuple[list, _choices.Undecided | None]:
    """The configs to encode: the one remembered or forced (`_choices.pick`), else all of them.

    Returns (the (config, job, kernel) items kept, the call left undecided or None). A call
    lowered for no device here (cross-compiling) cannot have been tuned, and is left to jaxlib.
    """
    if len(compiled) == 1:
        return list(zip(compiled, calls)), None
    kind = _target.device_kind(backend.platform, ctx.module_context)
    if kind is None:
        return list(zip(compiled, calls)), None
    key = _choices.tune_key(
        platform=backend.platform, arch=target.arch, device_kind=kind,
        versions=(_compat.jaxlib_version(), _compat.triton_info().version),
        avals=tuple(ctx.avals_in) + tuple(ctx.avals_out), aliases=params["input_output_aliases"],
        configs=[(config.description, kernel.binary, call.grid, call.params)
                 for (config, _, kernel), call in zip(compiled, calls)])
    descriptions = tuple(config.description for config, _, _ in compiled)
    index = _choices.pick(key, descriptions)
    if index is None:
        kernel = _kernel.kernel_name(_kernel.unwrap(params["kernel"]).jit_fn)
        return list(zip(compiled, calls)), _choices.Undecided(key, descriptions, kernel)
    return [(compiled[index], calls[index])], None


def _encode(calls: list, configs: list, params: dict[str, Any], in_avals: tuple,
            kernel: str) -> tuple[bytes, str]:
    """The serialized call and its custom-call target: one kernel call, or an autotuned one."""
    name = params["name"] or kernel
    if len(calls) == 1:
        serialized = _proto.encode_call(calls[0], name=name, metadata=params["serialized_metadata"])
        return serialized, _compat.FFI_TARGET
    # jaxlib compares buffers[input] with buffers[output] in its list of all buffers
    # (operands, then results), so the output's index counts the operands before it.
    aliases = [_proto.Alias(i, len(in_avals) + o, _size_bytes(in_avals[i]))
               for i, o in params["input_output_aliases"]]
    serialized = _proto.encode_autotuned_call(
        [(call, config.description) for call, config in zip(calls, configs)], aliases,
        call_name=f"{name} ({kernel})", name=name, metadata=params["serialized_metadata"])
    return serialized, _compat.autotuned_call_target()


def lower_call(backend: Backend, ctx: Any, params: dict[str, Any]) -> LoweredCall:
    """Compiles and encodes one `triton_kernel_p` equation (no MLIR is emitted here).

    Lowering the same call again (a new `jit` of a cached kernel, a retrace) encodes nothing
    anew: the result is kept in `_state.LOWERED_CALLS`.

    The key covers the target, the plugin's features, the avals, every parameter (the kernel by
    identity), the current values of the globals the kernel reads, and the settings read from
    the environment at lowering; a parameter that cannot be hashed just skips the memo.
    """
    target, features = resolve_target(backend, ctx, params)
    unwrapped = _kernel.unwrap(params["kernel"])
    key = (backend.platform, target, features, tuple(ctx.avals_in), tuple(ctx.avals_out),
           tuple((k, id(v) if k == "kernel" else v) for k, v in sorted(params.items())),
           _globals.global_values(unwrapped.jit_fn), backend.lowering_settings(),
           os.environ.get(_compat.ENV_AUTOTUNE_TARGET), _choices.lowering_token())
    try:
        entry = _state.LOWERED_CALLS.get(key)
    except TypeError:  # an unhashable parameter (a grid in a list, say): no memo
        entry = (params["kernel"], _lower_call(backend, ctx, params, target, features, unwrapped))
    if entry is None:
        lowered = _lower_call(backend, ctx, params, target, features, unwrapped)
        entry = _state.LOWERED_CALLS[key] = (params["kernel"], lowered)
    _choices.note_undecided(entry[1].undecided)
    return entry[1]


def _lower_call(backend: Backend, ctx: Any, params: dict[str, Any], target: _target.Target,
                features: _compat.PluginFeatures, unwrapped: _kernel.Unwrapped) -> LoweredCall:
    in_avals, out_avals = tuple(ctx.avals_in), tuple(ctx.avals_out)

    def make_plan() -> list[_plans.Planned]:
        configs = _launch_configs(backend, unwrapped, target, params, in_avals, out_avals)
        return [_plans.Planned(config, job.bound, kernel,
                               kernel_image(backend, kernel, target, features))
                for config, job, kernel in _compiled_configs(
                    backend, unwrapped, target, configs, params, in_avals, out_avals)]

    key = _plans.plan_key(backend.platform, unwrapped, params,
                          (target, features, backend.lowering_settings()), in_avals, out_avals)
    planned = _plans.reuse_or_make(make_plan, key, params, unwrapped.jit_fn, in_avals, out_avals)
    calls = []
    for item in planned:
        if params["debug"]:
            print(f"jax_triton_rocm: {item.kernel.name} for {target.arch}\n--- TTIR ---\n"
                  f"{item.kernel.ttir}\n--- {backend.asm_key.upper()} ---\n{item.kernel.asm}")
        calls.append(kernel_call(item.image, item.config, item.bound, params, out_avals,
                                 backend.launch_limits(target)))
    compiled = [(item.config, item.bound, item.kernel) for item in planned]
    chosen, undecided = _choose(backend, ctx, target, compiled, calls, params)
    serialized, custom_call_target = _encode(
        [call for _, call in chosen], [config for (config, _, _), _ in chosen], params, in_avals,
        _kernel.kernel_name(unwrapped.jit_fn))
    return LoweredCall(
        opaque=_opaque.compress(serialized, [_proto.kernel_bytes(call.kernel)
                                             for _, call in chosen]),
        serialized=serialized,
        custom_call_target=custom_call_target,
        features=features,
        target=target,
        kernels=tuple(kernel for (_, _, kernel), _ in chosen),
        calls=tuple(call for _, call in chosen),
        aliases=tuple(params["input_output_aliases"]),
        undecided=undecided,
    )


def _size_bytes(aval: Any) -> int:
    return int(math.prod(aval.shape)) * np.dtype(aval.dtype).itemsize


def _launch_params(bound: _layout.BoundKernel, out_avals: tuple,
                   zeroed: set[int]) -> tuple[_proto.Param, ...]:
    params = []
    specs = dict(bound.specializations)
    for source in bound.sources:
        if source.kind == "scalar":
            params.append(_proto.Param(source.scalar.proto_kind, source.scalar.value))
            continue
        divisibility = 16 if "D" in specs.get(source.position, "") else 0
        zero = _size_bytes(out_avals[source.index]) if (
            source.kind == "output" and source.index in zeroed) else 0
        params.append(_proto.Param("array", bytes_to_zero=zero, ptr_divisibility=divisibility))
    return tuple(params)


def emit(ctx: Any, operands: tuple, lowered: LoweredCall):
    """Emits the custom call: typed FFI with an `opaque` attribute, or the legacy target."""
    from jax import ffi

    operand_output_aliases = dict(lowered.aliases)
    if lowered.custom_call_target == _compat.FFI_TARGET:
        rule = ffi.ffi_lowering(lowered.custom_call_target,
                                operand_output_aliases=operand_output_aliases)
        return rule(ctx, *operands, opaque=lowered.opaque)
    rule = ffi.ffi_lowering(lowered.custom_call_target, api_version=2,
                            backend_config=lowered.opaque,
                            operand_output_aliases=operand_output_aliases)
    return rule(ctx, *operands)
