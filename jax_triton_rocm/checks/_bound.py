"""`triton_call`'s arguments, in jax-triton 0.3's or 0.4's form, checked into a `BoundCall`: the
call's spec (`checks._checker.check_call`), and the primitive's operands and results around it.

The primitive never sees a `Ref`: each is read before the call, passed as an operand aliased to
an extra result, and written back after it, so every route (jaxlib's call, XLA's, the
interpreter, the `jax.vmap` rule) sees plain aliasing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import jax

from jax_triton_rocm.base import _values
from jax_triton_rocm.checks import (_arguments, _call_options, _checker, _given, _placement,
                                    _reuse, _surface)
from jax_triton_rocm.launch._spec import KernelCallSpec


@dataclasses.dataclass(frozen=True)
class BoundCall:
    """A checked `triton_call`: bind `operands()` with `spec`, and hand the results to
    `outputs`."""

    spec: KernelCallSpec
    placed: _placement.Placed
    out_tree: Any
    arrays_only: bool = False  # every operand an array as given (a reused layout's)

    def operands(self) -> list[Any]:
        """The primitive's operands: arrays as given, each Ref read."""
        if self.arrays_only:
            return list(self.placed.operands)
        return [value[...] if _surface.is_ref(value) else value for value in self.placed.operands]

    def outputs(self, results: Sequence[Any]) -> Any:
        """Writes each Ref's result back to it; returns the outputs in the call's own tree."""
        results = list(results)
        for operand, result in self.placed.refs:
            self.placed.operands[operand][...] = results[result]
        return jax.tree_util.tree_unflatten(
            self.out_tree, [results[r] for r in self.placed.user_results])


def _has_descriptor(entries: Sequence[tuple[str, Any]]) -> bool:
    return any(kind == "descriptor" or (kind == "tuple" and _has_descriptor(value))
               for kind, value in entries)


def check_triton_call(args: tuple, keywords: dict[str, Any], *, kernel: Any, unwrapped: Any,
                      own_keywords: tuple[str, ...], out_shape: Any, out_type: Any,
                      backend_options: Any, cost_estimate: Any, has_side_effect: Any,
                      input_output_aliases: Any, zeroed_outputs: Any, settings: dict[str, Any],
                      constexprs: Any = None, operands: Any = None, **rest: Any) -> BoundCall:
    """Checks a `triton_call`; returns it bound.

    Args:
      args, keywords: the positional and keyword arguments meant for the kernel.
      own_keywords: triton_call's own keyword arguments (compared with a misspelt keyword).
      settings: num_warps, num_stages, num_ctas, debug, enable_fp_fusion as given (None: not
        given; `backend_options` may give them).
      constexprs, operands: parameters by name, compile-time constants and launch operands
        (`_surface.named_parameters`).
      rest: grid, name, compute_capability, serialized_metadata, batch_grid_axis, xla_native.
      The others: as `triton_call` takes them.

    A call laid out like an earlier one (new shapes, new runtime scalar values) reuses that
    layout (`checks._reuse`); one with `operands=` is checked in full every time.

    Raises:
      TypeError / ValueError / NotImplementedError: naming the argument, its value and the fix.
    """
    what, given_outputs = _call_options.convention(out_shape, out_type)
    out_shapes, out_tree = _arguments.out_shapes(given_outputs, what)
    args, keywords = _given.given_values(unwrapped.jit_fn, args, keywords)
    key = _reuse.layout_key(
        args, keywords, out_shapes, out_tree, kernel=kernel, unwrapped=unwrapped,
        grid=rest.get("grid"), convention=what, options=(
            backend_options, cost_estimate, has_side_effect, input_output_aliases, zeroed_outputs,
            constexprs, *settings.values(),
            *(value for name, value in rest.items() if name != "grid")))
    key = None if operands else key
    reused = _reuse.reuse(key, args, keywords, out_shapes, rest.get("grid"))
    if reused is not None:
        return BoundCall(reused[1], reused[0], out_tree, arrays_only=True)
    side_effect = _values.flag(has_side_effect, "has_side_effect")
    placed, keyword_options, by_keyword = _surface.bound_call(
        args, keywords, unwrapped=unwrapped, convention=what, outputs=given_outputs,
        out_shapes=out_shapes, input_output_aliases=input_output_aliases,
        zeroed_outputs=zeroed_outputs, has_side_effect=side_effect, own_keywords=own_keywords,
        named=_surface.named_parameters(unwrapped.jit_fn, constexprs, operands, keywords))
    options = _call_options.merged(settings, backend_options, keyword_options)
    if rest.get("batch_grid_axis") is not None and _has_descriptor(placed.positional):
        raise NotImplementedError(
            "batch_grid_axis with a TensorDescriptor operand: a descriptor describes one "
            "example. Leave batch_grid_axis=None (jax.vmap then calls the kernel once per "
            "example), or pass the base array and build the descriptor inside the kernel.")
    spec = _checker.check_call(
        "triton_call", kernel=kernel, unwrapped=unwrapped, positional=placed.positional,
        in_avals=placed.in_avals, out_shapes=placed.out_shapes,
        input_output_aliases=placed.aliases, zeroed_outputs=placed.zeroed,
        metaparams=placed.metaparams, options=options.compile_options, **options.settings,
        has_side_effect=side_effect, cost_estimate=_call_options.cost_estimate(cost_estimate),
        backend_options=options.backend_options, by_keyword=by_keyword, **rest)
    _reuse.remember(key, args, keywords, placed, spec, what)
    return BoundCall(spec, placed, out_tree)
