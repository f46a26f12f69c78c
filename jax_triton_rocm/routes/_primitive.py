"""`triton_kernel_p`, the primitive a `triton_call` binds, and all its rules, as `jax/_src/ffi.py`
has them: abstract eval, the lowering per platform (`register`; a GPU's route picked by
`GpuRoutes.lower`; the CPU's Triton interpreter), `jax.vmap` (docs/batching.md), jvp (refused)
and DCE (kept). Routes: docs/routes.md; registration: docs/design.md, "The primitive's rules".
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
from jax import lax
from jax._src import dispatch
from jax._src.core import Primitive  # jax.extend.core's; jax.extend imports Pallas, too slow
from jax.interpreters import ad, batching, mlir, partial_eval as pe

from jax_triton_rocm import backends
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _compat, _env, _state, _values
from jax_triton_rocm.plan import _plan
from jax_triton_rocm.routes import _arch
from jax_triton_rocm.kernel._spec import BatchedLaunch, KernelCallSpec, MetaGrid, kernel_name

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext
    from jax_triton_rocm.backends._backend import Backend


triton_kernel_p = Primitive("triton_kernel")
"""The JAX primitive that `triton_call` binds; its one parameter, `spec`, is the call's frozen
`KernelCallSpec`. Libraries with primitives of their own use `triton_call_lowering` instead."""
triton_kernel_p.multiple_results = True


@triton_kernel_p.def_impl
def _run_alone(*operands: Any, spec: KernelCallSpec):
    """A call outside `jax.jit`: a kernel failing in Triton's interpreter raises the package's
    sentence alone, not jaxlib's text of frames around it."""
    try:
        return dispatch.apply_primitive(triton_kernel_p, *operands, spec=spec)
    except jax.errors.JaxRuntimeError as err:
        from jax_triton_rocm.routes.cpu import _interpret

        message = _interpret.run_failure(str(err))
        if message is None:
            raise
        # jaxlib's error holds text only: JAX's and the package's frames, then this message.
        raise jax.errors.JaxRuntimeError(message) from None


@triton_kernel_p.def_abstract_eval
def _abstract_eval(*avals, spec: KernelCallSpec):
    """The results' types. The compiles of jaxlib's route that a lowering of the call will ask
    for start here, where its operands' types are final, unless the call asks for XLA's route,
    the trace cannot tell its platform and architecture (`_arch.traced_arch`),
    JAX_TRITON_ROCM_EARLY_COMPILE forbids it or this is a forked child (docs/design.md,
    "Compiles start at the trace"). Raises nothing for those compiles: the lowering will."""
    out_avals = [jax.core.ShapedArray(s.shape, s.dtype) for s in spec.out_shapes]
    try:
        if (not spec.unwrapped.interpreted and not _state.COMPILE_POOL.forked
                and _env.early_compile() and (platform := _arch.traced_platform()) is not None
                and isinstance(routes := _routes(platform), GpuRoutes)
                and not (spec.xla_native or (spec.xla_native is None and _env.xla_native()))
                and (arch := _arch.traced_arch(routes.backend, spec)) is not None):
            from jax_triton_rocm.routes.jaxlib import _jaxlib_call  # see `_routes`

            _jaxlib_call.start_compiles(routes.backend, spec, arch, tuple(avals),
                                        tuple(out_avals))
    except Exception:  # noqa: BLE001
        pass
    return out_avals


def _refuse(what: str, *arguments: Any, spec: KernelCallSpec):
    raise NotImplementedError(
        f"{what} of triton_call (kernel {spec.name}) is not supported: JAX cannot differentiate "
        f"or transpose a Triton kernel. Wrap the call in a function with jax.custom_vjp (or "
        f"jax.custom_jvp) and give it a backward pass, which may itself be a triton_call.")


ad.primitive_jvps[triton_kernel_p] = functools.partial(_refuse, "jax.grad / jax.jvp")
ad.primitive_transposes[triton_kernel_p] = functools.partial(_refuse, "jax.linear_transpose")


def _keep_call(*arguments: Any) -> tuple[list[bool], Any]:
    """DCE keeps every call and its operands: a kernel may write memory JAX does not see (as
    jax-triton 0.4); XLA still drops one whose results go unused unless `has_side_effect`.
    JAX passes the equation last (from 0.12 after the live inputs)."""
    eqn = arguments[-1]
    return [True] * len(eqn.invars), eqn


pe.dce_rules[triton_kernel_p] = _keep_call


