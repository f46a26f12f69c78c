"""The lowering of `triton_kernel_p`, shared by every vendor.

Data flow: the call's static parameters -> launch configurations (`_configs`) -> for each, the
arguments bound to the kernel's parameters (`_kernel`) -> a compiled kernel from the shared cache
(`_compile`) -> a kernel image as the installed jaxlib loads it (the vendor's `kernel_image`) ->
the kernel call encoded (`_proto`) -> a custom call in the module being lowered.

A vendor module (`_cuda`, `_hip`) subclasses `VendorLowering` and answers only vendor questions:
which Triton target, which compile options, how the binary reaches jaxlib. The core never asks
"which vendor am I?".
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import Any

import numpy as np

from jax.interpreters import mlir

from jax_triton_rocm import (_checks, _compat, _compile, _configs, _kernel, _limits, _parallel,
                             _primitive, _proto, _target)
from jax_triton_rocm._configs import normalize_grid

logger = logging.getLogger("jax_triton_rocm")

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


class VendorLowering:
    """One vendor's answers to the core lowering. Subclasses set the class attributes.

    Attributes:
      platform: JAX's platform name ("cuda", "rocm").
      binary_key, asm_key: Triton's names for the binary and assembly outputs.
      vendor_options: compile options of this vendor that calls and configs may set.
    """

    platform: str = ""
    binary_key: str = ""
    asm_key: str = ""
    vendor_options: tuple[str, ...] = ()

    def triton_target(self, target: _target.Target) -> Any:
        """Triton's `GPUTarget` for `target` (arch and warp size)."""
        raise NotImplementedError

    def backend_class(self) -> Any:
        """Triton's compiler backend class (for parsing specialisation attributes)."""
        raise NotImplementedError

    def compile_options(self, target: _target.Target, config: _configs.LaunchConfig,
                        *, enable_fp_fusion: bool, debug: bool) -> dict[str, Any]:
        """Options for `triton.compile`, from a launch configuration.

        The common ones, plus the vendor's own knobs (`vendor_options`) where the call or the
        config set them; other vendors' knobs are left out, as Triton's backends do.
        """
        options: dict[str, Any] = {
            "num_warps": config.num_warps or DEFAULT_NUM_WARPS,
            "num_ctas": config.num_ctas,
            "enable_fp_fusion": enable_fp_fusion,
            "debug": debug,
        }
        if config.num_stages is not None:
            options["num_stages"] = config.num_stages
        for knob in self.vendor_options:
            if config.options.get(knob) is not None:
                options[knob] = config.options[knob]
        return options

    def embeds_binary(self, features: _compat.PluginFeatures) -> bool:
        """Whether the binary travels in `module_image` (else `ptx` carries the kernel)."""
        raise NotImplementedError

    def ptx_field(self, compiled: _compile.CompiledKernel) -> str:
        """The `ptx` field of a kernel whose binary is not embedded."""
        raise NotImplementedError

    def launch_warps(self, compiled: _compile.CompiledKernel) -> int:
        """The `num_warps` jaxlib needs to launch the block the kernel was compiled for."""
        return compiled.num_warps

    def capability(self, target: _target.Target) -> int:
        """The kernel's `compute_capability` field for `target`."""
        raise NotImplementedError

    def launch_limits(self, target: _target.Target) -> _limits.LaunchLimits:
        """What one block may use on `target` (threads, shared memory)."""
        raise NotImplementedError

    def kernel_image(self, compiled: _compile.CompiledKernel, target: _target.Target,
                     features: _compat.PluginFeatures) -> _proto.KernelImage:
        """The compiled kernel as the installed jaxlib loads it."""
        if compiled.global_scratch_size and not features.global_scratch:
            raise NotImplementedError(
                f"Kernel {compiled.name} needs {compiled.global_scratch_size} bytes of Triton "
                f"global scratch memory, which this jaxlib {self.platform} plugin "
                f"({features.detected_from}) does not allocate. Upgrade jax and its plugin to "
                f"0.11 or newer.")
        if self.embeds_binary(features):
            ptx, object_file = _proto.module_image_ptx(compiled.binary), compiled.binary
        else:
            ptx, object_file = self.ptx_field(compiled), None
        return _proto.KernelImage(
            name=compiled.name,
            num_warps=self.launch_warps(compiled),
            num_ctas=compiled.num_ctas,
            shared_mem_bytes=compiled.shared_mem_bytes,
            ptx=ptx,
            ttir=compiled.ttir,
            compute_capability=self.capability(target),
            object_file=object_file,
            global_scratch_size=compiled.global_scratch_size,
            global_scratch_align=compiled.global_scratch_align,
        )

    def after_encode(self, lowered: LoweredCall, ctx: Any, operands: tuple) -> None:
        """A hook run once the call is encoded, before it is emitted (the HIP prewarm)."""

    def explicit_target(self, params: dict[str, Any]) -> _target.Target | None:
        """A target the call itself names (e.g. `compute_capability` on CUDA)."""
        return _target.named_arch(self.platform)

    def check_compiled(self, compiled: _compile.CompiledKernel, target: _target.Target) -> None:
        """Raises if jaxlib cannot launch `compiled` correctly."""
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

    # The core.

    def features(self, named: _target.Target | None) -> _compat.PluginFeatures:
        features = _compat.plugin_features(self.platform)
        if features is not None:
            return features
        if named is not None:
            return _compat.assumed_features(self.platform)
        raise RuntimeError(
            f"Lowering triton_call for platform '{self.platform}' needs JAX's "
            f"{self.platform.upper()} plugin, which is not installed: "
            f"{_compat.PLUGIN_INSTALL_HINT[self.platform]}. To only cross-compile (no GPU here), "
            f"name the architecture: `with jax_triton_rocm.target_arch({self.platform}="
            f"'{_target.EXAMPLE_ARCH[self.platform]}'):` around the lowering, or "
            f"{_target.ENV_TARGET_ARCH}='{self.platform}={_target.EXAMPLE_ARCH[self.platform]}'.")

    def lower_call(self, ctx: Any, operands: tuple, params: dict[str, Any]) -> LoweredCall:
        """Compiles and encodes one `triton_kernel_p` equation (no MLIR is emitted here)."""
        named = self.explicit_target(params)
        features = self.features(named)
        target = named or _target.lowering_target(self.platform, ctx.module_context)
        unwrapped = _kernel.unwrap(params["kernel"])
        gluon = unwrapped.jit_fn.is_gluon()
        in_avals = tuple(ctx.avals_in)
        out_avals = tuple(ctx.avals_out)
        positional = params["positional"]
        metaparams = dict(params["metaparams"])
        configs = _configs.resolve(
            unwrapped,
            metaparams=metaparams,
            options=dict(params["options"]),
            num_warps=params["num_warps"],
            num_stages=params["num_stages"],
            num_ctas=params["num_ctas"],
            positional=positional,
            in_avals=in_avals,
            out_avals=out_avals,
        )
        kernel_name = _kernel.kernel_name(unwrapped.jit_fn)
        limits = self.launch_limits(target)
        configs = _limits.keep_launchable(
            configs, lambda c: limits.warps_problem(c.num_warps or DEFAULT_NUM_WARPS),
            _limits.config_description, kernel=kernel_name)
        triton_target = self.triton_target(target)
        backend = self.backend_class()

        def compile_job(config: _configs.LaunchConfig) -> _compile.CompileJob:
            bound = _kernel.lay_out_arguments(
                unwrapped.jit_fn, backend, positional=positional, in_avals=in_avals,
                out_avals=out_avals, constexprs=config.constexprs)
            options = self.compile_options(target, config,
                                           enable_fp_fusion=params["enable_fp_fusion"],
                                           debug=params["debug"])
            return _compile.make_job(unwrapped.jit_fn, triton_target, bound, options,
                                     gluon=gluon, binary_key=self.binary_key,
                                     asm_key=self.asm_key)

        jobs = [compile_job(config) for config in configs]
        configs, jobs, kernels = _kept_configs(configs, jobs, _parallel.compile_jobs(jobs))
        launchable = _limits.keep_launchable(
            list(zip(configs, jobs, kernels)),
            lambda item: limits.shared_problem(item[2].shared_mem_bytes),
            _limits.config_description, kernel=kernel_name)
        configs, jobs, kernels = (list(column) for column in zip(*launchable))
        calls = []
        for config, job, compiled in zip(configs, jobs, kernels):
            self.check_compiled(compiled, target)
            if params["debug"]:
                print(f"jax_triton_rocm: {compiled.name} for {target.arch}\n--- TTIR ---\n"
                      f"{compiled.ttir}\n--- {self.asm_key.upper()} ---\n{compiled.asm}")
            grid_spec = params["grid"]
            what = "grid" if not callable(grid_spec) else (
                f"grid(meta) for config ({config.description})" if config.description
                else "grid(meta)")
            grid = normalize_grid(grid_spec(config.meta) if callable(grid_spec) else grid_spec,
                                  what=what)
            if problem := limits.grid_problem(grid):
                raise ValueError(f"{what}={grid_spec if not callable(grid_spec) else grid}: "
                                 f"{problem}.")
            zeroed = params["zeroed_outputs"]
            if callable(zeroed):
                zeroed = _checks.output_indices(zeroed(config.meta), len(out_avals),
                                                what="zeroed_outputs(meta)")
            calls.append(_proto.KernelCall(
                kernel=self.kernel_image(compiled, target, features),
                grid=grid,
                params=_launch_params(job.bound, out_avals, set(zeroed)),
            ))
        name = params["name"] or _kernel.kernel_name(unwrapped.jit_fn)
        if len(calls) == 1:
            serialized = _proto.encode_call(calls[0], name=name,
                                            metadata=params["serialized_metadata"])
            custom_call_target = _compat.FFI_TARGET
        else:
            # jaxlib compares buffers[input] with buffers[output] in its list of all buffers
            # (operands, then results), so the output's index counts the operands before it.
            aliases = [_proto.Alias(i, len(in_avals) + o, _size_bytes(in_avals[i]))
                       for i, o in params["input_output_aliases"]]
            serialized = _proto.encode_autotuned_call(
                [(call, config.description) for call, config in zip(calls, configs)],
                aliases,
                call_name=f"{name} ({_kernel.kernel_name(unwrapped.jit_fn)})",
                name=name,
                metadata=params["serialized_metadata"],
            )
            custom_call_target = _compat.autotuned_call_target(features)
        return LoweredCall(
            opaque=_proto.compress(serialized),
            serialized=serialized,
            custom_call_target=custom_call_target,
            features=features,
            target=target,
            kernels=tuple(kernels),
            calls=tuple(calls),
            aliases=tuple(params["input_output_aliases"]),
        )

    def lower(self, ctx: Any, *operands: Any, **params: Any):
        """The MLIR lowering rule registered for this vendor's platform."""
        lowered = self.lower_call(ctx, operands, params)
        self.after_encode(lowered, ctx, operands)
        return emit(ctx, operands, lowered)


