"""`triton_call`: a Triton kernel called on JAX arrays; its arguments checked into one
`KernelCallSpec` (`checks._bound`), which `triton_kernel_p` carries to the lowering rules."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from jax_triton_rocm.base import _compat, _env, _state
from jax_triton_rocm.checks import _binder, _bound
from jax_triton_rocm.routes import _primitive
from jax_triton_rocm.routes._primitive import triton_kernel_p
from jax_triton_rocm.spec import _spec
from jax_triton_rocm.spec._spec import Grid


def triton_call(
    *args: Any,
    kernel: Any,
    grid: Grid,
    out_type: Any = _bound.NOT_GIVEN,
    out_shape: Any = _bound.NOT_GIVEN,
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
    call = _bound.check_triton_call(call_arguments(
        args, kwargs, kernel, unwrapped_kernel(kernel, record), record=record,
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


_ONE_LEAF = jax.tree_util.tree_structure(0)


@dataclasses.dataclass(frozen=True)
class CallArguments:
    """A `triton_call`'s arguments, in any form (0.3's, 0.4's, `compat`'s), before binding.
    `runtime`: {keyword: parameter index} of the runtime scalar keywords; `buffers`: the
    keywords holding an array; `roles`: each positional scalar (by index) or runtime keyword's
    `_spec.scalar_role`, None where that fails; `given`: `check_call`'s options as given."""

    kernel: Any
    unwrapped: _spec.Unwrapped
    record: dict
    args: tuple
    keywords: dict[str, Any]
    convention: str
    outputs: Any
    out_shapes: list
    out_tree: Any
    runtime: dict[str, int]
    buffers: frozenset[str]
    roles: dict[int | str, tuple | None]
    given: dict[str, Any]
    backend_options: Any
    cost_estimate: Any
    has_side_effect: bool
    input_output_aliases: Any
    constexprs: Any
    operands: Any


