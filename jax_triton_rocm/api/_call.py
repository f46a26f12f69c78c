"""`triton_call`: a Triton kernel called on JAX arrays; its arguments checked into one
`KernelCallSpec` (`checks._bound`), which `triton_kernel_p` carries to the lowering rules."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from jax_triton_rocm.base import _compat, _state
from jax_triton_rocm.checks import _arguments, _binder, _bound
from jax_triton_rocm.routes import _primitive
from jax_triton_rocm.routes._primitive import triton_kernel_p
from jax_triton_rocm.kernel import _spec
from jax_triton_rocm.kernel._spec import Grid


def triton_call(
    *args: Any,
    kernel: Any,
    grid: Grid,
    out_type: Any = _arguments.NOT_GIVEN,
    out_shape: Any = _arguments.NOT_GIVEN,
    name: str = "",
    num_warps: int | None = None,
    num_stages: int | None = None,
    num_ctas: int | None = None,
    compute_capability: int | None = None,
    enable_fp_fusion: bool | None = None,
    backend_options: Mapping[str, Any] | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
    zeroed_outputs: Sequence[int] | Callable[[dict[str, Any]], Sequence[int]] = (),
    debug: bool | None = None,
    serialized_metadata: bytes = b"",
    cost_estimate: Mapping[str, int] | None = None,
    has_side_effect: bool = False,
    batch_grid_axis: int | None = None,
    xla_native: bool | None = None,
    constexprs: Mapping[str, Any] | None = None,
    operands: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> Any:
    """Calls a Triton (or Gluon) kernel on JAX arrays; works eagerly and inside `jax.jit`.

    Takes jax-triton 0.4's call surface and 0.3's; the rules are in
    [Porting from jax-triton](porting.md). Positional arguments fill the kernel's parameters in
    order; a keyword naming a `tl.constexpr` is a constant, one naming another parameter an
    operand (with `out_shape`, a constant unless it holds an array). Operands are arrays,
    scalars, `Ref`s (updated in place), `TensorDescriptor`s, None and tuples of them. Outputs
    fill the non-constexpr parameters left unfilled, in order: all of them, or only those not
    aliased to an input.

    Args:
      *args: the operands, in the kernel's parameter order.
      kernel: a @triton.jit or @gluon.jit function, bare or in @triton.autotune/@triton.heuristics.
      grid: an int, a tuple of 1-3 ints, or a callable of the metaparameters returning one.
        A size of 0 (`triton.cdiv(0, BLOCK)`) launches nothing, as Triton's launcher skips
        it: each output must then be empty, zeroed or aliased to an input.
      out_type: the outputs, jax-triton 0.4's convention (give it or `out_shape`, not both):
        anything with .shape and .dtype, or a pytree of them; `()` with Refs,
        `has_side_effect`, or a kernel that takes nothing at launch (constexprs only), whose
        call is kept as if `has_side_effect`.
      out_shape: the outputs as `out_type`, in jax-triton 0.3's convention.
      name: a name for the call (shown by jaxlib and profilers).
      num_warps: warps per program (None: the target's default; AMD wave32 needs an even
        number, a Gluon kernel's layouts must fit it). Given to an autotuned kernel, this and
        the other launch settings keep the configs that agree ([Autotuning](autotuning.md)).
      num_stages: software-pipelining stages (None: the target's default).
      num_ctas: CTAs per cluster (None: 1).
      compute_capability: a CUDA compute capability to compile for (`target_arch` is general;
        on devices of another architecture the call carries PTX, which jaxlib builds there).
      enable_fp_fusion: let the compiler fuse multiply-add (default True).
      backend_options: Triton compile options: the settings above, the vendor knobs, and other
        fields of a vendor's Triton options class, each passed to the vendor that has it.
      input_output_aliases: {input index: output index}, buffers that share memory. Input
        indices count array operands (`out_shape`) or every operand leaf (`out_type`).
      zeroed_outputs: output indices zeroed before the launch, or a callable of `meta`.
      debug: compile with Triton's debug mode (device assertions) and print the IRs.
      serialized_metadata: bytes carried in the kernel call for the caller's own use.
      cost_estimate: {"flops": n, "bytes_accessed": n, "transcendentals": n} for profilers.
      has_side_effect: keep the call even when nothing uses its results.
      batch_grid_axis: under `jax.vmap`, None (a loop) or the grid axis (0-2) that indexes the
        examples in one launch ([jax.vmap and batching](batching.md)).
      xla_native: True takes XLA's own Triton call where the kernel fits it, False jaxlib's;
        None follows JAX_TRITON_ROCM_XLA_NATIVE, else the rule in
        [Routes and performance](routes.md) ("Which route a call takes").
      constexprs: {parameter name: value}, compile-time constants in either convention (as
        `triton_call_lowering` takes them): the way to fill a parameter named like one of
        triton_call's own arguments (`num_stages`, `grid`, `name`, ...).
      operands: {parameter name: operand}, parameters filled at launch (arrays, scalars,
        Refs, descriptors, tuples) in either convention, as 0.4's keyword operands are.
      **kwargs: kernel parameters by name, and the vendor knobs `waves_per_eu`,
        `matrix_instr_nonkdim`, `kpack` (AMD) and `maxnreg` (NVIDIA).

    Returns:
      The outputs, in the structure of `out_type` / `out_shape`.

    Raises:
      ImportError: Triton is not installed or does not import.
      TypeError / ValueError: a bad argument; the message names it, its value and the fix.
    """
    record = _state.KERNEL_RECORDS.record(kernel)  # what the call derives from its kernel
    call = _bound.check_triton_call(_arguments.call_arguments(
        args, kwargs, kernel, unwrapped_kernel(kernel, record),
        out_shape=out_shape, out_type=out_type,
        given=dict(grid=grid, name=name, num_warps=num_warps, num_stages=num_stages,
                   num_ctas=num_ctas, compute_capability=compute_capability,
                   enable_fp_fusion=enable_fp_fusion, debug=debug,
                   serialized_metadata=serialized_metadata, batch_grid_axis=batch_grid_axis,
                   xla_native=xla_native, zeroed_outputs=zeroed_outputs),
        backend_options=backend_options, cost_estimate=cost_estimate,
        has_side_effect=has_side_effect, input_output_aliases=input_output_aliases,
        constexprs=constexprs, operands=operands), TRITON_CALL_KEYWORDS)
    results = triton_kernel_p.bind(*call.operands, spec=call.spec)
    # Each Ref was read into an operand; its extra result is written back.
    for operand, result in call.placed.refs:
        call.placed.operands[operand][...] = results[result]
    return jax.tree_util.tree_unflatten(
        call.out_tree, [results[r] for r in call.placed.user_results])


def unwrapped_kernel(kernel: Any, record: dict | None = None) -> _spec.Unwrapped:
    """`kernel` taken apart (Triton imported, the lowering rules registered), kept in its
    record."""
    _compat.triton_info()  # both cached: once per process
    _primitive.ensure_registered()
    record = _state.KERNEL_RECORDS.record(kernel) if record is None else record
    if (unwrapped := record.get("unwrapped")) is None:
        unwrapped = record["unwrapped"] = _spec.unwrap(kernel)
    return unwrapped


# A kernel parameter named like one of these cannot be set by keyword.
TRITON_CALL_KEYWORDS = _binder.keyword_names(triton_call)
