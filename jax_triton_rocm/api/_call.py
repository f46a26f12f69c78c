"""`triton_call`: a Triton kernel called on JAX arrays; its arguments, in jax-triton 0.3's form or
0.4's, are checked into one `KernelCallSpec` (`checks`), which `triton_kernel_p` carries to the
lowering rules."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from jax_triton_rocm.base import _compat
from jax_triton_rocm.checks import _bound
from jax_triton_rocm.launch import _kernel
from jax_triton_rocm.launch._spec import Grid
from jax_triton_rocm.lowering import _rules
from jax_triton_rocm.lowering._primitive import triton_kernel_p


def _unwrap_ready(kernel: Any) -> _kernel.Unwrapped:
    """`kernel` taken apart, once Triton has imported and the lowering rules are registered."""
    _compat.triton_info()
    _rules.ensure_registered()
    return _kernel.unwrap(kernel)


def triton_call(
    *args: Any,
    kernel: Any,
    grid: Grid,
    out_type: Any = None,
    out_shape: Any = None,
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
    **kwargs: Any,
) -> Any:
    """Calls a Triton (or Gluon) kernel on JAX arrays; works eagerly and inside `jax.jit`.

    Takes jax-triton 0.4's call surface and 0.3's (README: "Porting from jax-triton"):
    positional arguments fill the kernel's parameters in order; keywords naming a `tl.constexpr`
    parameter (or, with `out_shape=`, any parameter given a Python value) are compile-time
    constants; other keywords naming a parameter are operands (`out_type=`). Operands are
    arrays, scalars, `Ref`s (`jax.new_ref`: updated in place), `TensorDescriptor`s, None and
    tuples of them. The outputs fill the non-constexpr parameters left unfilled, in order (with
    `input_output_aliases`, possibly only the unaliased ones). Scalars are typed as Triton's
    launcher types them: bool is "u1", int "i32"/"i64"/"u64" by range (an int equal to 1
    becomes a constexpr), float "fp32" (or "fp64" where float32 cannot hold it).

    Args:
      *args: the operands, in the kernel's parameter order.
      kernel: a @triton.jit or @gluon.jit function, bare or in @triton.autotune/@triton.heuristics.
      grid: an int, a tuple of 1-3 ints, or a callable of the metaparameters returning one.
      out_type, out_shape: the outputs: a `jax.ShapeDtypeStruct` (anything with .shape and
        .dtype, `jax.typeof(x)` too) or a pytree of them (`()` for none, with Refs or
        `has_side_effect`). Exactly one: `out_type` follows jax-triton 0.4's conventions,
        `out_shape` 0.3's (keywords and `input_output_aliases`, as above and below).
      name: a name for the call (shown by jaxlib and profilers).
      num_warps: warps per program (Triton's default: 4). On AMD wave32 GPUs it must be even.
        A Gluon kernel's layouts must have warps_per_cta multiplying to it.
      num_stages: software-pipelining depth (the backend's default when None).
      num_ctas: CTAs per cluster (Hopper and newer; default 1).
      compute_capability: a CUDA compute capability (e.g. 90) to compile for instead of the
        device's; `target_arch` is the general form.
      enable_fp_fusion: let the compiler fuse multiply-add (default True).
      backend_options: Triton compile options: the settings above (each given once, here or
        as its argument), the vendor knobs, and other fields of the vendor's Triton options
        class (`CUDAOptions`, `HIPOptions`), each passed to the backend that has it.
      input_output_aliases: {input index: output index}, buffers that share memory (donate
        the input under `jit` to avoid a copy). With `out_shape`, input indices count the array
        operands; with `out_type`, every operand leaf in kernel-parameter order, scalars too.
      zeroed_outputs: output indices zeroed before the launch, or a callable of the
        metaparameters returning them.
      debug: compile with Triton's debug mode (device assertions) and print the IRs.
      serialized_metadata: bytes carried in the kernel call for the caller's own use.
      cost_estimate: {"flops": n, "bytes_accessed": n, "transcendentals": n} for profilers
        (carried by jaxlib's typed-FFI call).
      has_side_effect: keep the call even when nothing uses its results.
      batch_grid_axis: None (under `jax.vmap`, one call per example, in a loop), or the grid
        axis (0-2) whose program id is the example index when the kernel batches itself, in
        one launch; the protocol the kernel must follow is in the README (`jax.vmap`).
      xla_native: launch through XLA's own Triton custom call when the kernel fits it (README:
        "XLA's Triton custom call"); None follows JAX_TRITON_ROCM_XLA_NATIVE (default off). A
        kernel that does not fit takes jaxlib's call, with a debug log saying why.
      **kwargs: kernel parameters by name (constexprs, or operands as above), and the compile
        options `waves_per_eu`, `matrix_instr_nonkdim`, `kpack` (AMD) and `maxnreg` (NVIDIA)
        unless the kernel has a parameter of that name.

    Returns:
      The outputs, in the structure of `out_type` / `out_shape`.

    Raises:
      ImportError: Triton is not installed or does not import.
      TypeError / ValueError: a bad argument; the message names it, its value and the fix.
    """
    unwrapped = _unwrap_ready(kernel)
    call = _bound.check_triton_call(
        args, kwargs, kernel=kernel, unwrapped=unwrapped, out_shape=out_shape,
        out_type=out_type, backend_options=backend_options, cost_estimate=cost_estimate,
        has_side_effect=has_side_effect, input_output_aliases=input_output_aliases,
        zeroed_outputs=zeroed_outputs, grid=grid, name=name,
        compute_capability=compute_capability, serialized_metadata=serialized_metadata,
        batch_grid_axis=batch_grid_axis, xla_native=xla_native,
        settings=dict(num_warps=num_warps, num_stages=num_stages, num_ctas=num_ctas,
                      debug=debug, enable_fp_fusion=enable_fp_fusion))
    return call.outputs(triton_kernel_p.bind(*call.operands(), spec=call.spec))
