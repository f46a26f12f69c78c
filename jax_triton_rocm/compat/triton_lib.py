"""jax-triton 0.4.1's `jax_triton.triton_lib`: its `triton_call`, on jaxlib's route, and its
other names, each the package's equivalent or an error saying what to use instead.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypedDict, TypeVar, Union

import jax
import numpy as np

from jax_triton_rocm.api import _call
from jax_triton_rocm.api._inspect import CUSTOM_CALL_TARGET_NAME
from jax_triton_rocm.checks import _binder, _bound
from jax_triton_rocm.routes._primitive import triton_kernel_p
from jax_triton_rocm.kernel import _spec
from jax_triton_rocm.kernel._tensordesc import TensorDescriptor, strides_from_shape

# The names `from jax_triton_rocm.compat.triton_lib import *` gives: those provided here (the
# module's `__getattr__` adds Triton's `Autotuner`, `Heuristics`, `JITFunction`).
__all__ = ["CUSTOM_CALL_TARGET_NAME", "CostEstimate", "Grid", "ShapeDtype", "StaticScalar",
           "TensorDescriptor", "ValueOrFn", "normalize_grid", "strict_zip", "strides_from_shape",
           "triton_call", "triton_kernel_call_p"]

# jax-triton 0.4.1's `type` statements, written to import on Python 3.11 too.
_T = TypeVar("_T")
StaticScalar = Union[bool, int, float, np.float32]
Grid = Union[int, tuple[int], tuple[int, int], tuple[int, int, int]]
ValueOrFn = Union[_T, Callable[[Mapping[str, Any]], _T]]

triton_kernel_call_p = triton_kernel_p
"""The primitive every `triton_call` binds (the package's `triton_kernel_p`); its one parameter
is the package's `spec`, not jax-triton's `metaparams`, `grid`, ...: read `eqn.params["spec"]`."""

strict_zip = functools.partial(zip, strict=True)

# jax-triton 0.4.1's launch settings where neither the argument nor `backend_options` gives one
# (the package's own are the backend's defaults: 2 stages on AMD).
_JAX_TRITON_DEFAULTS = {"num_warps": 4, "num_stages": 3}


class CostEstimate(TypedDict, total=False):
    """`triton_call`'s `cost_estimate`, as jax-triton 0.4.1 types it (the package also takes
    "transcendentals")."""

    flops: int
    bytes_accessed: int


class ShapeDtype(Protocol):
    """Anything with `shape` and `dtype`, as `out_type` takes (jax-triton 0.4.1's protocol)."""

    @property
    def shape(self) -> tuple[int, ...]: ...

    @property
    def dtype(self) -> np.dtype: ...


def normalize_grid(grid: ValueOrFn[Grid], metaparams: Mapping[str, Any]) -> tuple[int, int, int]:
    """`grid` (called with `metaparams` if callable) as three ints, padded with 1s; TypeError
    or ValueError, naming its value, where it is not 1-3 ints of 0 or more."""
    return _spec.normalize_grid(grid(metaparams) if callable(grid) else grid)


def triton_call(
    *args: Any,
    kernel: Any,
    out_type: Any = None,
    grid: ValueOrFn[Grid],
    name: str = "",
    num_warps: int | None = None,
    num_stages: int | None = None,
    num_ctas: int | None = None,
    compute_capability: int | None = None,
    backend_options: Mapping[str, Any] | None = None,
    input_output_aliases: dict[int, int] | None = None,
    zeroed_outputs: ValueOrFn[Sequence[int]] = (),
    debug: bool = False,
    serialized_metadata: bytes = b"",
    cost_estimate: CostEstimate | None = None,
    has_side_effect: bool = False,
    **kwargs: Any,
) -> Any:
    """jax-triton 0.4.1's `triton_call`: calls a Triton (or Gluon) kernel on JAX arrays.

    The arguments are `jax_triton_rocm.triton_call`'s, with jax-triton 0.4.1's rules (those of
    `out_type`; [Porting from jax-triton](porting.md)): positional and keyword operands fill
    the kernel's non-constexpr parameters, outputs the ones left unfilled; `out_shape=` is a
    deprecated spelling of `out_type=`, and it, `input_output_aliases` and `zeroed_outputs`
    warn as 0.4.1 warns. Unless given (by argument or in `backend_options`, not both),
    `num_warps` is 4 and `num_stages` 3, as in jax-triton 0.4.1; an autotuned kernel's configs
    carry their own.

    Every call takes jaxlib's route (`xla_native=False`): a plain kernel lowers to one jaxlib
    custom call that writes the results (`triton_kernel_call_ffi`, or `triton_kernel_call` where
    XLA_FLAGS keeps custom calls out of command buffers: `JAX_TRITON_ROCM_CALL_TARGET`), which
    carries the caller's `jax.experimental.xla_metadata.set_xla_metadata` attributes; an
    autotuned kernel takes the package's target for autotuned calls
    ([Autotuning](autotuning.md)).

    Returns:
      The outputs, in the structure of `out_type`.

    Raises:
      TypeError / ValueError: a bad argument, named with its value and the fix.
    """
    # A kernel parameter that the arguments and outputs leave, named like one of this
    # triton_call's own arguments, only a keyword could fill, as in jax-triton 0.4.1.
    outputs = out_type if out_type is not None else kwargs.get("out_shape", ())
    taken_apart = _call.unwrapped_kernel(kernel)
    own = {*_binder.keyword_names(triton_call), "out_shape"}
    param = _bound.own_named_parameter(taken_apart, own,
                                        len(args) + len(jax.tree.leaves(outputs)))
    if param is not None:
        group = "constexprs" if param.is_constexpr else "operands"
        meaning = ", the deprecated spelling of out_type=" if param.name == "out_shape" else ""
        raise TypeError(
            f"triton_call: kernel {taken_apart.name}'s parameter {param.name!r} is named like an "
            f"argument of jax-triton 0.4.1's triton_call ({param.name}=...{meaning}), which "
            f"jax_triton_rocm.compat keeps as 0.4.1 has it, so nothing in this call can fill the "
            f"parameter. Call jax_triton_rocm.triton_call instead, with the same arguments: it "
            f"fills the parameter by name, {group}={{{param.name!r}: ...}}.")
    if "out_shape" in kwargs:
        if out_type is not None:
            raise TypeError("triton_call: give out_type= or the deprecated out_shape=, not "
                            "both (they are the same argument in jax-triton 0.4.1).")
        warnings.warn("out_shape= is deprecated in favor of out_type=", DeprecationWarning,
                      stacklevel=2)
        out_type = kwargs.pop("out_shape")
    elif out_type is None:
        raise TypeError("triton_call: give out_type= (the outputs, e.g. out_type=jax.typeof(x), "
                        "or out_type=() for none) or the deprecated out_shape=.")
    if input_output_aliases:
        warnings.warn("input_output_aliases is deprecated. Pass inputs you want to alias as Ref "
                      "arguments instead", DeprecationWarning, stacklevel=2)
    if zeroed_outputs if callable(zeroed_outputs) else len(zeroed_outputs):
        warnings.warn("zeroed_outputs is deprecated. Zero the buffer explicitly and pass it as a "
                      "Ref argument instead", DeprecationWarning, stacklevel=2)
    return on_jaxlib_route(
        triton_call, *args, kernel=kernel, grid=grid, out_type=out_type, name=name,
        num_warps=num_warps, num_stages=num_stages, num_ctas=num_ctas,
        compute_capability=compute_capability, backend_options=backend_options,
        input_output_aliases=input_output_aliases, zeroed_outputs=zeroed_outputs,
        debug=None if debug is False else debug, serialized_metadata=serialized_metadata,
        cost_estimate=cost_estimate, has_side_effect=has_side_effect, **kwargs)


def on_jaxlib_route(surface: Callable, *args: Any, kernel: Any,
                    num_warps: int | None, num_stages: int | None,
                    backend_options: Mapping[str, Any] | None = None, **kwargs: Any) -> Any:
    """`jax_triton_rocm.triton_call` on jaxlib's route, for a drop-in's `surface`: jax-triton's
    default warps and stages, and a package keyword `surface` lacks filling that parameter."""
    taken_apart = _call.unwrapped_kernel(kernel)
    settings = {"num_warps": num_warps, "num_stages": num_stages}
    if taken_apart.autotuner is None:  # an autotuned kernel's configs carry their own
        for key, default in _JAX_TRITON_DEFAULTS.items():
            if settings[key] is None and key not in (backend_options or {}):
                settings[key] = default
    if backend_options is not None:
        settings["backend_options"] = backend_options
    # A keyword that only jax_triton_rocm.triton_call has is, in jax-triton, a kernel
    # parameter's value (or a metaparameter that no parameter reads).
    package_only = (frozenset(_call.TRITON_CALL_KEYWORDS) - {*_binder.keyword_names(surface)}
                    - {"out_shape"})
    by_name: dict[str, dict[str, Any]] = {}
    params = {param.name: param for param in taken_apart.jit_fn.params}
    for key in package_only & kwargs.keys():
        if key not in params:
            raise TypeError(
                f"triton_call: {key}={kwargs[key]!r} names no parameter of the kernel "
                f"(parameters: {', '.join(params)}). `{key}` is an argument of "
                f"jax_triton_rocm.triton_call, not of jax-triton's, which "
                f"{surface.__module__}.triton_call offers; call jax_triton_rocm.triton_call "
                f"to use it.")
        group = "constexprs" if params[key].is_constexpr else "operands"
        by_name.setdefault(group, {})[key] = kwargs.pop(key)
    return _call.triton_call(*args, kernel=kernel, **settings, xla_native=False, **by_name,
                             **kwargs)


# jax-triton 0.4.1's names of its own compiler and lowering, with what to use instead.
_COMPILE = ("the package compiles through its own kernel cache: jax_triton_rocm.target_arch "
            "picks the architecture, jax_triton_rocm.kernel_calls(lowered) shows each compiled "
            "kernel, jax_triton_rocm.clear_caches() drops them")
_LOWERING = ("the package's lowering: jax_triton_rocm.triton_call_lowering lowers a kernel call in "
             "your own primitive's rule, jax_triton_rocm.kernel_calls(lowered) reads what a "
             "lowering emitted")
_RULES = ("the rules of the package's primitive (triton_kernel_call_p here, "
          "jax_triton_rocm.triton_kernel_p): jax.vmap works, jax.grad raises naming "
          "jax.custom_vjp")
_NOT_PROVIDED = {
    **dict.fromkeys(("TritonFunction", "KernelSpecialization", "CompilationResult",
                     "compile_ttir_inplace", "compile_ttir_to_ptx_inplace",
                     "compile_ttir_to_hsaco_inplace", "make_cuda_target", "make_hip_target"),
                    _COMPILE),
    **dict.fromkeys(("get_type_id", "to_python_type", "aval_size_bytes", "TensorDescMeta",
                     "triton_kernel_call_lowering"), _LOWERING),
    **dict.fromkeys(("triton_kernel_call_abstract_eval", "triton_kernel_call_raise_on_jvp",
                     "triton_kernel_call_raise_on_vmap"), _RULES),
}


def __getattr__(name: str) -> Any:
    if name in ("Autotuner", "Heuristics"):  # Triton's, imported only when asked for
        import triton.runtime

        return getattr(triton.runtime, name)
    if name == "JITFunction":
        import triton
        from triton.experimental.gluon._runtime import GluonJITFunction

        return triton.JITFunction | GluonJITFunction
    return not_provided(__name__, name, _NOT_PROVIDED, "jax_triton_rocm.compat")


def not_provided(module: str, name: str, table: Mapping[str, str], drop_in: str) -> Any:
    """Raises for `name`, missing from a drop-in: NotImplementedError saying what to use instead
    where `table` has it, else AttributeError."""
    if name in table:
        # Not an AttributeError: `from ... import name` would replace its message with its own.
        raise NotImplementedError(
            f"jax_triton.triton_lib.{name} is part of jax-triton's own compiler and "
            f"lowering, which {drop_in} does not reproduce; instead: {table[name]}.")
    raise AttributeError(f"module {module!r} has no attribute {name!r}")
