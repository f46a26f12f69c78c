"""XLA's own route for Triton kernels: the custom call `__gpu$xla.gpu.triton`.

XLA takes Triton IR in the call's backend config, compiles it with its own Triton and launches it
as one of its own kernels, at the cost of XLA's kernels (jaxlib's Triton custom call costs about
twice that per launch). Facts from XLA's source (`xla/service/gpu/triton_call.cc`, and
`EmitTritonCustomCall` in XLA's GPU thunk emitter), the same on CUDA and ROCm:

- The backend config is a dictionary with `name` (the `tt.func` to launch), `ir` (MLIR text or
  bytecode), `num_warps`, `num_stages`, `grid_x`, `grid_y`, `grid_z`, all required; `debug` is
  written by Pallas and not read. There is no `num_ctas` (always 1), no shared-memory size, no
  zeroing of outputs, no compile options.
- The kernel receives one pointer per operand, then one per result, and nothing else: every
  scalar must be baked into the IR. Aliased operand/result pairs share a buffer; the kernel still
  receives both pointers.
- The block has `num_warps * threads_per_warp` threads, the warp width being the device's: 32 on
  NVIDIA, 64 on CDNA (gfx9), 32 on RDNA (gfx10-12). Triton compiled the IR for the same width, so
  `num_warps` passes unchanged (jaxlib's route assumes 64 on every AMD GPU and must rescale).

Which calls take it is `_route`'s rule. A call fits it when it is a plain Triton kernel (not
autotuned, not Gluon) whose parameters are all pointers once the call's scalars are compiled in
as constants, launched without the options XLA cannot pass, and whose IR this jaxlib's Triton
dialect parses. A call that does not fit takes jaxlib's route, with a debug log saying why (a
warning, once per kernel, when the IR does not parse: that is a version mismatch to report).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

# `custom_call` with a dictionary backend config is not public; Pallas uses the same helper, and
# it has the same signature in every supported jax (0.10.2-0.12).
from jax._src.interpreters import mlir

from jax_triton_rocm.base import _compat, _state
from jax_triton_rocm.compile import _compile, _globals
from jax_triton_rocm.launch import _kernel, _layout, _limits, _nested, _plan
from jax_triton_rocm.launch._spec import KernelCallSpec
from jax_triton_rocm.lowering import _target, _xla_ir

logger = logging.getLogger("jax_triton_rocm")

ENV_XLA_NATIVE = "JAX_TRITON_ROCM_XLA_NATIVE"
CUSTOM_CALL_TARGET = _compat.XLA_TRITON_TARGET


@dataclasses.dataclass(frozen=True)
class NativeCall:
    """What the custom call's backend config carries (see the module docstring)."""

    name: str
    ir: bytes
    num_warps: int
    num_stages: int
    grid: tuple[int, int, int]


def why_not(unwrapped: _kernel.Unwrapped, spec: KernelCallSpec) -> str | None:
    """Why a call cannot take the route, judged before any compile; None if it may."""
    if unwrapped.autotuner is not None:
        return "the kernel is autotuned (XLA's call launches one compiled configuration)"
    if unwrapped.jit_fn.is_gluon():
        return "it is a Gluon kernel (XLA compiles Triton IR only)"
    zeroed = spec.zeroed_outputs
    if callable(zeroed) or zeroed:
        return "zeroed_outputs is set (XLA's call does not zero outputs before the launch)"
    if spec.num_ctas != 1:
        return f"num_ctas={spec.num_ctas} (XLA's call launches one CTA per cluster)"
    if any(kind in _nested.NESTED_KINDS for kind, _ in spec.positional):
        return ("a parameter takes a tuple or a TensorDescriptor (XLA's call passes one pointer "
                "per operand and result)")
    if _layout.places_outputs(spec.positional) and len(
            [kind for kind, _ in spec.positional if kind == "output"]) < len(spec.out_shapes):
        return ("an output has no pointer of its own (an aliased output, a Ref's), and XLA's "
                "call passes one per result")
    options = dict(spec.options) | dict(spec.backend_options)
    if options:
        return (f"compile option(s) {', '.join(sorted(options))} (XLA compiles the IR with its "
                f"own options)")
    if not spec.enable_fp_fusion:
        return "enable_fp_fusion=False (XLA compiles the IR with its own options)"
    if spec.debug:
        return "debug=True (XLA compiles without Triton's debug mode)"
    if spec.serialized_metadata:
        return "serialized_metadata is set (XLA's call has no place for it)"
    return None


def lower(backend: Any, ctx: Any, operands: Sequence[Any], spec: KernelCallSpec) -> list | str:
    """Emits the call through XLA's Triton custom call (a call `why_not` lets through); returns
    its results, or why the compiled kernel does not fit after all (nothing emitted).

    `backend` is the platform's `_backend.Backend`: it answers the target, Triton's target and
    compile options, and the launch limits, exactly as for jaxlib's route.
    """
    call = native_call(backend, ctx, spec)
    if isinstance(call, str):
        return call
    if spec.cost_estimate is not None:
        logger.debug("jax_triton_rocm: cost_estimate dropped: XLA's Triton call carries none")
    return emit(ctx, operands, call, spec.input_output_aliases, spec.has_side_effect, spec.name)