def _loop(primitive: Any, args: list, dims: list, params: dict[str, Any],
          aliases: tuple[tuple[int, int], ...], out_shapes: Sequence[Any]):
    """`primitive` bound once per example, on its slices. With `aliases`, an aliased output's
    whole batch, starting as its input's, is carried through the loop, each example sliced from
    it and written back in place: XLA may pass a slice to a custom call as an address inside
    the whole array, so an output aliased to a slice of one array but written into another's
    would not hold the input the kernel reads."""
    batched = [jax.numpy.moveaxis(a, d, 0) if d is not None else None for a, d in zip(args, dims)]
    if not aliases:
        def one_example(slices):
            given = iter(slices)
            operands = [a if b is None else next(given) for a, b in zip(args, batched)]
            return tuple(_bind_as_list(primitive, operands, params))

        outs = lax.map(one_example, tuple(b for b in batched if b is not None))
    else:
        size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
        aliased = dict((o, i) for i, o in aliases)
        carried = []
        for o, shape in enumerate(out_shapes):
            if o in aliased:
                i = aliased[o]
                carried.append(batched[i] if batched[i] is not None
                               else jax.numpy.broadcast_to(args[i], (size, *args[i].shape)))
            else:
                carried.append(jax.numpy.zeros((size, *shape.shape), shape.dtype))

        def one_example(index, outs):
            operands = [a if b is None else lax.dynamic_index_in_dim(b, index, keepdims=False)
                        for a, b in zip(args, batched)]
            for o, i in aliased.items():
                operands[i] = lax.dynamic_index_in_dim(outs[o], index, keepdims=False)
            results = _bind_as_list(primitive, operands, params)
            return tuple(lax.dynamic_update_index_in_dim(whole, result, index, 0)
                         for whole, result in zip(outs, results))

        outs = lax.fori_loop(0, size, one_example, tuple(carried))
    if primitive.multiple_results:
        return list(outs), [0] * len(outs)
    return outs[0], 0


def _bind_as_list(primitive: Any, operands: list, params: dict[str, Any]) -> list:
    results = primitive.bind(*operands, **params)
    return list(results) if primitive.multiple_results else [results]


def loop_batching_rule(primitive: Any, *, input_output_aliases: Mapping[int, int] | None = None):
    """A `jax.vmap` rule for a primitive of your own whose lowering calls `triton_call_lowering`
    (register it as `jax.interpreters.batching.primitive_batchers[primitive] = rule`): the
    primitive is bound once per example in a loop, on that example's slices.

    Args:
      primitive: the primitive (single or multiple results).
      input_output_aliases: the `{operand index: result index}` its lowering passes to
        `triton_call_lowering`, so that in-place kernels update each example where it lies.

    Returns:
      The batching rule.

    Raises:
      TypeError: `input_output_aliases` is not a dict of int indices.
    """
    given = {} if input_output_aliases is None else input_output_aliases
    if not isinstance(given, Mapping) or not all(
            _values.is_int(i) and _values.is_int(o) for i, o in given.items()):
        raise TypeError(f"loop_batching_rule: input_output_aliases={input_output_aliases!r} must "
                        f"be a dict {{operand index: result index}}, e.g. {{0: 0}}, as the "
                        f"lowering passes it to triton_call_lowering.")
    aliases = tuple(sorted((int(i), int(o)) for i, o in given.items()))

    def rule(args: list, dims: list, **params: Any):
        out_shapes = ()
        if aliases:
            example = [a if d is None else jax.ShapeDtypeStruct(
                a.shape[:d] + a.shape[d + 1:], a.dtype) for a, d in zip(args, dims)]
            out_shapes = jax.tree_util.tree_leaves(jax.eval_shape(
                lambda *xs: _bind_as_list(primitive, list(xs), params), *example))
        return _loop(primitive, args, dims, params, aliases, out_shapes)

    return rule


def batch_rule(args: list, dims: list, *, spec: KernelCallSpec):
    """A loop, or one launch for the whole batch where the kernel follows `batch_grid_axis`."""
    if spec.batch_grid_axis is None:
        return _loop(triton_kernel_p, args, dims, {"spec": spec}, spec.input_output_aliases,
                     spec.out_shapes)
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    operands = [jax.numpy.broadcast_to(a, (size, *a.shape)) if d is None
                else jax.numpy.moveaxis(a, d, 0) for a, d in zip(args, dims)]
    batch = spec.batch or BatchedLaunch(spec.batch_grid_axis, 1, 0)
    batched = dataclasses.replace(
        spec, batch=BatchedLaunch(batch.axis, batch.size * size, batch.depth + 1),
        out_shapes=tuple(jax.ShapeDtypeStruct((size, *s.shape), s.dtype)
                         for s in spec.out_shapes))
    if not isinstance(spec.grid, MetaGrid):
        # A static grid that uses the batch axis fails here (the target's limits at lowering).
        _plan.launch_grid(batched, {}, num_warps=spec.num_warps or _plan.DEFAULT_NUM_WARPS)
    outs = triton_kernel_p.bind(*operands, spec=batched)
    return list(outs), [0] * len(outs)


batching.primitive_batchers[triton_kernel_p] = batch_rule