def call_arguments(args: tuple, keywords: dict[str, Any], kernel: Any, unwrapped: _spec.Unwrapped,
                   *, record: dict, out_shape: Any, out_type: Any, has_side_effect: Any,
                   **options: Any) -> CallArguments:
    """`triton_call`'s arguments taken, as every trace takes them: the outputs checked, the
    runtime scalar keywords found, the scalars typed."""
    _env.check_variables()  # each variable as its reader takes it, on every platform
    if out_shape is not _bound.NOT_GIVEN and out_type is not _bound.NOT_GIVEN:
        raise TypeError("triton_call got both out_type= (jax-triton 0.4) and out_shape= (0.3); "
                        "give one: they mean the same outputs, but pick the convention for "
                        "keyword operands and input_output_aliases (docs/porting.md).")
    if out_shape is _bound.NOT_GIVEN and out_type is _bound.NOT_GIVEN:
        raise TypeError("triton_call needs the outputs' shapes and dtypes: out_type= (jax-triton "
                        "0.4) or out_shape= (0.3), e.g. out_type=jax.ShapeDtypeStruct(x.shape, "
                        "x.dtype), or out_type=() for a kernel that only updates Refs.")
    convention, outputs = (("out_shape", out_shape) if out_type is _bound.NOT_GIVEN
                           else ("out_type", out_type))
    # Only a leaf's shape and dtype are read (not an array's own sharding, as `out_shape=x`
    # gives it); a `ShapeDtypeStruct` that asks for a sharding is refused.
    if hasattr(outputs, "shape") and hasattr(outputs, "dtype"):  # one output, the most common
        leaves, tree = [outputs], _ONE_LEAF
    else:
        leaves, tree = jax.tree_util.tree_flatten(
            outputs, is_leaf=lambda x: hasattr(x, "shape") and hasattr(x, "dtype"))
    shapes = []
    for i, leaf in enumerate(leaves):
        if not (hasattr(leaf, "shape") and hasattr(leaf, "dtype")):
            raise TypeError(f"{convention} leaf {i} is {leaf!r}; each output needs a .shape and "
                            f"a .dtype, e.g. jax.ShapeDtypeStruct((n,), jnp.float32).")
        if isinstance(leaf, jax.ShapeDtypeStruct) and leaf.sharding is not None:
            raise ValueError(
                f"{convention} leaf {i} asks for sharding={leaf.sharding}, which triton_call "
                f"cannot honour: the kernel writes each output as one buffer, and JAX places it. "
                f"Drop the sharding (jax.ShapeDtypeStruct({tuple(leaf.shape)}, {leaf.dtype})) "
                f"and constrain the result instead (jax.lax.with_sharding_constraint), or call "
                f"the kernel per shard inside jax.shard_map.")
        shape = tuple(leaf.shape)
        if any([isinstance(size, (int, np.integer)) and size < 0 for size in shape]):
            raise ValueError(f"{convention} leaf {i} has shape {shape}, with a negative "
                             f"dimension; each dimension is a size >= 0: give the output's real "
                             f"shape.")
        _binder.check_canonical_dtype(leaf.dtype, f"{convention} leaf {i}",
                                      f"jax.ShapeDtypeStruct({shape}, jnp.{{}})", output=True)
        shapes.append(jax.ShapeDtypeStruct(shape, np.dtype(leaf.dtype)))
    # A concrete 0-d array on a parameter annotated with a scalar type (`x: tl.float32`) is
    # the scalar it holds; other arrays stay pointers, as in Triton.
    pending = [*[(f"argument {i}", arg) for i, arg in enumerate(args)],
               *[(f"keyword argument {name!r}", value) for name, value in keywords.items()]]
    pending.reverse()  # a stack, walked depth first in the order given
    while pending:
        what, value = pending.pop()
        if isinstance(value, tuple):
            pending += reversed([(f"{what}[{j}]", element) for j, element in enumerate(value)])
        elif isinstance(value, np.ndarray) and not value.dtype.isnative:
            raise TypeError(
                f"{what} is a NumPy array of dtype {value.dtype.str!r}, in the other byte order "
                f"than this machine's, which JAX cannot take. Pass it in this machine's byte "
                f"order: x.astype(x.dtype.newbyteorder('=')).")
    params, facts = unwrapped.jit_fn.params, unwrapped.params
    declared = {i for i, param in enumerate(facts) if param.declared}
    if declared:
        def held(value: Any) -> Any:
            if (isinstance(value, (np.ndarray, jax.Array))
                    and not isinstance(value, jax.core.Tracer) and value.ndim == 0):
                return np.asarray(value)[()]
            return value

        args = tuple([held(arg) if i in declared else arg for i, arg in enumerate(args)])
        names = {facts[i].name for i in declared}
        keywords = {name: held(value) if name in names else value
                    for name, value in keywords.items()}
    runtime = {}
    if convention == "out_type" and keywords:
        index = {param.name: i for i, param in enumerate(facts) if not param.constexpr}
        runtime = {name: index[name] for name, value in keywords.items()
                   if name in index and isinstance(value, _spec.SCALAR_TYPES)}
    buffers = frozenset([name for name, value in keywords.items()  # a scalar holds none
                         if not isinstance(value, _spec.SCALAR_TYPES)
                         and _binder.holds_buffer(value)])
    scalars = [(i, params[i], value, f"argument {i}") for i, value in enumerate(args)
               if i < len(params) and not isinstance(value, jax.Array) and (
                   facts[i].constexpr or value is None or isinstance(value, _spec.SCALAR_TYPES))]
    scalars += [(name, params[i], keywords[name], f"keyword argument {name!r}")
                for name, i in runtime.items()]
    roles: dict[int | str, tuple | None] = {}
    for where, param, value, what in scalars:
        try:
            roles[where] = _spec.scalar_role(param, value, what=what)
        except (TypeError, ValueError, OverflowError):  # the full check says why
            roles[where] = None
    if not isinstance(has_side_effect, (bool, np.bool_)):  # a string such as "no" is truthy
        raise TypeError(f"has_side_effect={has_side_effect!r} must be a bool (True or False), "
                        f"got {type(has_side_effect).__name__}.")
    return CallArguments(kernel, unwrapped, record, args, keywords, convention, outputs, shapes,
                         tree, runtime, buffers, roles, has_side_effect=bool(has_side_effect),
                         **options)


# A kernel parameter named like one of these cannot be set by keyword.
TRITON_CALL_KEYWORDS = _binder.keyword_names(triton_call)