def native_call(backend: Any, ctx: Any, spec: KernelCallSpec) -> NativeCall | str:
    """The call XLA gets, or why it does not fit; kept in `_state.LOWERED_CALLS` (beside
    jaxlib's route's calls) by what decides it: the target, the avals, the spec and what the
    kernel's call graph resolves to (`_globals.graph_key`). A lowering of the same call again compiles nothing anew."""
    # The same target, and the same error where none can be known, as jaxlib's route.
    target, _ = _target.resolve_target(backend, ctx, spec)
    in_avals, out_avals = tuple(ctx.avals_in), tuple(ctx.avals_out)
    key = (CUSTOM_CALL_TARGET, backend.platform, target, in_avals, out_avals, spec,
           _globals.graph_key(spec.unwrapped.jit_fn))
    try:
        entry = _state.LOWERED_CALLS.get(key)
    except TypeError:  # an unhashable parameter: no memo
        return _compiled_call(backend, spec, target, in_avals, out_avals)
    if entry is None:
        entry = _state.LOWERED_CALLS.put(key, (spec.kernel, _compiled_call(
            backend, spec, target, in_avals, out_avals)))
    return entry[1]


def _compiled_call(backend: Any, spec: KernelCallSpec, target: Any, in_avals: tuple,
                   out_avals: tuple) -> NativeCall | str:
    """Compiles the call with its scalars as constants; the call, or why it does not fit."""
    [launch] = _plan.launches(spec, in_avals, out_avals, _plan.gpu_target(backend, target))
    jit_fn = spec.unwrapped.jit_fn
    job = _compile.make_job(jit_fn, backend.triton_target(target),
                            scalars_as_constexprs(jit_fn, launch.bound),
                            backend.triton_options(launch, spec), gluon=False,
                            binary_key=backend.binary_key, asm_key=backend.asm_key)
    compiled = _compile.compile_job(job)
    problem = backend.launch_limits(target).shared_problem(compiled.shared_mem_bytes)
    if problem:
        return problem  # jaxlib's route raises it, with the kernel's name
    _limits.check_launch_features(compiled)
    if compiled.global_scratch_size:
        return (f"the kernel needs {compiled.global_scratch_size} bytes of Triton global scratch "
                f"memory, which not every XLA allocates for this call")
    ir = _xla_ir.checked_ir(compiled, len(in_avals) + len(out_avals),
                            opt_out=f"{ENV_XLA_NATIVE}=0")
    if isinstance(ir, str):
        return ir
    return NativeCall(name=compiled.name, ir=ir, num_warps=compiled.num_warps,
                      num_stages=int(compiled.metadata.get("num_stages") or 1), grid=launch.grid)


def scalars_as_constexprs(jit_fn: Any, bound: _layout.BoundKernel) -> _layout.BoundKernel:
    """`bound` with each runtime scalar compiled in as a constexpr of its value.

    XLA passes pointers only. The scalars are known when the call is traced, so the kernel is
    specialised to them: each distinct value compiles a kernel of its own.
    """
    names = list(jit_fn.arg_names)
    scalars = {s.position: s.scalar.value for s in bound.sources if s.kind == "scalar"}
    if not scalars:
        return bound
    signature = {name: ("constexpr" if i in scalars else bound.signature[name])
                 for i, name in enumerate(names) if name in bound.signature}
    constexprs = {**bound.constexprs, **{(i,): value for i, value in scalars.items()}}
    return _layout.BoundKernel(
        signature=signature,
        constexprs=constexprs,
        attrs={k: v for k, v in bound.attrs.items() if k[0] not in scalars},
        sources=tuple(s for s in bound.sources if s.kind != "scalar"),
        specializations=tuple((i, s) for i, s in bound.specializations if i not in scalars),
    )


def _layouts(avals: Sequence[Any]) -> list[list[int]]:
    """Row-major layouts: the kernel indexes every buffer as C-contiguous."""
    return [list(reversed(range(len(aval.shape)))) for aval in avals]


def emit(ctx: Any, operands: Sequence[Any], call: NativeCall,
         aliases: Sequence[tuple[int, int]], has_side_effect: bool = False, name: str = ""):
    """Emits `__gpu$xla.gpu.triton` as Pallas does (`pallas_call_registration.py`).

    XLA's backend config has no field for the call's `name` (its `name` is the `tt.func` to
    launch), so the call's name is a frontend attribute of the op, which HLO dumps show and
    `kernel_calls` reads back. (Not the op's location: JAX lowers a primitive into a private
    function once and inlines it, keeping the call site's location only.)
    """
    from jax._src.lib.mlir import ir

    backend_config = {
        "name": ir.StringAttr.get(call.name),
        "ir": ir.StringAttr.get(call.ir),
        "num_stages": mlir.i32_attr(call.num_stages),
        "num_warps": mlir.i32_attr(call.num_warps),
        "grid_x": mlir.i32_attr(call.grid[0]),
        "grid_y": mlir.i32_attr(call.grid[1]),
        "grid_z": mlir.i32_attr(call.grid[2]),
        "debug": ir.BoolAttr.get(False),
    }
    result_types = [ir.RankedTensorType.get(aval.shape, mlir.dtype_to_ir_type(aval.dtype))
                    for aval in ctx.avals_out]
    op = mlir.custom_call(
        CUSTOM_CALL_TARGET,
        result_types=result_types,
        operands=list(operands),
        backend_config=backend_config,
        api_version=4,
        operand_layouts=_layouts(ctx.avals_in),
        result_layouts=_layouts(ctx.avals_out),
        operand_output_aliases=dict(aliases),
        has_side_effect=has_side_effect,
    )
    op.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {_compat.XLA_CALL_NAME_ATTRIBUTE: ir.StringAttr.get(name or call.name)})
    return op.results