logger = logging.getLogger("jax_triton_rocm")

# The routes as `log_route` names them (what a lowering emitted).
XLA, JAXLIB, JAXLIB_LEGACY, INTERPRETER = "xla", "jaxlib", "jaxlib legacy", "interpreter"
DEFAULT_REASON = "the default: jaxlib's call launches pip Triton's own binary"


class XlaNativeRefused(ValueError):
    """`xla_native=True` asked for XLA's Triton call, which cannot take the call (`reason`)."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def log_route(route: str, spec: KernelCallSpec, reason: str) -> None:
    """Logs the route a lowering took, and why, at DEBUG, also as the record's attributes (for
    counting and for `info`)."""
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("jax_triton_rocm: kernel %s takes the %s route: %s", spec.kernel_name,
                     route, reason, extra={"jax_triton_rocm_route": route,
                                           "jax_triton_rocm_kernel": spec.kernel_name,
                                           "jax_triton_rocm_reason": reason})


_registered: set[str] = set()


@dataclasses.dataclass(frozen=True)
class GpuRoutes:
    """A GPU platform's routes, jaxlib's Triton call and XLA's."""

    backend: Backend

    def lower(self, ctx: LoweringRuleContext, operands: Sequence[Any],
              spec: KernelCallSpec) -> list:
        """Lowers one equation to jaxlib's Triton call or (asked) XLA's, logging which and why."""
        from jax_triton_rocm.routes import _lowering  # see `_routes`
        from jax_triton_rocm.routes.jaxlib import _jaxlib_call
        from jax_triton_rocm.routes.xla import _xla_native

        if spec.unwrapped.interpreted:
            raise TypeError(
                f"kernel {kernel_name(spec.unwrapped.jit_fn)!r} is Triton's InterpretedFunction, "
                f"not a @triton.jit function: TRITON_INTERPRET=1 was set when it was decorated, "
                f"and then @triton.jit makes every kernel (Triton's own helpers too) one that "
                f"runs only in Triton's interpreter. jax_triton_rocm runs it on the CPU, in that "
                f"interpreter, but cannot compile it for {self.backend.platform}. Unset "
                f"TRITON_INTERPRET before Triton is imported: the package runs kernels in "
                f"Triton's interpreter on the CPU by itself, and compiles them for a GPU.")
        asked, by, settings = spec.xla_native, "xla_native", None
        if not asked:  # jaxlib's route may follow: the environment, read once for the lowering
            settings = _env.lowering_settings(self.backend.lowering_variables, asked)
            if asked is None:
                asked, by = settings.xla_native, _env.ENV_XLA_NATIVE
        lowered = None
        if asked is None:
            reason = DEFAULT_REASON
        elif not asked:
            reason = f"{by}={'False' if by == 'xla_native' else '0'} asks for it"
        else:  # XLA's route, unless the call does not fit it (before or after the compile)
            route, taken = _xla_native.ROUTE, XLA
            lowered = _lowering.lowered_call(route, self.backend, ctx, spec, settings)
            reason = f"{by}={'True' if by == 'xla_native' else '1'} asks for it"
            if isinstance(lowered, _lowering.Unfit):
                if spec.xla_native:
                    raise XlaNativeRefused(
                        f"triton_call(xla_native=True) cannot be honoured for kernel "
                        f"{spec.kernel_name}: {lowered.reason}. Leave xla_native unset (or pass "
                        f"False) for jaxlib's Triton call, the default.", lowered.reason)
                reason, lowered = lowered.reason, None
        if lowered is None:
            route = _jaxlib_call.ROUTE
            lowered = _lowering.lowered_call(route, self.backend, ctx, spec, settings)
            taken = (JAXLIB_LEGACY if getattr(lowered, "custom_call_name", "")
                     == _compat.LEGACY_CALL_NAME else JAXLIB)
        if isinstance(lowered, _plan.Skipped):  # a call no program runs
            return skipped_results(ctx, operands, spec, lowered)
        results = route.emit(self.backend, ctx, operands, lowered, spec)
        log_route(taken, spec, reason)
        return results


class Interpreter:
    """The CPU's one route: Triton's interpreter runs the kernel on host buffers."""

    def lower(self, ctx: LoweringRuleContext, operands: Sequence[Any],
              spec: KernelCallSpec) -> list:
        from jax_triton_rocm.routes.cpu import _interpret

        log_route(INTERPRETER, spec, "lowered for the CPU")
        results = _interpret.lower(ctx, operands, spec)
        if isinstance(results, _plan.Skipped):
            return skipped_results(ctx, operands, spec, results)
        return results


