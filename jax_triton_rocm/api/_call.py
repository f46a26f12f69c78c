"""`triton_call`: a Triton kernel called on JAX arrays; its arguments are checked into one
`KernelCallSpec` (`checks`), which `triton_kernel_p` carries to the lowering rules."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax

from jax_triton_rocm.base import _compat
from jax_triton_rocm.checks import _arguments, _checker
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
    out_shape: Any,
    grid: Grid,
    name: str = "",
    num_warps: int | None = None,
    num_stages: int | None = None,
    num_ctas: int = 1,
    compute_capability: int | None = None,
    enable_fp_fusion: bool = True,
    input_output_aliases: Mapping[int, int] | None = None,
    zeroed_outputs: Sequence[int] | Callable[[dict[str, Any]], Sequence[int]] = (),
    debug: bool = False,
    serialized_metadata: bytes = b"",
    batch_grid_axis: int | None = None,
    xla_native: bool | None = None,
    **metaparams: Any,
) -> Any:
    """Calls a Triton (or Gluon) kernel on JAX arrays; works eagerly and inside `jax.jit`.

    The kernel's parameters are filled in order: `args` (arrays and Python/NumPy scalars), then
    one pointer per output of `out_shape`, then constexpr parameters by name from `metaparams`
    (or the kernel's defaults). Scalars are typed as Triton's own launcher types them: bool is
    "u1", int "i32"/"i64"/"u64" by range (an int equal to 1 becomes a constexpr), float "fp32".

    Args:
      *args: the inputs: arrays (any dtype Triton takes, fp8 and bf16 included) and scalars.
      kernel: a @triton.jit or @gluon.jit function, bare or in @triton.autotune/@triton.heuristics.
      out_shape: a `jax.ShapeDtypeStruct` (anything with .shape and .dtype) or a pytree of them.
      grid: an int, a tuple of 1-3 ints, or a callable of the metaparameters returning one.
      name: a name for the call (shown by jaxlib and profilers).
      num_warps: warps per program (Triton's default: 4). On AMD wave32 GPUs it must be even.
        A Gluon kernel's layouts must have warps_per_cta multiplying to it.
      num_stages: software-pipelining depth (the backend's default when None).
      num_ctas: CTAs per cluster (Hopper and newer).
      compute_capability: a CUDA compute capability (e.g. 80) to compile for instead of the
        device's; `target_arch` is the general form. Where the computation runs on devices of
        another architecture, the call carries PTX, which jaxlib builds for them at load.
      enable_fp_fusion: let the compiler fuse multiply-add.
      input_output_aliases: {array-argument index: output index}, buffers that share memory
        (donate the input under `jit` to avoid a copy).
      zeroed_outputs: output indices zeroed before the launch, or a callable of the
        metaparameters returning them.
      debug: compile with Triton's debug mode (device assertions) and print the IRs.
      serialized_metadata: bytes carried in the kernel call for the caller's own use.
      batch_grid_axis: None (under `jax.vmap`, one call per example, in a loop), or the grid
        axis (0-2) whose program id is the example index when the kernel batches itself, in
        one launch; the protocol the kernel must follow is in the README (`jax.vmap`).
      xla_native: True launches through XLA's own Triton custom call where the kernel fits it,
        False through jaxlib's; None follows JAX_TRITON_ROCM_XLA_NATIVE, else the automatic
        rule (README: "Which route a call takes"). A kernel that does not fit takes jaxlib's
        call, with a debug log saying why.
      **metaparams: constexpr parameters by name, and the compile options `waves_per_eu`,
        `matrix_instr_nonkdim`, `kpack` (AMD) and `maxnreg` (NVIDIA) unless the kernel has a
        parameter of that name.

    Returns:
      The outputs, in the structure of `out_shape`.

    Raises:
      ImportError: Triton is not installed or does not import.
      TypeError / ValueError: a bad argument; the message names it, its value and the fix.
    """
    unwrapped = _unwrap_ready(kernel)
    metaparams, options = _arguments.split_compile_options(unwrapped.jit_fn, metaparams,
                                                           _OWN_KEYWORDS)
    arrays, positional = _arguments.split_arguments(args)
    out_shapes, out_tree = _arguments.out_shapes(out_shape)
    _arguments.check_own_names(unwrapped, len(positional) + len(out_shapes), _OWN_KEYWORDS)
    spec = _checker.check_call(
        "triton_call", kernel=kernel, unwrapped=unwrapped, positional=positional,
        in_avals=tuple(arrays), out_shapes=tuple(out_shapes), grid=grid, name=name,
        num_warps=num_warps, num_stages=num_stages, num_ctas=num_ctas,
        compute_capability=compute_capability, enable_fp_fusion=enable_fp_fusion,
        input_output_aliases=input_output_aliases, zeroed_outputs=zeroed_outputs, debug=debug,
        serialized_metadata=serialized_metadata, batch_grid_axis=batch_grid_axis,
        xla_native=xla_native, metaparams=metaparams, options=options)
    return jax.tree_util.tree_unflatten(out_tree, triton_kernel_p.bind(*arrays, spec=spec))


# triton_call's own keyword arguments: a kernel parameter of one of these names cannot be set by
# keyword, and a misspelt keyword is compared with them.
_OWN_KEYWORDS = _arguments.keyword_names(triton_call)
