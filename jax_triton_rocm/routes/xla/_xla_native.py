"""XLA's own route for Triton kernels, taken only on request: the custom call
`__gpu$xla.gpu.triton`, whose Triton IR XLA compiles with the Triton built into jaxlib and
launches itself (`plan._trampoline.for_xla` adapts the kernel). A kernel whose IR this jaxlib
does not parse (warned once per kernel), or that does not take one pointer per buffer, takes
jaxlib's route, unless the call asked for XLA's (then it raises). docs/routes.md.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import logging
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from jax._src.interpreters import mlir
from jax._src.lib.mlir import ir

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _compat, _env, _values
from jax_triton_rocm.compile import _compile, _writes
from jax_triton_rocm.plan import _plan, _trampoline
from jax_triton_rocm.routes import _arch, _lowering
from jax_triton_rocm.routes._lowering import Unfit
from jax_triton_rocm.checks import _kinds, _misplaced
from jax_triton_rocm.kernel import _layout, _spec
from jax_triton_rocm.kernel._spec import KernelCallSpec

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext
    from jax_triton_rocm.backends._backend import ArchAnswers, Backend


@functools.cache
def xla_triton_dialect() -> bool:
    """Whether this jaxlib carries the Triton MLIR dialect XLA reads a kernel's IR with."""
    try:
        from jaxlib.triton import dialect  # noqa: F401
    except Exception as err:  # noqa: BLE001  (any failure means the route cannot be checked)
        logger.debug("jaxlib.triton.dialect did not import: %s", err)
        return False
    return True


def parse_ttir(text: str) -> Any:
    """The Triton IR `text` parsed and verified as XLA will, in a fresh context of this jaxlib;
    raises jaxlib's `MLIRError` (or ValueError) where it does not."""
    from jaxlib.triton import dialect

    context = ir.Context()
    dialect.register_dialect(context)
    with context, ir.Location.unknown():
        module = ir.Module.parse(text)
        module.operation.verify()
    return module


def checked_ir(compiled: _compile.CompiledKernel, n_pointers: int) -> bytes | Unfit:
    """The kernel's Triton IR as MLIR bytecode for XLA, or why XLA cannot take it (`Unfit`): IR
    that does not parse (warned), or a kernel that takes other than `n_pointers` pointers."""
    try:
        module = parse_ttir(compiled.ttir)
    except Exception as err:  # MLIRError has no public base class to name across jaxlibs
        # MLIR's text starts with a header and ends with notes.
        lines = [line.strip() for line in str(err).strip().splitlines()]
        said = " ".join([line for line in lines if line and not line.startswith("note:")][:2])
        unfit = Unfit(f"this jaxlib's Triton dialect cannot parse the IR that Triton "
                      f"{_compat.triton_info().version} wrote ({said[:300] or type(err).__name__})")
        warnings.warn(
            f"jax_triton_rocm: kernel {compiled.name} takes jaxlib's Triton call instead of "
            f"XLA's: {unfit.reason}. Use a Triton release whose IR this jaxlib reads "
            f"(docs/routes.md: 'Triton constructs that jaxlib does not parse'), or leave "
            f"{_env.ENV_XLA_NATIVE} unset for jaxlib's call, the default.",
            RuntimeWarning, stacklevel=2)
        return unfit
    for op in module.body.operations:
        if (op.operation.name == "tt.func"
                and ir.StringAttr(op.attributes["sym_name"]).value == compiled.name):
            types = [str(arg.type) for arg in op.regions[0].blocks[0].arguments]
            if len(types) != n_pointers or not all([t.startswith("!tt.ptr") for t in types]):
                return Unfit(f"its Triton IR takes ({', '.join(types)}), and XLA passes "
                             f"{n_pointers} pointer(s), one per operand and result")
            buffer = io.BytesIO()
            module.operation.write_bytecode(buffer)
            return buffer.getvalue()
    return Unfit(f"its Triton IR has no tt.func named {compiled.name}")


logger = logging.getLogger("jax_triton_rocm")

CUSTOM_CALL_NAME = _compat.XLA_TRITON_CALL_NAME


@dataclasses.dataclass(frozen=True)
class NativeCall:
    """What the custom call's backend config carries, and the operands the route adds: a
    zero-filled one per output in `zeroed`, then a 0-d one per scalar, divided by its scale."""

    name: str
    ir: bytes
    num_warps: int
    num_stages: int
    grid: tuple[int, int, int]
    scalars: tuple[_spec.Scalar, ...] = ()
    zeroed: tuple[int, ...] = ()
    scalar_scales: tuple[int, ...] = ()


