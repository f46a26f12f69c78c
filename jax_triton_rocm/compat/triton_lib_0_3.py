"""jax-triton 0.3.1's `jax_triton.triton_lib` (`compat.v0_3.triton_lib`): its `triton_call`, on
jaxlib's route, and its other names, each the package's equivalent or an error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from jax_triton_rocm.api._inspect import CUSTOM_CALL_TARGET_NAME
from jax_triton_rocm.base import _env
from jax_triton_rocm.compat import triton_lib as _v0_4
from jax_triton_rocm.compat.triton_lib import (Grid, ShapeDtype, ValueOrFn, normalize_grid,
                                               triton_kernel_call_p)

__all__ = ["CAN_USE_TRITON", "Grid", "GridOrLambda", "ShapeDtype", "normalize_grid",
           "triton_call", "triton_kernel_call_p"]

CAN_USE_TRITON = True
"""True: the package needs Triton, so `triton_call` is always available."""

GridOrLambda = ValueOrFn[Grid]

# jaxlib's two Triton targets: the one 0.3.1 names by default, and the typed-FFI one.
_JAXLIB_TARGETS = ("triton_kernel_call", CUSTOM_CALL_TARGET_NAME)


def triton_call(
    *args: Any,
    kernel: Any,
    out_shape: Any,
    grid: ValueOrFn[Grid],
    name: str = "",
    custom_call_target_name: str = "triton_kernel_call",
    num_warps: int | None = None,
    num_stages: int | None = None,
    num_ctas: int = 1,
    compute_capability: int | None = None,
    enable_fp_fusion: bool = True,
    input_output_aliases: dict[int, int] | None = None,
    zeroed_outputs: ValueOrFn[Sequence[int]] = (),
    debug: bool = False,
    serialized_metadata: bytes = b"",
    **metaparams: Any,
) -> Any:
    """jax-triton 0.3.1's `triton_call`: calls a Triton kernel on JAX arrays.

    The arguments are `jax_triton_rocm.triton_call`'s, with jax-triton 0.3.1's rules (those of
    `out_shape`; [Porting from jax-triton](porting.md)): positional arguments fill the kernel's
    parameters in order and the outputs' pointers follow them; a keyword (`**metaparams`) is a
    constexpr (an operand if it holds an array), and one an autotune config also sets keeps the
    configs that agree with it, as a launch setting given does (`num_ctas=1`, the default, keeps
    them all); `input_output_aliases` counts array arguments. Unless given,
    `num_warps` is 4 and `num_stages` 3 (an autotuned kernel's configs carry their own), and
    floating-point fusion is on, as in 0.3.1.

    The call takes jaxlib's route (`xla_native=False`), as 0.3.1's does; a plain kernel lowers
    to jaxlib's typed-FFI target unless XLA_FLAGS keeps custom calls out of command buffers
    (`JAX_TRITON_ROCM_CALL_TARGET`), where 0.3.1 always takes `triton_kernel_call`:
    `custom_call_target_name` may name either of jaxlib's two targets, "triton_kernel_call"
    (the default) or "triton_kernel_call_ffi", and the package picks between them.

    Returns:
      The outputs, in the structure of `out_shape`.

    Raises:
      TypeError / ValueError: a bad argument, named with its value and the fix.
    """
    if custom_call_target_name not in _JAXLIB_TARGETS:
        raise ValueError(
            f"triton_call: custom_call_target_name={custom_call_target_name!r} is none of "
            f"jaxlib's Triton targets ({', '.join(_JAXLIB_TARGETS)}), which jax_triton_rocm "
            f"chooses between; drop the argument, or set {_env.ENV_CALL_TARGET}=ffi or legacy "
            f"to force one.")
    return _v0_4.on_jaxlib_route(
        triton_call, *args, kernel=kernel, out_shape=out_shape, grid=grid, name=name,
        # 0.3.1's default, one CTA, leaves an autotuned kernel's configs unpruned.
        num_warps=num_warps, num_stages=num_stages,
        num_ctas=None if num_ctas == 1 else num_ctas,
        compute_capability=compute_capability, enable_fp_fusion=enable_fp_fusion,
        input_output_aliases=input_output_aliases, zeroed_outputs=zeroed_outputs,
        debug=None if debug is False else debug, serialized_metadata=serialized_metadata,
        **metaparams)


# jax-triton 0.3.1's names of its own compiler and lowering, with what to use instead.
_NOT_PROVIDED: dict[str, str] = {
    **{name: _v0_4._NOT_PROVIDED[name] for name in (
        "CompilationResult", "compile_ttir_inplace", "compile_ttir_to_ptx_inplace",
        "compile_ttir_to_hsaco_inplace", "aval_size_bytes", "triton_kernel_call_lowering",
        "triton_kernel_call_abstract_eval", "triton_kernel_call_raise_on_jvp",
        "triton_kernel_call_raise_on_vmap")},
    **dict.fromkeys(("get_or_create_triton_kernel", "get_cuda_backend", "get_hip_backend"),
                    _v0_4._COMPILE),
    **dict.fromkeys(("get_triton_type", "avals_to_layouts"), _v0_4._LOWERING),
}


def __getattr__(name: str) -> Any:
    return _v0_4.not_provided(__name__, name, _NOT_PROVIDED, "jax_triton_rocm.compat.v0_3")
