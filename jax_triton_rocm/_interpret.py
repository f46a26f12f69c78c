"""The CPU lowering of `triton_kernel_p`: the kernel runs in Triton's interpreter, on the host.

Data flow: the call's static parameters -> the first launch configuration (`_configs`) -> an
`InterpretedCall` (kernel, grid, arguments by kind) -> a `jax.pure_callback` emitted in the module
-> at run time, `run_on_host` hands NumPy buffers to Triton's interpreter and returns the outputs.

Triton's interpreter (`triton.runtime.interpreter`) is meant for kernels defined under
`TRITON_INTERPRET=1` and for torch tensors. Here the kernel is an ordinary `@triton.jit` function
and the buffers are NumPy arrays:
- `_interpret_host.HostTensor` gives a NumPy buffer just the part of torch's tensor interface the
  interpreter's `GridExecutor` reads (`data_ptr`, `untyped_storage`, `dtype`, ...); the buffer is
  already on the host, so the interpreter's copies to and from "the device" are no-ops.
- Calls from the kernel to other `@triton.jit` functions are routed to interpreted twins of them
  while the kernel runs, and two interpreter faults are mended for the run
  (`_interpret_host.interpreter_adapted`).

The interpreter patches `triton.language` process-wide while a kernel runs and keeps the program
id in one global builder, so a run holds `_state.triton_language_lock()`: runs are serialised (XLA
may call the callbacks of several CPU devices at once), and no Triton front end compiles in
another thread meanwhile.

What runs where the GPU would differ:
- An autotuned kernel runs its first configuration (after `early_config_prune`); heuristics run as
  on the GPU. No timing happens on the host.
- Every output starts zeroed (on the GPU only `zeroed_outputs` are); an aliased output starts as
  its input (zeroed when listed in `zeroed_outputs`, as on the GPU).
- Gluon kernels cannot run: the interpreter runs only `@triton.jit` kernels.

Where a jaxlib GPU plugin is installed, the first kernel lowered here logs one warning (the
package's logger, as JAX itself logs its fall-back to the CPU) saying why the computation is on
the CPU and how to put it on the GPU: a GPU user with `JAX_PLATFORMS=cpu` set somewhere, or
operands left on the CPU device, would otherwise see only slow runs. Without a GPU plugin the CPU
is the only choice, and nothing is logged.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np

import jax
from jax.interpreters import mlir

from jax_triton_rocm import _compat, _configs, _interpret_host, _kernel, _layout, _state, _types
from jax_triton_rocm._grid import normalize_grid

logger = logging.getLogger("jax_triton_rocm")
_fallback_explained = False  # one warning per process (a forked child inherits the flag)


@dataclasses.dataclass(frozen=True)
class InterpretedCall:
    """One `triton_kernel_p` equation, resolved for the interpreter at lowering time.

    Attributes:
      name: the kernel's name as errors show it.
      jit_fn: the @triton.jit function.
      grid: three program counts.
      positional: ("array", operand index) or ("scalar", value), one per positional argument;
        or one entry per parameter: ("input", operand index), ("output", output index) or
        ("keyword", None) (`_layout.lay_out_arguments` describes both layouts).
      constexprs: values by parameter name (the call's, the first config's, the heuristics').
      annotated_constexprs: parameter names annotated `tl.constexpr` (the interpreter passes
        these as plain values; other parameters given by keyword are passed as `tl.constexpr`,
        as the compiler treats them).
      out_avals: the outputs' shapes and dtypes.
      aliases: (input index, output index) pairs that share a buffer.
      zeroed: output indices the GPU zeroes before the launch.
    """

    name: str
    jit_fn: Any
    grid: tuple[int, int, int]
    positional: tuple[tuple[str, Any], ...]
    constexprs: tuple[tuple[str, Any], ...]
    annotated_constexprs: frozenset[str]
    out_avals: tuple[Any, ...]
    aliases: tuple[tuple[int, int], ...]
    zeroed: frozenset[int]


def _triton_dtype(dtype: Any, what: str) -> Any:
    import triton.language as tl

    return tl.str_to_ty(_types.pointer_type(dtype, what=what)[1:], None)


def check_interpretable(jit_fn: Any, name: str) -> None:
    """Raises NotImplementedError, naming the kernel and why, if the interpreter cannot run it."""
    if jit_fn.is_gluon():
        raise NotImplementedError(
            f"Kernel {name} is a Gluon kernel, and this computation is lowered for the CPU, where "
            f"kernels run in Triton's interpreter, which runs only @triton.jit kernels. Run it on "
            f"a GPU (platforms 'cuda', 'rocm'), or write a @triton.jit version for the CPU.")


def resolve(ctx_avals_in: tuple, params: dict[str, Any]) -> InterpretedCall:
    """The interpreted call of one equation: its first launch configuration, grid and arguments."""
    unwrapped = _kernel.unwrap(params["kernel"])
    jit_fn = unwrapped.jit_fn
    name = params["name"] or _kernel.kernel_name(jit_fn)
    check_interpretable(jit_fn, name)
    configs = _configs.resolve(
        unwrapped,
        metaparams=dict(params["metaparams"]),
        options=dict(params["options"]),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
        num_ctas=params["num_ctas"],
        positional=params["positional"],
        in_avals=tuple(ctx_avals_in),
        out_avals=tuple(params["out_shapes"]),
    )
    config = configs[0]
    grid_spec = params["grid"]
    grid = normalize_grid(grid_spec(config.meta) if callable(grid_spec) else grid_spec,
                          what="grid(meta)" if callable(grid_spec) else "grid")
    zeroed = params["zeroed_outputs"]
    if callable(zeroed):
        zeroed = tuple(zeroed(config.meta))
    annotated = frozenset(p.name for p in jit_fn.params if p.is_constexpr)
    for i, aval in enumerate(ctx_avals_in):
        _triton_dtype(aval.dtype, f"argument array {i}")
    return InterpretedCall(
        name=name,
        jit_fn=jit_fn,
        grid=grid,
        positional=tuple(params["positional"]),
        constexprs=tuple(sorted(config.constexprs.items())),
        annotated_constexprs=annotated,
        out_avals=tuple(jax.ShapeDtypeStruct(s.shape, s.dtype) for s in params["out_shapes"]),
        aliases=tuple(params["input_output_aliases"]),
        zeroed=frozenset(zeroed),
    )


def run_on_host(call: InterpretedCall, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Runs `call` in Triton's interpreter on host buffers; returns the outputs.

    Inputs are copied first: the kernel writes through raw addresses, and the arrays JAX hands
    a callback may be its own, read-only buffers.

    Raises:
      RuntimeError: the interpreter failed; the message names the kernel and the interpreter's
        error, which is chained.
    """
    buffers = [np.array(x, copy=True, order="C") for x in inputs]
    alias_of = {o: i for i, o in call.aliases}
    outs = []
    for o, aval in enumerate(call.out_avals):
        if o in alias_of:
            out = buffers[alias_of[o]]
            if o in call.zeroed:
                out[...] = 0
        else:
            out = np.zeros(aval.shape, aval.dtype)
        outs.append(out)
    import triton.language as tl

    constexprs = {name: value if name in call.annotated_constexprs else tl.constexpr(value)
                  for name, value in call.constexprs}
    params = call.jit_fn.params

    def host_tensor(array: np.ndarray, what: str) -> Any:
        return _interpret_host.HostTensor(array, _triton_dtype(array.dtype, what))

    args: list[Any] = []
    for i, (kind, value) in enumerate(call.positional):
        if kind in ("array", "input"):
            args.append(host_tensor(buffers[value], f"argument {i}"))
        elif kind == "output":
            args.append(host_tensor(outs[value], f"output {value}"))
        elif kind == "keyword":
            # Passed in its place: the parameters after it are passed by position too.
            name = params[i].name
            args.append(constexprs.pop(name) if name in constexprs else params[i].default)
        elif value is None:
            args.append(None)
        else:
            args.append(_interpret_host.typed_scalar(value, f"argument {i}"))
    if not _layout.places_outputs(call.positional):
        args += [host_tensor(out, f"output {o}") for o, out in enumerate(outs)]
    try:
        with _state.triton_language_lock(), _interpret_host.interpreter_adapted():
            _interpret_host.interpreted(call.jit_fn)[call.grid](*args, **constexprs)
    except Exception as err:
        raise RuntimeError(
            f"Triton's interpreter could not run kernel {call.name} (grid {call.grid}) on the "
            f"CPU: {type(err).__name__}: {err}. Run it on a GPU if it uses a feature the "
            f"interpreter lacks.") from err
    return tuple(outs)


def cpu_fallback_explained() -> None:
    """Marks the CPU fall-back as explained (the demo prints why itself): no warning follows."""
    global _fallback_explained
    _fallback_explained = True


def _explain_cpu_fallback(name: str) -> None:
    """Logs, once per process, why kernel `name` runs on the CPU where a GPU plugin is installed."""
    global _fallback_explained
    with _state.LOCKS.lock_for("cpu-fallback-warning"):
        if _fallback_explained:
            return
        _fallback_explained = True
    if not _compat.installed_gpu_platforms():
        return
    from jax._src import xla_bridge

    from jax_triton_rocm import _startup

    if any(p in xla_bridge.backends() for p in _compat.GPU_PLATFORMS):
        why = ("A GPU is present, but this computation is placed on the CPU (operands on a CPU "
               "device, or jit(..., backend='cpu')): put its operands on the GPU "
               "(jax.device_put(x, jax.devices('gpu')[0])) to run the kernel there.")
    else:
        why = "JAX has no GPU device: " + _startup.no_gpu_reason()
    logger.warning("jax_triton_rocm: kernel %s runs in Triton's interpreter on the CPU (slow: "
                   "NumPy, one program at a time). %s This warning is logged once per process.",
                   name, why)


def lower(ctx: Any, *operands: Any, **params: Any):
    """The MLIR lowering rule of `triton_kernel_p` for platform `cpu`: a host callback."""
    call = resolve(tuple(ctx.avals_in), params)
    _explain_cpu_fallback(call.name)

    def host_call(*arrays):
        return jax.pure_callback(lambda *xs: run_on_host(call, *xs), list(call.out_avals),
                                 *arrays)

    return mlir.lower_fun(host_call, multiple_results=True)(ctx, *operands)