def skipped_results(ctx: LoweringRuleContext, operands: Sequence[Any], spec: KernelCallSpec,
                    skipped: _plan.Skipped) -> list:
    """The results of a call that launches nothing, on every route: zeros for an output that
    the call zeroes (or that is empty), else the input it is aliased to, as it came."""
    logger.debug("jax_triton_rocm: kernel %s is not launched: its grid %s has a 0",
                 spec.kernel_name, skipped.grid)
    aliased = {o: i for i, o in spec.input_output_aliases}

    def results(*inputs: Any) -> list:
        return [inputs[aliased[o]] if o in aliased and o not in skipped.zeroed
                else jax.numpy.zeros(aval.shape, aval.dtype)
                for o, aval in enumerate(ctx.avals_out)]

    return mlir.lower_fun(results, multiple_results=True)(ctx, *operands)


@functools.cache
def _routes(platform: str) -> GpuRoutes | Interpreter:
    """The routes of `platform`, imported on first use under the lock that keeps a fork from
    splitting those imports."""
    with _state.IMPORTS.lowering():
        if platform == "cpu":
            from jax_triton_rocm.routes.cpu import _interpret  # noqa: F401

            return Interpreter()
        from jax_triton_rocm.routes.jaxlib import _jaxlib_call  # noqa: F401
        from jax_triton_rocm.routes.xla import _xla_native  # noqa: F401

        return GpuRoutes(backends.backend(platform))


def lower(platform: str, ctx: LoweringRuleContext, operands: Sequence[Any],
          spec: KernelCallSpec) -> list:
    """Lowers `spec` for `platform` ("cuda", "rocm" or "cpu"); returns the results."""
    return _routes(platform).lower(ctx, operands, spec)


def _rule_for(platform: str):
    def lower_triton_kernel(ctx, *operands, spec):
        return _routes(platform).lower(ctx, operands, spec)  # what `lower` does

    lower_triton_kernel.__qualname__ = f"lower_triton_kernel_{platform}"
    return lower_triton_kernel


# The CPU rule needs no plugin and imports nothing until it runs.
mlir.register_lowering(triton_kernel_p, _rule_for("cpu"), platform="cpu")


def registered_platforms() -> tuple[str, ...]:
    """The GPU platforms whose lowering rules are registered, sorted."""
    return tuple(sorted(_registered))


def register(platforms: Iterable[str] | None = None, *, explicit: bool = True) -> tuple[str, ...]:
    """Registers the lowering rules of `triton_kernel_p`; safe to call any number of times.

    Rules are registered for both GPU platforms whatever `platforms` says: with one, a lowering
    for a platform without a plugin or device gets the package's own error (or cross-compiles).

    Args:
      platforms: the platforms whose Triton backend `explicit` imports: "cuda" and/or "rocm";
        by default those whose jaxlib plugin is installed or whose architecture is named (by
        `target_arch(...)` on this thread or by `JAX_TRITON_ROCM_TARGET_ARCH`).
      explicit: import the vendor modules now, so a broken Triton fails here (True), or defer
        that to the first lowering (False, what JAX's `initialize()` does).

    Returns:
      All platforms registered so far, sorted.

    Raises:
      TypeError: `platforms` is a string (one name) instead of a sequence of names.
      ValueError: an unknown platform name, or a malformed `JAX_TRITON_ROCM_TARGET_ARCH`.
      RuntimeError: `JAX_TRITON_ROCM_TARGET_ARCH` was changed after it was read.
      ImportError: Triton, or its backend for a platform in use, is missing or broken.
    """
    if isinstance(platforms, (str, bytes)):  # "cuda" would be taken apart: 'c', 'u', ...
        raise TypeError(f"register: platforms={platforms!r} is a string, but platforms takes a "
                        f"sequence of platform names, e.g. ('cuda',) or ('cuda', 'rocm').")
    chosen = None if platforms is None else tuple(platforms)
    for platform in chosen or ():
        if platform not in _vendors.VENDORS:
            raise ValueError(f"platforms={chosen!r}: {platform!r} is not a GPU platform "
                             f"this package lowers for; use 'cuda' and/or 'rocm'.")
    registered = ensure_registered()
    if explicit:
        if chosen is None:  # the platforms in use
            installed = set(_vendors.installed_gpu_platforms())
            chosen = [p for p in _vendors.GPU_PLATFORMS
                      if _arch.named_arch(p) is not None or p in installed]
        for platform in chosen:
            _routes(platform)
    return registered


@functools.cache
def ensure_registered() -> tuple[str, ...]:
    """Registers the rules of both GPU platforms, once per process; the vendor modules are
    imported at the first lowering, which needs them, not by a trace, which does not."""
    with _state.LOCKS.lock_for("register"):
        for platform in _vendors.GPU_PLATFORMS:
            if platform not in _registered:
                mlir.register_lowering(triton_kernel_p, _rule_for(platform), platform=platform)
                _registered.add(platform)
    return tuple(sorted(_registered))  # `registered_platforms()`
