"""`triton_call`: checks a call's arguments and binds `triton_kernel_p`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from jax_triton_rocm import _plugin
from jax_triton_rocm.api import _batching
from jax_triton_rocm.base import _compat, _values
from jax_triton_rocm.launch import _configs, _grid, _kernel, _layout, _types
from jax_triton_rocm.lowering import _target
from jax_triton_rocm.lowering._primitive import triton_kernel_p

Grid = int | tuple[int, ...] | Callable[[dict[str, Any]], Any]

_RENAMED_KEYWORDS = {
    "custom_call_target_name": "jax_triton_rocm picks the custom-call target from the "
                               "installed jaxlib (typed FFI where it exists); drop this argument.",
}


def _out_shapes(out_shape: Any) -> tuple[list[jax.ShapeDtypeStruct], Any]:
    leaves, tree = jax.tree_util.tree_flatten(
        out_shape, is_leaf=lambda x: hasattr(x, "shape") and hasattr(x, "dtype"))
    if not leaves:
        raise ValueError("out_shape is empty; a Triton kernel call needs at least one output, "
                         "e.g. out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype).")
    shapes = []
    for i, leaf in enumerate(leaves):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"out_shape leaf {i} is {leaf!r}; each output needs a .shape and a "
                            f".dtype, e.g. jax.ShapeDtypeStruct((n,), jnp.float32).")
        _types.pointer_type(leaf.dtype, what=f"output {i}")
        shapes.append(jax.ShapeDtypeStruct(tuple(leaf.shape), np.dtype(leaf.dtype)))
    return shapes, tree


def _check_aliases(aliases: Any, arrays: list, outs: list) -> tuple:
    if aliases is None:
        aliases = {}
    if not isinstance(aliases, Mapping):
        raise TypeError(f"input_output_aliases={aliases!r} must be a dict {{array-argument "
                        f"index: output index}}, e.g. {{0: 0}}.")
    pairs = []
    for in_idx, out_idx in dict(aliases).items():
        if not (isinstance(in_idx, int) and 0 <= in_idx < len(arrays)):
            raise ValueError(
                f"input_output_aliases={dict(aliases)!r}: input index {in_idx!r} is not one of "
                f"the {len(arrays)} array arguments (indices count arrays only, not scalars).")
        if not (isinstance(out_idx, int) and 0 <= out_idx < len(outs)):
            raise ValueError(f"input_output_aliases={dict(aliases)!r}: output index {out_idx!r} "
                             f"is not one of the {len(outs)} outputs.")
        src, dst = arrays[in_idx], outs[out_idx]
        if tuple(src.shape) != tuple(dst.shape) or np.dtype(src.dtype) != np.dtype(dst.dtype):
            raise ValueError(
                f"input_output_aliases: input {in_idx} ({src.dtype}{list(src.shape)}) and output "
                f"{out_idx} ({dst.dtype}{list(dst.shape)}) must have the same shape and dtype to "
                f"share a buffer.")
        pairs.append((in_idx, out_idx))
    if len({o for _, o in pairs}) != len(pairs):
        raise ValueError(f"input_output_aliases={dict(aliases)!r} aliases one output twice.")
    return tuple(sorted(pairs))


def _check_zeroed(zeroed: Any, n_outs: int) -> Any:
    """The output indices to zero; a callable is checked here for its arity and at lowering
    (`_values.output_indices`) for what it returns."""
    if callable(zeroed):
        _check_takes_meta(zeroed, "zeroed_outputs")
        return zeroed
    return _values.output_indices(zeroed, n_outs, what="zeroed_outputs")


def _check_takes_meta(fn: Callable, what: str) -> None:
    """Raises unless `fn` can be called with one positional argument (the metaparameters)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin or C callable without one: trust it
        return
    try:
        signature.bind({})
    except TypeError as err:
        raise TypeError(
            f"{what}={fn!r} must take one argument, the dict of metaparameters (as Triton's "
            f"launcher passes it), e.g. lambda meta: (n // meta['BLOCK'],); its signature is "
            f"{signature}.") from err


def _check_call_options(jit_fn: Any, metaparams: dict[str, Any], name: Any,
                        enable_fp_fusion: Any, debug: Any) -> tuple[dict, str, bool, bool, dict]:
    """The call's constexprs, name, flags and vendor compile options, checked (see `_checks`)."""
    metaparams, options = _split_compile_options(jit_fn, metaparams)
    if not isinstance(name, str):
        raise TypeError(f"name={name!r} must be a str (the call's name for jaxlib and "
                        f"profilers), got {type(name).__name__}.")
    return (metaparams, name, _values.flag(enable_fp_fusion, "enable_fp_fusion"),
            _values.flag(debug, "debug"), _values.compile_options(options))


def _split_compile_options(jit_fn: Any, metaparams: dict[str, Any]) -> tuple[dict, dict]:
    """Splits the call's keywords into constexprs and vendor compile options.

    A keyword named like a compile option (`waves_per_eu`, `maxnreg`, ...) is one unless the
    kernel has a parameter of that name.

    Raises:
      TypeError: a jax-triton keyword this package replaces, or an unhashable value.
    """
    for keyword, advice in _RENAMED_KEYWORDS.items():
        if keyword in metaparams:
            raise TypeError(f"triton_call got {keyword}={metaparams[keyword]!r}: {advice}")
    constexprs = dict(metaparams)
    options = {k: constexprs.pop(k) for k in metaparams
               if k in _kernel.COMPILE_OPTIONS and k not in jit_fn.arg_names}
    for keyword, value in metaparams.items():
        try:
            hash(value)
        except TypeError:
            raise TypeError(
                f"{keyword}={value!r} must be hashable (JAX caches compiled calls by their "
                f"static arguments): pass a tuple instead of a list, or a plain value.") from None
    return constexprs, options


