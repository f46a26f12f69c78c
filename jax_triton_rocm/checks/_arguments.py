"""A `triton_call`'s arguments as taken, in any of its forms, before they are bound to the
kernel's parameters (`_binder`): the outputs checked, the scalars typed (`CallArguments`)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from jax_triton_rocm.base import _env
from jax_triton_rocm.kernel import _spec
from jax_triton_rocm.kernel._tensordesc import TensorDescriptor


class _NotGiven:
    """`out_type`'s and `out_shape`'s default (None is a value: no output)."""

    def __repr__(self) -> str:
        return "<not given>"


NOT_GIVEN = _NotGiven()


_ONE_LEAF = jax.tree_util.tree_structure(0)


@dataclasses.dataclass(frozen=True)
class CallArguments:
    """A `triton_call`'s arguments, in any form (0.3's, 0.4's, `compat`'s), before binding.
    `runtime`: {keyword: parameter index} of the runtime scalar keywords; `buffers`: the
    keywords holding an array; `roles`: by parameter index, each positional or runtime scalar's
    `_spec.scalar_role`, None where that fails; `given`: `check_call`'s options as given."""

    kernel: Any
    unwrapped: _spec.Unwrapped
    args: tuple
    keywords: dict[str, Any]
    convention: str
    outputs: Any
    out_shapes: list
    out_tree: Any
    runtime: dict[str, int]
    buffers: frozenset[str]
    roles: dict[int, tuple | None]
    given: dict[str, Any]
    backend_options: Any
    cost_estimate: Any
    has_side_effect: bool
    input_output_aliases: Any
    constexprs: Any
    operands: Any


def call_arguments(args: tuple, keywords: dict[str, Any], kernel: Any, unwrapped: _spec.Unwrapped,
                   *, out_shape: Any, out_type: Any, has_side_effect: Any,
                   **options: Any) -> CallArguments:
    """`triton_call`'s arguments taken, as every trace takes them: the outputs checked, the
    runtime scalar keywords found, the scalars typed."""
    _env.check_variables()  # each variable as its reader takes it, on every platform
    if out_shape is not NOT_GIVEN and out_type is not NOT_GIVEN:
        raise TypeError("triton_call got both out_type= (jax-triton 0.4) and out_shape= (0.3); "
                        "give one: they mean the same outputs, but pick the convention for "
                        "keyword operands and input_output_aliases (docs/porting.md).")
    if out_shape is NOT_GIVEN and out_type is NOT_GIVEN:
        raise TypeError("triton_call needs the outputs' shapes and dtypes: out_type= (jax-triton "
                        "0.4) or out_shape= (0.3), e.g. out_type=jax.ShapeDtypeStruct(x.shape, "
                        "x.dtype), or out_type=() for a kernel that only updates Refs.")
    convention, outputs = (("out_shape", out_shape) if out_type is NOT_GIVEN
                           else ("out_type", out_type))
    shapes, tree = output_shapes(convention, outputs)
    refuse_foreign_byte_order(args, keywords)
    args, keywords = held_scalars(unwrapped, args, keywords)
    params, facts = unwrapped.jit_fn.params, unwrapped.params
    runtime = {}
    if convention == "out_type" and keywords:
        index = {param.name: i for i, param in enumerate(facts) if not param.constexpr}
        runtime = {name: index[name] for name, value in keywords.items()
                   if name in index and isinstance(value, _spec.SCALAR_TYPES)}
    buffers = frozenset([name for name, value in keywords.items()  # a scalar holds none
                         if not isinstance(value, _spec.SCALAR_TYPES)
                         and holds_buffer(value)])
    scalars = {i: value for i, value in enumerate(args)
               if i < len(params) and not isinstance(value, jax.Array) and (
                   facts[i].constexpr or value is None or isinstance(value, _spec.SCALAR_TYPES))}
    scalars.update({i: keywords[name] for name, i in runtime.items()})
    roles: dict[int, tuple | None] = {}
    for i, value in scalars.items():
        try:
            roles[i] = _spec.scalar_role(params[i], value, what=f"argument {i}",
                                         declared=facts[i].declared)
        except (TypeError, ValueError, OverflowError):  # the full check says why
            roles[i] = None
    if not isinstance(has_side_effect, (bool, np.bool_)):  # a string such as "no" is truthy
        raise TypeError(f"has_side_effect={has_side_effect!r} must be a bool (True or False), "
                        f"got {type(has_side_effect).__name__}.")
    return CallArguments(kernel, unwrapped, args, keywords, convention, outputs, shapes,
                         tree, runtime, buffers, roles, has_side_effect=bool(has_side_effect),
                         **options)


def output_shapes(convention: str, outputs: Any) -> tuple[list, Any]:
    """The outputs' shapes and dtypes, as `ShapeDtypeStruct`s, and their tree; raises for a
    leaf without them, one that asks for a sharding, a negative dimension, or a dtype JAX
    holds as another."""
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
        check_canonical_dtype(leaf.dtype, f"{convention} leaf {i}",
                                      f"jax.ShapeDtypeStruct({shape}, jnp.{{}})", output=True)
        shapes.append(jax.ShapeDtypeStruct(shape, np.dtype(leaf.dtype)))
    return shapes, tree


def refuse_foreign_byte_order(args: tuple, keywords: dict[str, Any]) -> None:
    """Raises TypeError for a NumPy array (inside tuples too) in the other byte order."""
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


def held_scalars(unwrapped: _spec.Unwrapped, args: tuple,
                 keywords: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """The arguments with each concrete 0-d array on a parameter annotated with a scalar type
    (`x: tl.float32`) taken as the scalar it holds; other arrays stay pointers, as in Triton."""
    facts = unwrapped.params
    declared = {i for i, param in enumerate(facts) if param.declared}
    if not declared:
        return args, keywords

    def held(value: Any) -> Any:
        if (isinstance(value, (np.ndarray, jax.Array))
                and not isinstance(value, jax.core.Tracer) and value.ndim == 0):
            return np.asarray(value)[()]
        return value

    args = tuple([held(arg) if i in declared else arg for i, arg in enumerate(args)])
    names = {facts[i].name for i in declared}
    return args, {name: held(value) if name in names else value
                  for name, value in keywords.items()}


def check_canonical_dtype(dtype: Any, what: str, fix: str, *, output: bool = False) -> None:
    """Raises TypeError for a dtype that JAX holds as another (64-bit types off); `fix`: the
    code that makes it the dtype JAX holds, with {} for its name."""
    given = np.dtype(dtype)
    held = np.dtype(jax.dtypes.canonicalize_dtype(given))
    if held == given:
        return
    effect = (f"the kernel would write {given.name} elements into the {held.name} buffer JAX "
              f"allocates" if output else
              f"JAX would convert it, and the kernel would read {held.name}, not the "
              f"{given.name} values given")
    raise TypeError(
        f"{what} has dtype {given.name}, which JAX holds as {held.name} while 64-bit types are "
        f"off (jax_enable_x64=False, the default): {effect}. Make it {held.name} "
        f"({fix.format(held.name)}), or enable 64-bit types "
        f"(jax.config.update('jax_enable_x64', True)) to keep {given.name}.")


def holds_buffer(value: Any) -> bool:
    """Whether `value` is or contains something only an operand can be (not a constexpr)."""
    if isinstance(value, (tuple, list)):
        return any(holds_buffer(element) for element in value)
    return isinstance(value, TensorDescriptor) or (
        hasattr(value, "shape") and hasattr(value, "dtype")
        and not isinstance(value, _spec.SCALAR_TYPES))
