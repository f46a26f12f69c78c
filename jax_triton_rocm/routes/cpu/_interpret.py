"""The CPU lowering of `triton_kernel_p`: the call's first launch (`plan._plan`) becomes a host
callback, in which `run_on_host` runs the kernel in Triton's interpreter on NumPy buffers.
docs/design.md, "Triton's interpreter on the CPU"; docs/tutorial.md, "Kernels on the CPU".
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import triton
import triton.language as tl

import jax

from jax_triton_rocm.backends import _no_gpu, _vendors
from jax_triton_rocm.base import _env, _state
from jax_triton_rocm.compile import _compile, _errors, _writes
from jax_triton_rocm.plan import _plan
from jax_triton_rocm.routes import _arch
from jax_triton_rocm.routes.cpu import _interpret_host, _shard_callbacks
from jax_triton_rocm.checks import _kinds, _misplaced
from jax_triton_rocm.kernel import _spec

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext

logger = logging.getLogger("jax_triton_rocm")

# A grid of more programs than this runs a quarter of an hour or more (docs/tutorial.md).
SLOW_GRID_PROGRAMS = 1 << 20
_SECONDS_PER_PROGRAM = 1e-3
_FALLBACK = "cpu-fallback"  # `_state.first_warning`'s subject: one warning per process


@dataclasses.dataclass(frozen=True)
class InterpretedCall:
    """One `triton_kernel_p` equation resolved at lowering for the interpreter. `positional`
    tells a runtime scalar the layout made a constexpr (None, 1) from one given by keyword."""

    name: str
    jit_fn: triton.JITFunction
    launch: _plan.Launch
    positional: tuple[tuple[str, Any], ...]
    out_avals: tuple[Any, ...]
    aliases: tuple[tuple[int, int], ...]
    debug: bool = False


def _kernel_arguments(call: InterpretedCall, buffers: list, outs: list) -> list[Any]:
    """One argument per kernel parameter, as the launch's `bound` lays them; a constexpr of a
    parameter not annotated `tl.constexpr` goes as `tl.constexpr`, as the compiler takes it."""
    bound = call.launch.bound
    sources = {(source.position, *source.path): source for source in bound.sources}

    def argument(key: tuple[int, ...], param: Any, signature: Any) -> Any:
        if isinstance(signature, tuple):
            return tuple(argument(key + (j,), param, element)
                         for j, element in enumerate(signature))
        if key in bound.constexprs:
            value = _interpret_host.host_constexpr(bound.constexprs[key])
            if value is None or param.is_constexpr:
                return value
            if len(key) > 1 or (key[0] < len(call.positional)
                                and call.positional[key[0]][0] == "scalar"):
                return _interpret_host.typed_scalar(value, f"argument {key}")
            return tl.constexpr(value)
        source = sources[key]
        if source.kind == "scalar":
            return _interpret_host.typed_scalar(source.scalar, f"argument {key}")
        array = outs[source.index] if source.kind == "output" else buffers[source.index]
        if source.kind == "descriptor":
            return _interpret_host.host_descriptor(array, source.descriptor)
        return _interpret_host.HostTensor(array, tl.str_to_ty(signature[1:], None))

    return [argument((i,), param, bound.signature[param.name])
            for i, param in enumerate(call.jit_fn.params)]


def _kernel_line(err: BaseException) -> str:
    """" at FILE:LINE (SOURCE)": the innermost line of `err`'s root cause's traceback outside
    Triton and this package (the kernel's); "" where there is none."""
    while err.__cause__ is not None:
        err = err.__cause__
    # The package's folder is found from this file's (routes/cpu/), not by importing the package.
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    inside = (os.path.dirname(triton.__file__) + os.sep, package + os.sep)
    lines = [frame for frame in traceback.extract_tb(err.__traceback__)
             if not frame.filename.startswith(inside)]
    return f" at {lines[-1].filename}:{lines[-1].lineno} ({lines[-1].line})" if lines else ""


def _made_by_kernel(failed: BaseException | None, jit_fn: triton.JITFunction) -> bool:
    """Whether `failed` is an AttributeError whose `obj` the kernel made: none of the arguments
    `jit_fn`'s frame received, their elements or a tuple of them (docs/design.md)."""
    if not isinstance(failed, AttributeError) or failed.obj is None and failed.name is None:
        return False
    code = jit_fn.fn.__code__  # the rewritten kernel's frame has its name and file
    frames = [frame for frame, _ in traceback.walk_tb(failed.__traceback__)
              if (frame.f_code.co_name, frame.f_code.co_filename) == (code.co_name,
                                                                      code.co_filename)]
    if not frames:
        return False
    received: list[Any] = [frames[0].f_locals.get(name) for name in jit_fn.arg_names]
    for value in received:  # grows as it goes: the elements follow their tuple
        if isinstance(value, (tuple, tl.core.tuple)):
            received.extend(getattr(value, "values", value))
        elif isinstance(value, tl.constexpr):
            received.append(value.value)

    def passed(value: Any) -> bool:
        # Triton's semantics hand a Triton tuple on as a tuple of its elements.
        return any([value is given for given in received]) or (
            isinstance(value, tuple) and all([passed(element) for element in value]))

    return not passed(failed.obj)


def _run_error(call: InterpretedCall, err: BaseException) -> Exception:
    """The error to raise for `err`, raised by a run of `call`: NotImplementedError for fp8
    arithmetic, else RuntimeError (the interpreter, or with `debug` an assertion, failed; the
    advice about the call's values only where the value that failed may be one of them)."""
    cause: BaseException | None = err
    while cause is not None and not isinstance(cause, _interpret_host.Fp8ArithmeticError):
        cause = cause.__cause__
    grid, bound = call.launch.grid, call.launch.bound
    if cause is not None:
        operation, triton_type = cause.args
        fp8 = sorted(f"{name} ({kind.lstrip('*')})" for name, kind in bound.signature.items()
                     if isinstance(kind, str) and kind.lstrip("*") in _spec.FP8_DTYPES)
        params = f" Its fp8 parameters: {', '.join(fp8)}." if fp8 else ""
        return NotImplementedError(
            f"Kernel {call.name} computes {operation} on {_spec.FP8_DTYPES[triton_type]} values "
            f"(Triton's {triton_type}){_kernel_line(cause)}. Triton does no arithmetic or "
            f"comparison on fp8 values: its compiler refuses this kernel for every GPU, and "
            f"Triton's interpreter on the CPU refuses it as well.{params} Convert fp8 values "
            f"first (x.to(tl.float32)), compute in float32, and convert back for the store "
            f"(y.to(out_ptr.dtype.element_ty)).")
    constexprs = bound.constexprs_text(list(call.jit_fn.arg_names)) or "none"
    # Triton's interpreter raises what the kernel raised as the cause of an InterpreterError.
    failed = err if isinstance(err, AssertionError) else err.__cause__
    if call.debug and isinstance(failed, AssertionError):
        return RuntimeError(
            f"Kernel {call.name} failed an assertion in Triton's interpreter on the CPU "
            f"(grid {grid}, constexprs {constexprs}; debug=True checks tl.device_assert): "
            f"{failed}{_kernel_line(failed)}. Fix the input the assertion rejects, or the "
            f"kernel.")
    failure = (f"Triton's interpreter could not run kernel {call.name} (grid {grid}, "
               f"constexprs {constexprs}) on the CPU: {type(err).__name__}: {err}"
               f"{_kernel_line(err)}.")
    if _made_by_kernel(failed, call.jit_fn):
        return RuntimeError(
            f"{failure} The {type(failed.obj).__name__} it failed on is a value the kernel "
            f"made, not one the call passes: fix the kernel there, or run it on a GPU if it "
            f"uses a feature the interpreter lacks.")
    hints = "".join(f" {hint}" for hint in _errors.layout_hints(bound))
    return RuntimeError(
        f"{failure} Fix a value the kernel cannot use where the call passes it (a None "
        f"positional argument is a constexpr, as in Triton), or run it on a GPU if it uses a "
        f"feature the interpreter lacks.{hints}")


# jaxlib's text for an exception a host callback raised: its prefix, then nanobind's rendering of
# the traceback, a line per frame, and "Type: message".
_RUN_FAILURE = re.compile(r"CpuCallback error calling callback: Traceback \(most recent call "
                          r"last\):\n(?:  File [^\n]*\n)*  File [^\n]*, in run_on_host\n"
                          r"\w+: (?P<message>.*)\Z", re.S)


def run_failure(error_text: str) -> str | None:
    """The message `run_on_host` raised, where `error_text` (a `JaxRuntimeError`'s) holds it."""
    found = _RUN_FAILURE.search(error_text)
    return found["message"] if found else None


def run_on_host(call: InterpretedCall, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Runs `call` in Triton's interpreter on host buffers; returns the outputs. Inputs are
    copied: the kernel writes through raw addresses, and JAX's buffers may be read-only."""
    buffers = [np.array(x, copy=True, order="C") for x in inputs]
    alias_of = {o: i for i, o in call.aliases}
    outs = [buffers[alias_of[o]] if o in alias_of else np.zeros(aval.shape, aval.dtype)
            for o, aval in enumerate(call.out_avals)]
    for o in call.launch.zeroed:
        outs[o][...] = 0
    args = _kernel_arguments(call, buffers, outs)
    try:
        with _state.LOCKS.triton_language, _interpret_host.interpreter_adapted(call.debug):
            _interpret_host.interpreted(call.jit_fn)[call.launch.grid](*args)
    except Exception as err:
        failure = _run_error(call, err)
        if isinstance(failure, RuntimeError):
            # Under jax.jit jaxlib puts the callback's frames before this sentence; logged, as
            # JAX logs its own callbacks' failures, it is the first thing the user reads.
            logger.error("%s", failure)
        raise failure from err
    return tuple(outs)


def mark_explained() -> None:
    """Marks the CPU fall-back as explained (the demo prints why itself): no warning follows."""
    _state.first_warning(_FALLBACK)


def _warn(name: str, grid: tuple[int, ...]) -> None:
    """Warns where `grid` has more programs than the interpreter runs in a few minutes; and, once
    per process and where a GPU platform is installed, that kernel `name` runs in the
    interpreter, and why."""
    programs = math.prod(grid)
    if programs > SLOW_GRID_PROGRAMS:
        seconds = programs * _SECONDS_PER_PROGRAM
        unit, size = next((unit, size) for unit, size in (("days", 86400), ("hours", 3600),
                                                           ("minutes", 60), ("seconds", 1))
                          if seconds >= 2 * size or size == 1)
        logger.warning(
            "jax_triton_rocm: kernel %s has a grid of %s, %d programs, which Triton's "
            "interpreter on the CPU runs one at a time, in Python, at about %g ms each for a "
            "small kernel: roughly %d %s. Give each program more work (a larger block), run a "
            "smaller problem, or run it on a GPU.", name, grid, programs,
            _SECONDS_PER_PROGRAM * 1e3, round(seconds / size), unit)
    if _state.first_warning(_FALLBACK) and _vendors.installed_gpu_platforms():
        from jax._src import xla_bridge

        if any(p in xla_bridge.backends() for p in _vendors.GPU_PLATFORMS):
            why = ("A GPU is present, but this computation is placed on the CPU (operands on a "
                   "CPU device, or jit(..., backend='cpu')): put its operands on the GPU "
                   "(jax.device_put(x, jax.devices('gpu')[0])) to run the kernel there.")
        else:
            why = "JAX has no GPU device: " + _no_gpu.no_gpu_reason()
        logger.warning("jax_triton_rocm: kernel %s runs in Triton's interpreter on the CPU (slow: "
                       "NumPy, one program at a time). %s This warning is logged once per "
                       "process.", name, why)


def lower(ctx: LoweringRuleContext, operands: Sequence[Any], spec: _spec.KernelCallSpec):
    """`triton_kernel_p`'s lowering for `cpu`: a host callback that runs the first launch, or a
    `_plan.Skipped` where its grid has a 0."""
    if _arch.for_export(ctx):
        # Checked here: JAX's own error comes after the whole lowering and names no kernel.
        raise NotImplementedError(
            f"jax.export of kernel {spec.name} lowered for the CPU: there the kernel runs in "
            f"Triton's interpreter, as a host callback into this Python process, which "
            f"jax.export cannot serialize. Export for the GPU only (platforms=['cuda'] or "
            f"['rocm']); on a machine without that GPU, name its architecture around the "
            f"export, with jax_triton_rocm.target_arch(cuda='sm_90') (or rocm='gfx942') or "
            f"{_env.ENV_TARGET_ARCH}='cuda=sm_90'.")
    jit_fn = spec.unwrapped.jit_fn
    if jit_fn.is_gluon():
        raise NotImplementedError(
            f"Kernel {spec.name} is a Gluon kernel, and this computation is lowered for the CPU, "
            f"where kernels run in Triton's interpreter, which runs only @triton.jit kernels. Run "
            f"it on a GPU (platforms 'cuda', 'rocm'), or write a @triton.jit version for the CPU.")
    out_avals = tuple(jax.ShapeDtypeStruct(s.shape, s.dtype) for s in spec.out_shapes)
    in_avals = tuple(ctx.avals_in)
    [launch] = _plan.launches(spec, in_avals, out_avals,
                              _plan.interpreter_launch_site(_vendors.COMPILE_OPTIONS))
    # Nothing compiles here, so the arguments are checked against the parameters now.
    _kinds.check(jit_fn, launch.bound, in_avals, out_avals, spec.kernel_name,
                 _vendors.FRONT_END_PROBES)
    if 0 in launch.grid:  # no program runs
        return _plan.skipped([launch], spec, out_avals)
    # What the kernel writes, read from the TTIR Triton's front end builds for the launch (a
    # kernel decorated under TRITON_INTERPRET=1 builds none: its writes are not checked).
    bound = launch.bound
    if not spec.unwrapped.interpreted:
        key = ("writes", _compile.call_graph_key(spec, _state.KERNEL_RECORDS.record(spec.kernel)),
               tuple(bound.signature.items()), repr(bound.attrs),
               tuple((k, _compile.stable_text(v)) for k, v in sorted(bound.constexprs.items())))
        ttir = _state.CHECKED_CALLS.memo(key, lambda: _kinds.front_end(
            jit_fn, bound, _vendors.FRONT_END_PROBES, ttir=True)[0], kernel=jit_fn)
        if ttir and (found := _writes.of_launch(ttir, bound, jit_fn=jit_fn)) is not None:
            _misplaced.check_writes(spec, launch, *found, in_avals)
    _warn(spec.name, launch.grid)
    call = InterpretedCall(name=spec.name, jit_fn=jit_fn, launch=launch,
                           positional=spec.positional, out_avals=out_avals,
                           aliases=spec.input_output_aliases, debug=spec.debug)
    return _shard_callbacks.emit(ctx, operands, call.out_avals,
                                 lambda *xs: run_on_host(call, *xs), spec.has_side_effect)
