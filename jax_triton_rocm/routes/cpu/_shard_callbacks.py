"""The interpreter's host callbacks. JAX drops those of a `partitioned` function's per-shard body
(jax#34349), so its calls go through one callback reserved in the outer program (`ReservedCallback`).
docs/design.md, "Triton's interpreter on the CPU".
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

import jax
from jax._src import core
from jax._src import callback as jax_callback
from jax.interpreters import mlir

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext, ModuleContext


class ReservedCallback:
    """The host callback, at `index` in the outer module's list, that runs a per-shard body's
    interpreted calls, each by its number (the first operand)."""

    def __init__(self, module_context: ModuleContext) -> None:
        self.index = len(module_context.host_callbacks)
        self.calls: dict[int, Callable[..., Any]] = {}
        module_context.add_host_callback(self)
        module_context.add_keepalive(self)

    def __call__(self, number: Any, *arrays: Any) -> Any:
        return self.calls[int(number)](number, *arrays)


_RESERVED: contextvars.ContextVar[ReservedCallback | None] = contextvars.ContextVar(
    "jax_triton_rocm_reserved_callback", default=None)


def emit(ctx: LoweringRuleContext, operands: Sequence[Any], out_avals: Sequence[Any],
         run: Callable[..., Sequence[np.ndarray]], side_effect: bool) -> Sequence[Any]:
    """Emits an interpreted call's host callback running `run(*arrays)`; inside a per-shard
    body, at the reserved callback's index, with the call's number as first operand."""
    reserved = _RESERVED.get()
    if reserved is None:
        return host_callback(ctx, operands, ctx.avals_in, out_avals, run, side_effect)
    number = len(reserved.calls)
    callbacks = ctx.module_context.host_callbacks
    kept = list(callbacks)
    callbacks[:] = [None] * reserved.index  # JAX appends the call's callback at reserved.index
    try:
        results = host_callback(ctx, [mlir.ir_constant(np.int32(number)), *operands],
                                [core.ShapedArray((), np.int32), *ctx.avals_in], out_avals,
                                lambda _, *arrays: run(*arrays), side_effect)
        if len(callbacks) != reserved.index + 1:
            raise AssertionError(f"a call through the reserved callback added {len(callbacks) - reserved.index} host "
                                 f"callbacks instead of one")
        reserved.calls[number] = callbacks[reserved.index]
    finally:
        callbacks[:] = kept
    return results


def host_callback(ctx: LoweringRuleContext, operands: Sequence[Any], operand_avals: Sequence[Any],
                  out_avals: Sequence[Any], run: Callable[..., Sequence[np.ndarray]],
                  side_effect: bool) -> Sequence[Any]:
    """Emits a host callback running `run(*arrays)` on the runtime's host buffers. Not
    `jax.pure_callback`: it first puts every operand on CPU device 0 and waits, forever where all
    CPU devices call back at once (a `partitioned` function on several CPU devices)."""
    out_avals = [core.ShapedArray(aval.shape, aval.dtype) for aval in out_avals]
    sharding = jax_callback._callback_op_sharding(ctx.module_context.axis_context, None,
                                                  out_avals)
    ctx = ctx.replace(avals_in=list(operand_avals), avals_out=out_avals)  # the layouts' source
    results, _, _ = jax_callback.emit_python_callback(
        ctx, lambda *arrays: tuple(run(*arrays)), None, list(operands), list(operand_avals),
        out_avals, has_side_effect=side_effect, returns_token=False, sharding=sharding)
    return results


shard_body_p = core.Primitive("triton_shard_body")
shard_body_p.multiple_results = True
shard_body_p.def_abstract_eval(lambda *avals, jaxpr, reserved, name: jaxpr.out_avals)


def _shard_body_lowering(ctx: LoweringRuleContext, *operands: Any, jaxpr: Any, reserved: ReservedCallback | None,
                         name: str):
    before = len(ctx.module_context.host_callbacks)
    token = _RESERVED.set(reserved)
    try:
        results = mlir.lower_fun(core.jaxpr_as_fun(jaxpr), multiple_results=True)(ctx, *operands)
    finally:
        _RESERVED.reset(token)
    if len(ctx.module_context.host_callbacks) != before:
        raise NotImplementedError(
            f"partitioned function {name} makes a host callback of its own (jax.pure_callback, "
            f"io_callback, jax.debug.print or a callback-based library call) in its per-shard "
            f"body, which JAX's custom_partitioning cannot keep (jax#34349): the program would "
            f"call the wrong function. Move the callback outside the partitioned function.")
    return results


mlir.register_lowering(shard_body_p, _shard_body_lowering)


def shard_body(fun: Callable[..., Sequence[Any]], shards: Sequence[Any], reserved: ReservedCallback | None,
               name: str) -> list[Any]:
    """`fun(*shards)` (a list of arrays) bound as one per-shard body whose calls go through `reserved`."""
    closed = jax.make_jaxpr(fun)(*shards)
    return shard_body_p.bind(*shards, jaxpr=closed, reserved=reserved, name=name)