def _split_arguments(args: tuple) -> tuple[list[Any], tuple[tuple[str, Any], ...]]:
    """The array operands, and each positional argument as ("array", operand index) or
    ("scalar", value).

    Raises:
      TypeError: an argument that is neither an array nor a scalar, or a dtype or scalar type
        Triton cannot take; each names the argument.
    """
    arrays: list[Any] = []
    positional: list[tuple[str, Any]] = []
    for i, arg in enumerate(args):
        if arg is None or _types.is_scalar(arg):
            if arg is not None:
                _types.scalar(arg, what=f"argument {i}")
            positional.append(("scalar", arg))
        elif hasattr(arg, "shape") and hasattr(arg, "dtype"):
            _types.pointer_type(arg.dtype, what=f"argument {i}")
            positional.append(("array", len(arrays)))
            arrays.append(arg if isinstance(arg, jax.Array) else jax.numpy.asarray(arg))
        else:
            raise TypeError(f"argument {i} has type {type(arg).__name__} ({arg!r}); triton_call "
                            f"takes arrays and bool/int/float scalars.")
    return arrays, tuple(positional)


def _check_launch(grid: Any, num_warps: Any, num_stages: Any, num_ctas: Any,
                  compute_capability: Any, serialized_metadata: Any) -> None:
    """Checks the launch settings a call gives; a callable grid is checked per config at
    lowering."""
    if callable(grid):
        _check_takes_meta(grid, "grid")
    else:
        _grid.normalize_grid(grid)
    _values.launch_settings(num_warps, num_stages, num_ctas)
    if compute_capability is not None:
        _target.normalize_arch("cuda", compute_capability, what="compute_capability")
    if not isinstance(serialized_metadata, bytes):
        raise TypeError(f"serialized_metadata must be bytes, got "
                        f"{type(serialized_metadata).__name__}.")


def _check_kernel_arguments(unwrapped: _kernel.Unwrapped, positional: tuple, arrays: list,
                            out_shapes: list, metaparams: dict[str, Any]) -> None:
    """Checks the call against the kernel's parameters, so that a mistake fails at the call and
    not later at lowering.

    A plain kernel's arguments are laid out as the lowering will lay them. An autotuned kernel's
    constexprs come from its configs and heuristics at lowering, so for it the operands and
    keywords are checked (the same check, `_layout.check_operands`) and the autotuner's
    features.
    """
    jit_fn = unwrapped.jit_fn
    if unwrapped.autotuner is None and not unwrapped.heuristics:
        _layout.check_plain_call(jit_fn, positional, arrays, out_shapes, metaparams)
        return
    if unwrapped.autotuner is not None:
        _configs.check_autotuner(unwrapped.autotuner, _kernel.kernel_name(jit_fn))
    _layout.check_operands(jit_fn, len(positional), len(out_shapes), metaparams)


def _check_xla_native(value: Any) -> bool | None:
    if value is not None and not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"xla_native={value!r} must be True, False or None (None follows "
                        f"JAX_TRITON_ROCM_XLA_NATIVE).")
    return None if value is None else bool(value)


def _unwrap_ready(kernel: Any) -> _kernel.Unwrapped:
    """`kernel` taken apart, once Triton has imported and the lowering rules are registered."""
    _compat.triton_info()
    _plugin.ensure_registered()
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
      compute_capability: a CUDA compute capability (e.g. 90) to compile for instead of the
        device's; `target_arch` is the general form.
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
      xla_native: launch through XLA's own Triton custom call when the kernel fits it (README:
        "XLA's Triton custom call"); None follows JAX_TRITON_ROCM_XLA_NATIVE (default off). A
        kernel that does not fit takes jaxlib's call, with a debug log saying why.
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
    metaparams, name, enable_fp_fusion, debug, options = _check_call_options(
        unwrapped.jit_fn, metaparams, name, enable_fp_fusion, debug)
    arrays, positional = _split_arguments(args)
    out_shapes, out_tree = _out_shapes(out_shape)
    _check_launch(grid, num_warps, num_stages, num_ctas, compute_capability, serialized_metadata)
    aliases = _check_aliases(input_output_aliases, arrays, out_shapes)
    _check_kernel_arguments(unwrapped, positional, arrays, out_shapes, metaparams)
    outs = triton_kernel_p.bind(
        *arrays, kernel=kernel, positional=positional, out_shapes=tuple(out_shapes), grid=grid,
        name=name, num_warps=num_warps, num_stages=num_stages, num_ctas=num_ctas,
        compute_capability=compute_capability, enable_fp_fusion=enable_fp_fusion,
        input_output_aliases=aliases, zeroed_outputs=_check_zeroed(zeroed_outputs, len(out_shapes)),
        debug=debug, serialized_metadata=serialized_metadata,
        batch_grid_axis=_batching.check_batch_grid_axis(batch_grid_axis),
        xla_native=_check_xla_native(xla_native), metaparams=tuple(sorted(metaparams.items())),
        options=tuple(sorted(options.items())))
    return jax.tree_util.tree_unflatten(out_tree, outs)