def _size_bytes(aval: Any) -> int:
    return int(math.prod(aval.shape)) * np.dtype(aval.dtype).itemsize


def _launch_params(bound: _kernel.BoundKernel, out_avals: tuple,
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


def _kept_configs(configs: list, jobs: list, results: list) -> tuple[list, list, list]:
    """The configs whose kernels compiled, with their jobs and kernels.

    As Triton's autotuner does, a config whose compile fails a `tl.static_assert` or ptxas is
    dropped when others remain. Any other error, or every config failing, raises the first
    config's error.
    """
    skippable = _configs.skippable_config_errors() if len(configs) > 1 else ()
    errors = [(c, r) for c, r in zip(configs, results) if isinstance(r, BaseException)]
    fatal = [(c, r) for c, r in errors if not isinstance(r, skippable)]
    if fatal or (errors and len(errors) == len(configs)):
        config, error = (fatal or errors)[0]
        if len(configs) > 1:
            error.add_note(f"jax_triton_rocm: in autotune config ({config.description})")
        raise error
    for config, error in errors:
        logger.info("jax_triton_rocm: autotune config (%s) dropped: %s: %s",
                    config.description, type(error).__name__, error)
    kept = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
    return [configs[i] for i in kept], [jobs[i] for i in kept], [results[i] for i in kept]


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


class EncodedCall:
    """A lowered call as a hashable primitive parameter (by identity), for `encoded_call_p`."""

    def __init__(self, lowered: LoweredCall) -> None:
        self.lowered = lowered


def _encoded_call_lowering(ctx: Any, *operands: Any, lowered: EncodedCall, out_avals: tuple):
    del out_avals
    return emit(ctx, operands, lowered.lowered)


# `encoded_call_p` emits a call some lowering already encoded (the HIP prewarm launches it).
for _platform in ("cuda", "rocm"):
    mlir.register_lowering(_primitive.encoded_call_p, _encoded_call_lowering, platform=_platform)