def unfit_before_compile(spec: KernelCallSpec) -> Unfit | None:
    """Why the call cannot take the route, known before any compile, or None."""
    if not xla_triton_dialect():
        return Unfit("this jaxlib has no Triton dialect (jaxlib.triton) to read the kernel's IR "
                     "with, as XLA's call must")
    if spec.unwrapped.jit_fn.is_gluon():
        return Unfit("it is a Gluon kernel (XLA compiles Triton IR only)")
    if spec.num_ctas not in (None, 1):
        return Unfit(f"num_ctas={spec.num_ctas} (XLA's call launches one CTA per cluster)")
    kinds = {kind for kind, _ in spec.positional}
    if "descriptor" in kinds:
        return Unfit("a parameter takes a host-side TensorDescriptor, whose CUDA tensor map the "
                     "host must encode at each launch, and XLA's call passes buffer pointers only")
    if kinds.intersection(_layout.NESTED_KINDS):
        return Unfit("a parameter takes a tuple (XLA's call passes one pointer per buffer)")
    options = dict(spec.options) | dict(spec.backend_options)
    if options:
        return Unfit(f"compile option(s) {', '.join(sorted(options))} (XLA compiles the IR with "
                     f"its own options)")
    if not spec.enable_fp_fusion:
        return Unfit("enable_fp_fusion=False (XLA compiles the IR with its own options)")
    if spec.debug:
        return Unfit("debug=True (XLA compiles without Triton's debug mode)")
    if spec.serialized_metadata:
        return Unfit("serialized_metadata is set (XLA's call has no place for it)")
    return None


_SCALAR_DTYPES = {"u1": np.bool_, "i1": np.bool_, "i32": np.int32, "u32": np.uint32,
                  "i64": np.int64, "u64": np.uint64, "fp32": np.float32, "fp64": np.float64}


def emit(ctx: LoweringRuleContext, operands: Sequence[Any], call: NativeCall,
         spec: KernelCallSpec):
    """Emits `__gpu$xla.gpu.triton` as Pallas does (`pallas_call_registration.py`; its private
    `mlir.custom_call` is the same in every supported jax), with the operands the call adds.
    The call's name is a frontend attribute (HLO dumps show it, `kernel_calls` reads it): the
    config's `name` is the `tt.func`, and JAX keeps only the call site's location."""
    if spec.cost_estimate is not None:
        logger.debug("jax_triton_rocm: cost_estimate dropped: XLA's Triton call carries none")
    zero_avals = [ctx.avals_out[o] for o in call.zeroed]
    added = [mlir.full_like_aval(ctx, 0, aval) for aval in zero_avals]
    # Each runtime scalar as the 0-d constant the trampoline loads (`_trampoline.for_xla`), an int
    # of the divisible-by-16 class divided by its scale (exact: the kernel was made for it).
    added += [mlir.ir_constant(np.array(scalar.value if scale == 1 else scalar.value // scale,
                                        _SCALAR_DTYPES[scalar.triton_type]))
              for scalar, scale in zip(call.scalars, call.scalar_scales, strict=True)]
    aliases = [*spec.input_output_aliases,
               *[(len(ctx.avals_in) + k, o) for k, o in enumerate(call.zeroed)]]
    backend_config = {
        "name": ir.StringAttr.get(call.name),
        "ir": ir.StringAttr.get(call.ir),
        "num_stages": mlir.i32_attr(call.num_stages),
        "num_warps": mlir.i32_attr(call.num_warps),
        **{f"grid_{axis}": mlir.i32_attr(n) for axis, n in zip("xyz", call.grid, strict=True)},
        "debug": ir.BoolAttr.get(False),
    }
    # Row-major layouts: the kernel indexes every buffer as C-contiguous (a scalar's has none).
    layouts = [list(reversed(range(len(aval.shape))))
               for aval in (*ctx.avals_in, *zero_avals, *ctx.avals_out)]
    n_buffers_in = len(ctx.avals_in) + len(zero_avals)
    result_types = [ir.RankedTensorType.get(aval.shape, mlir.dtype_to_ir_type(aval.dtype))
                    for aval in ctx.avals_out]
    op = mlir.custom_call(
        CUSTOM_CALL_NAME,
        result_types=result_types,
        operands=[*operands, *added],
        backend_config=backend_config,
        api_version=4,
        operand_layouts=layouts[:n_buffers_in] + [[] for _ in call.scalars],
        result_layouts=layouts[n_buffers_in:],
        operand_output_aliases=dict(aliases),
        has_side_effect=spec.has_side_effect,
    )
    op.operation.attributes["mhlo.frontend_attributes"] = ir.DictAttr.get(
        {_compat.XLA_CALL_NAME_ATTRIBUTE: ir.StringAttr.get(spec.name or call.name)})
    return op.results


