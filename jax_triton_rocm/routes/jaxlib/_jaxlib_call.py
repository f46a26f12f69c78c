"""jaxlib's Triton custom call, the route every vendor shares (`ROUTE`), as the lowering shell
(`routes._lowering`) asks it: where the call runs, its launches compiled and imaged (`build`),
the call encoded (`finish`, `_proto`, `_tma`) and emitted. The platform's backend answers the
vendor questions: this module never asks which vendor it talks to. docs/design.md, "One call,
top-down, on each GPU route".
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _compat, _env, _state
from jax_triton_rocm.compile import _compile, _writes
from jax_triton_rocm.plan import _plan, _trampoline
from jax_triton_rocm.routes import _arch, _choices, _lowering
from jax_triton_rocm.routes.jaxlib import _proto, _tma
from jax_triton_rocm.checks import _kinds, _misplaced
from jax_triton_rocm.kernel._spec import KernelCallSpec

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext
    from jax_triton_rocm.backends._backend import ArchAnswers, Backend

logger = logging.getLogger("jax_triton_rocm")


@dataclasses.dataclass(frozen=True)
class LoweredCall:
    """What a lowering produced, before it becomes MLIR (kept for tests and the prewarm)."""

    opaque: bytes
    serialized: bytes
    custom_call_name: str
    features: _vendors.PluginFeatures
    arch: _vendors.GpuArch
    kernels: tuple[_compile.CompiledKernel, ...]
    calls: tuple[_proto.KernelCall, ...]
    aliases: tuple[tuple[int, int], ...] = ()
    undecided: _choices.Undecided | None = None
    launches: tuple[_plan.Launch, ...] = ()  # as planned (the user's kernel's layout)
    has_side_effect: bool = False
    cost_estimate: tuple[tuple[str, int], ...] | None = None


def compile_jobs(backend: Backend, spec: KernelCallSpec, answers: ArchAnswers,
                 launches: list[_plan.Launch], n_inputs: int,
                 record: dict) -> tuple[list[_plan.Launch], list[_compile.CompileJob]]:
    """`launches` as jaxlib launches them (`_trampoline.for_jaxlib`), and their compile jobs:
    what `plan` compiles, and what a trace starts early (`routes._lowering.start_compiles`)."""
    ordered = [_trampoline.for_jaxlib(spec.unwrapped, launch, n_inputs, record)
               for launch in launches]
    return ordered, _compile.launch_jobs(ordered, spec, backend, answers, record)


def emit(ctx: LoweringRuleContext, operands: tuple, lowered: LoweredCall):
    """Emits the custom call: typed FFI with an `opaque` attribute, or the legacy target."""
    from jax import ffi

    typed = lowered.custom_call_name == _compat.FFI_CALL_NAME
    rule = ffi.ffi_lowering(lowered.custom_call_name,
                            operand_output_aliases=dict(lowered.aliases),
                            has_side_effect=lowered.has_side_effect,
                            **({} if typed else {"api_version": 2,
                                                 "backend_config": lowered.opaque}))
    if typed:
        attributes = {} if lowered.cost_estimate is None else {
            "cost_estimate_json": json.dumps(dict(lowered.cost_estimate), sort_keys=True)}
        return rule(ctx, *operands, opaque=lowered.opaque, **attributes)
    if lowered.cost_estimate is not None:  # the legacy target has no attributes to carry it
        logger.debug("jax_triton_rocm: cost_estimate dropped: %s carries no attributes",
                     lowered.custom_call_name)
    return rule(ctx, *operands)


def start_compiles(backend: Backend, spec: KernelCallSpec, arch: _vendors.GpuArch,
                   in_avals: tuple, out_avals: tuple) -> None:
    """Starts, at trace time, the compiles jaxlib's route makes when it lowers the call for
    `arch` (the launches `_lowering._lower_uncached` plans, and their `compile_jobs`), and keeps
    the launches for that lowering (`_state.TRACED_LAUNCHES`); raises what they raise. A plain
    kernel with a plan kept for another shape starts nothing: its lowering compiles nothing."""
    record = _state.KERNEL_RECORDS.record(spec.kernel)
    if (key := _lowering.plan_key(spec, in_avals, out_avals)) is not None:
        with _state.LOCKS.guard:
            if any([kept == key for _, kept in record.get(_state.PLANS, {})]):
                return
    answers = backend.answers(arch)
    launches = _plan.launches(spec, in_avals, out_avals, answers.launch_site, spec.types)
    if any([0 in launch.grid for launch in launches]):  # no program runs: nothing to compile
        return
    _, jobs = compile_jobs(backend, spec, answers, launches, len(in_avals), record)
    _compile.start_compiles(jobs)
    _state.TRACED_LAUNCHES.put((spec, in_avals, out_avals, arch.platform, arch.arch), launches,
                               record=record)


class JaxlibRoute(_lowering.Route):
    """jaxlib's Triton call, typed FFI or the legacy target, as the lowering shell asks it."""

    name = "jaxlib"

    def where(self, backend: Backend, ctx: LoweringRuleContext, spec: KernelCallSpec,
              record: dict, settings: _env.LoweringSettings | None) -> _lowering.Placed:
        """Where the call runs, with the `settings` the lowering read at its top (None: read
        here)."""
        arch, features, devices, exporting = _arch.placement(backend, ctx, spec)
        settings = settings or _env.lowering_settings(backend.lowering_variables)
        graph = _compile.call_graph_key(spec, record)
        call_name = _compat.plain_call_name(settings, exporting=exporting)
        # As plain values: hashed without a call per field.
        place = (backend.platform, dataclasses.astuple(arch),
                 None if devices is None else dataclasses.astuple(devices),
                 dataclasses.astuple(features), graph, settings.variables)
        return _lowering.Placed(arch, place, (place, exporting, call_name), devices, features,
                                settings, call_name)

    def build(self, backend: Backend, spec: KernelCallSpec, placed: _lowering.Placed,
              answers: ArchAnswers, launches: list[_plan.Launch], in_avals: tuple,
              out_avals: tuple, record: dict) -> tuple[list[tuple], list[_plan.Launch]]:
        """(launch as planned, launch as jaxlib launches it, compiled kernel, image) per launch
        that compiled and fits the architecture, and those launches. Each image is kept by the
        binary and what loads it (`_state.KERNEL_IMAGES` says why)."""
        try:
            ordered, jobs = compile_jobs(backend, spec, answers, launches, len(in_avals), record)
            compiled = _compile.compiled_launches(ordered, jobs)
        except Exception as err:  # do the call's arguments line up with the kernel's parameters?
            _kinds.check(spec.unwrapped.jit_fn, launches[0].bound, in_avals, out_avals,
                         spec.kernel_name, _vendors.FRONT_END_PROBES, failed=err)
            raise
        as_planned = {id(in_order): launch for launch, in_order in zip(launches, ordered)}
        for in_order, _, kernel in compiled:  # what it writes, read from what it compiled to
            found = _writes.of_launch(kernel.ttir, in_order.bound, jit_fn=spec.unwrapped.jit_fn)
            if found is not None:
                _misplaced.check_writes(spec, as_planned[id(in_order)], *found, in_avals)
        fit = _plan.fitting(compiled, answers.launch_site.limits, kernel=spec.kernel_name)
        # Per process too: a path-delivered image names a file of this process (ROCm's).
        loads = (os.getpid(), dataclasses.astuple(placed.features),
                 placed.devices and placed.devices.arch, placed.settings.variables, spec.debug)
        made = [(as_planned[id(in_order)], in_order, kernel, _state.KERNEL_IMAGES.memo(
            (kernel.key, loads), functools.partial(
                _proto.kernel_image, backend, kernel, answers, placed.features,
                devices=placed.devices, with_ttir=spec.debug,
                keep_ptx_text=placed.settings.keep_ptx_text), kernel=spec.unwrapped.jit_fn))
                for in_order, _, kernel in fit]
        return made, [launch for launch, *_ in made]

    def rebuild(self, made: list[tuple], launches: list[_plan.Launch], spec: KernelCallSpec,
                in_avals: tuple, record: dict) -> list[tuple]:
        """Each launch as jaxlib launches it, with the kept kernel and image."""
        return [(launch, _trampoline.for_jaxlib(spec.unwrapped, launch, len(in_avals), record),
                 kernel, image) for launch, (_, _, kernel, image) in zip(launches, made)]

    def finish(self, backend: Backend, ctx: LoweringRuleContext, spec: KernelCallSpec,
               placed: _lowering.Placed, made: list[tuple]) -> LoweredCall:
        """The launches `made` encoded: the one remembered or forced (`_choices.pick`), else all
        of them. A call lowered for no device here (cross-compiling) cannot have been tuned,
        and is left to jaxlib's autotuner."""
        in_avals, out_avals = tuple(ctx.avals_in), tuple(ctx.avals_out)
        if spec.debug:
            for _, _, kernel, _ in made:
                print(f"jax_triton_rocm: {kernel.name} for {placed.arch.arch}\n--- TTIR ---\n"
                      f"{kernel.ttir}\n--- {backend.asm_key.upper()} ---\n{kernel.asm}")
        # (launch, kernel, call) per launch; a tensor descriptor's parameters by `_tma`.
        chosen = [(launch, kernel, _proto.kernel_call(
            image, launch, out_avals, spec.input_output_aliases,
            functools.partial(_tma.descriptor_params, kernel, placed.features, placed.arch)))
            for _, launch, kernel, image in made]
        undecided = None
        kind = (None if len(chosen) == 1
                else _arch.device_kind(backend.platform, ctx.module_context))
        if kind is not None:
            key = _choices.tune_key(
                platform=backend.platform, arch=placed.arch.arch, device_kind=kind,
                versions=(_compat.jaxlib_version(), _compat.triton_info().version),
                avals=in_avals + out_avals, aliases=spec.input_output_aliases,
                configs=[(launch.description, kernel.binary, call.grid, call.params)
                         for launch, kernel, call in chosen])
            descriptions = tuple(launch.description for launch, _, _ in chosen)
            index = _choices.pick(key, descriptions)
            if index is None:
                undecided = _choices.Undecided(key, descriptions, spec.kernel_name)
            else:
                chosen = [chosen[index]]
        # jaxlib compares buffers[input] with buffers[output] in its list of all buffers
        # (operands, then results), so the output's index counts the operands before it.
        aliases = [] if len(chosen) == 1 else [
            _proto.Alias(i, len(in_avals) + o, _proto.size_bytes(in_avals[i]))
            for i, o in spec.input_output_aliases]
        encoded = _proto.encode(
            [(call, launch.config.description) for launch, _, call in chosen], aliases,
            name=spec.name, kernel_name=spec.kernel_name, metadata=spec.serialized_metadata,
            plain_call_name=placed.call_name)
        return LoweredCall(
            opaque=encoded.opaque,
            serialized=encoded.serialized,
            custom_call_name=encoded.custom_call_name,
            features=placed.features,
            arch=placed.arch,
            kernels=tuple([kernel for _, kernel, _ in chosen]),
            calls=tuple([call for _, _, call in chosen]),
            aliases=tuple(spec.input_output_aliases),
            undecided=undecided,
            launches=tuple([launch for launch, _, _ in chosen]),
            has_side_effect=spec.has_side_effect,
            cost_estimate=spec.cost_estimate,
        )

    def emit(self, backend: Backend, ctx: LoweringRuleContext, operands: Sequence[Any],
             lowered: LoweredCall, spec: KernelCallSpec) -> list:
        if backend.after_encode is not None:  # told before the call is emitted
            backend.after_encode(lowered, ctx, emit)
        return emit(ctx, operands, lowered)


ROUTE = _lowering.ROUTES[JaxlibRoute.name] = JaxlibRoute()