class XlaRoute(_lowering.Route):
    """XLA's own Triton call, as the lowering shell asks it."""

    name = "xla"
    tuned_on = "jaxlib"

    def where(self, backend: Backend, ctx: LoweringRuleContext, spec: KernelCallSpec,
              record: dict, settings: _env.LoweringSettings | None) -> _lowering.Placed | Unfit:
        if (unfit := unfit_before_compile(spec)) is not None:
            return unfit
        arch, _ = _arch.resolve_arch(backend, ctx, spec)
        decides = (backend.platform, dataclasses.astuple(arch),
                   _compile.call_graph_key(spec, record))
        return _lowering.Placed(arch, (CUSTOM_CALL_NAME, *decides), decides)

    def tuned_launches(self, tuned: Any) -> list[_plan.Launch] | Unfit:
        """The one config jaxlib's lowered call remembers, which keys choices on its compiled
        configs and runs the autotuner's functions once."""
        if tuned.undecided is not None or len(tuned.launches) != 1:
            return Unfit(
                "the kernel is autotuned and no configuration is remembered for this call "
                "(jaxlib's call times them at its first run; jax_triton_rocm.autotune picks "
                "one once, on real data, and the call can then take XLA's)")
        return list(tuned.launches)

    def build(self, backend: Backend, spec: KernelCallSpec, placed: _lowering.Placed,
              answers: ArchAnswers, launches: list[_plan.Launch], in_avals: tuple,
              out_avals: tuple, record: dict) -> tuple[NativeCall, list[_plan.Launch]] | Unfit:
        """The call's one launch compiled as the trampoline XLA calls, its IR checked for this
        jaxlib (kept in the kernel's `record`), or why it does not fit."""
        [launch] = launches  # XLA's call launches one configuration
        aliased = {o for _, o in spec.input_output_aliases}
        if aliased & set(launch.zeroed):
            return Unfit("an output to zero shares its buffer with an input (jaxlib's call zeroes "
                         "that buffer; XLA's call has no zeroing)")
        zero_avals = tuple([out_avals[o] for o in launch.zeroed])
        routed, scales = _trampoline.for_xla(spec.unwrapped, launch, in_avals + zero_avals,
                                             out_avals, answers.launch_site.triton_backend, record)
        try:
            [(_, _, compiled)] = _compile.compiled_launches([routed], _compile.launch_jobs(
                [routed], spec, backend, answers, record))
        except Exception as err:  # do the call's arguments line up with the kernel's parameters?
            _kinds.check(spec.unwrapped.jit_fn, launch.bound, in_avals, out_avals,
                         spec.kernel_name, _vendors.FRONT_END_PROBES, failed=err)
            raise
        # What the kernel writes, read from what it compiled to: the trampoline's buffers are the
        # operands, the zeroed outputs' buffers, the runtime scalars' 0-d operands, the results.
        n_in = len(in_avals)
        renumbered = {("output", o): ("output", o) for o in range(len(out_avals))}
        renumbered |= {("input", b): ("input", b) if b < n_in
                       else ("output", launch.zeroed[b - n_in])
                       for b in range(n_in + len(launch.zeroed))}
        if (found := _writes.of_launch(compiled.ttir, routed.bound, renumbered,
                                          spec.unwrapped.jit_fn)) is not None:
            _misplaced.check_writes(spec, launch, *found, in_avals)
        # Raises for a launch feature.
        problem = _plan.launch_problem(answers.launch_site.limits, compiled=compiled)
        if problem:
            return Unfit(problem)  # jaxlib's route raises it, with the kernel's name
        if compiled.global_scratch_size:
            return Unfit(f"the kernel needs {compiled.global_scratch_size} bytes of Triton global "
                         f"scratch memory, which not every XLA allocates for this call")
        scalars = tuple(source.scalar for source in launch.bound.sources if source.kind == "scalar")
        n_pointers = len(in_avals) + len(zero_avals) + len(scalars) + len(out_avals)
        if (ir := record.get(("checked IR", compiled.key, n_pointers))) is None:
            ir = record["checked IR", compiled.key, n_pointers] = checked_ir(compiled, n_pointers)
        if isinstance(ir, Unfit):
            return ir
        return NativeCall(
            name=compiled.name, ir=ir, num_warps=compiled.num_warps,
            num_stages=int(compiled.metadata.get("num_stages") or 1), grid=launch.grid,
            scalars=scalars, zeroed=tuple(launch.zeroed), scalar_scales=scales), launches

    def rebuild(self, made: NativeCall, launches: list[_plan.Launch], spec: KernelCallSpec,
                in_avals: tuple, record: dict) -> NativeCall | None:
        """The kept call with the grid and scalars of a new call's one launch, or None where its
        kernel cannot take them (other buffers zeroed, an int of another divisibility class)."""
        [launch] = launches
        # The launch's runtime scalars, in kernel order: what the trampoline loads, in its order.
        scalars = tuple(source.scalar for source in launch.bound.sources if source.kind == "scalar")
        if tuple(launch.zeroed) == made.zeroed and all(
                k == 1 or _trampoline.scale(s.value) == k
                for s, k in zip(scalars, made.scalar_scales, strict=True)):
            return _values.replaced(made, grid=launch.grid, scalars=scalars)
        return None

    def emit(self, backend: Backend, ctx: LoweringRuleContext, operands: Sequence[Any],
             lowered: NativeCall, spec: KernelCallSpec) -> list:
        return emit(ctx, operands, lowered, spec)


ROUTE = _lowering.ROUTES[XlaRoute.name] = XlaRoute()
