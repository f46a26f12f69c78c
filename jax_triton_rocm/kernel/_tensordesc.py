"""`TensorDescriptor`, jax-triton 0.4's host-side tensor descriptor: a pytree whose one leaf is
`base`, checked as Triton checks it; a target's own limits are checked at launch (`_tma`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jax_triton_rocm.base import _values
from jax_triton_rocm.kernel import _spec

MAX_RANK = 5  # Triton's and CUDA's tensor-map limit
PADDINGS = ("zero", "nan")
_I32_LIMIT = 2**31  # shapes reach the kernel as i32


def strides_from_shape(shape: Sequence[int]) -> tuple[int, ...]:
    """The element strides of a row-major (C-order) array of `shape`, as jax-triton 0.4 gives:
    stride i is the product of the dimensions after i.

    `strides_from_shape((4, 8, 16))` is `(128, 16, 1)`; a 0-d shape gives `()`.

    Raises:
      TypeError: `shape` is not a sequence of ints.
      ValueError: a negative dimension.
    """
    dims = _int_tuple(shape, "strides_from_shape: shape")
    if any(dim < 0 for dim in dims):
        raise ValueError(f"strides_from_shape: shape={dims} has a negative dimension.")
    return tuple(math.prod(dims[i + 1:]) for i in range(len(dims)))


def _int_tuple(values: Any, what: str) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{what}={values!r} must be a sequence of ints, e.g. (64, 64).")
    if not all(_values.is_int(value) for value in values):
        raise TypeError(f"{what}={tuple(values)!r} must hold ints only.")
    return tuple(int(value) for value in values)


def _static(default: Any = dataclasses.MISSING) -> Any:
    return dataclasses.field(default=default, metadata=dict(static=True))


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class TensorDescriptor:
    """A host-side tensor descriptor for `triton_call` (jax-triton 0.4's, same fields).

    Attributes:
      base: the array the descriptor reads (the pytree's one leaf).
      shape: the described tensor's shape, in elements.
      strides: its strides, in elements; the last must be 1.
      block_shape: the block a kernel loads or stores at once; each a power of two.
      layout: for a Gluon kernel, the shared-memory layout (e.g. `gl.NVMMASharedLayout`);
        None for a Triton kernel.
      padding: "zero" or "nan": what loads read outside `shape` ("nan" needs a float dtype).
      round_f32_to_tf32: a float32 base read through TMA is rounded to TF32.

    Raises (when built):
      TypeError / ValueError: a field Triton's own `TensorDescriptor` would refuse, named with
        its value.
    """

    base: Any
    shape: tuple[int, ...] = _static()
    strides: tuple[int, ...] = _static()
    block_shape: tuple[int, ...] = _static()
    layout: Any = _static(None)
    padding: str = _static("zero")
    round_f32_to_tf32: bool = _static(False)

    def __post_init__(self) -> None:
        for name in ("shape", "strides", "block_shape"):
            object.__setattr__(self, name, _int_tuple(getattr(self, name),
                                                      f"TensorDescriptor {name}"))
        rank = len(self.shape)
        if not 1 <= rank <= MAX_RANK:
            raise ValueError(f"TensorDescriptor shape={self.shape} has rank {rank}; tensor "
                             f"descriptors take rank 1 to {MAX_RANK}.")
        if len(self.strides) != rank or len(self.block_shape) != rank:
            raise ValueError(f"TensorDescriptor shape={self.shape}, strides={self.strides} and "
                             f"block_shape={self.block_shape} must have the same length.")
        if not all(0 < dim < _I32_LIMIT for dim in self.shape):
            raise ValueError(f"TensorDescriptor shape={self.shape}: each dimension must lie in "
                             f"[1, 2**31) (the kernel receives it as an i32).")
        if self.strides[-1] != 1 or any(stride < 1 for stride in self.strides):
            raise ValueError(f"TensorDescriptor strides={self.strides}: the last stride must be 1 "
                             f"(the last dimension contiguous) and every stride positive.")
        for i, dim in enumerate(self.block_shape):
            if dim < 1 or dim & (dim - 1):
                raise ValueError(f"TensorDescriptor block_shape={self.block_shape}: element {i} "
                                 f"({dim}) must be a power of two, as Triton requires.")
        if self.padding not in PADDINGS:
            raise ValueError(f"TensorDescriptor padding={self.padding!r} must be one of "
                             f"{', '.join(map(repr, PADDINGS))}.")
        if not isinstance(self.round_f32_to_tf32, (bool, np.bool_)):
            raise TypeError(f"TensorDescriptor round_f32_to_tf32={self.round_f32_to_tf32!r} must "
                            f"be a bool.")
        try:
            hash(self.layout)
        except TypeError:
            raise TypeError(f"TensorDescriptor layout={self.layout!r} must be hashable (a Gluon "
                            f"layout object such as gl.NVMMASharedLayout(...)).") from None
        # JAX rebuilds the pytree around tracers and placeholders too: check a real base only.
        if not (hasattr(self.base, "shape") and hasattr(self.base, "dtype")):
            return
        dtype = np.dtype(self.base.dtype)
        _spec.pointer_type(dtype, what="TensorDescriptor base")
        misaligned = [s for s in self.strides[:-1] if (s * dtype.itemsize) % 16]
        if misaligned:
            raise ValueError(
                f"TensorDescriptor strides={self.strides} of a {dtype.name} base: each stride but "
                f"the last must span a multiple of 16 bytes ({misaligned[0]} x {dtype.itemsize} "
                f"bytes does not). Pad the row length (e.g. to a multiple of "
                f"{16 // math.gcd(16, dtype.itemsize)} elements).")
        if self.padding == "nan" and not jnp.issubdtype(dtype, jnp.floating):
            raise ValueError(f"TensorDescriptor padding='nan' needs a floating-point base; this "
                             f"one is {dtype.name}. Use padding='zero'.")
        if self.round_f32_to_tf32 and dtype != np.float32:
            raise ValueError(f"TensorDescriptor round_f32_to_tf32=True needs a float32 base; this "
                             f"one is {dtype.name}.")
        last = sum((dim - 1) * stride for dim, stride in zip(self.shape, self.strides))
        size = math.prod(tuple(self.base.shape))
        if last >= size:
            raise ValueError(
                f"TensorDescriptor shape={self.shape} with strides={self.strides} reaches element "
                f"{last} of its base, which has {size} elements (shape "
                f"{tuple(self.base.shape)}). Describe a region inside the base.")

    @classmethod
    def from_array(cls, array: Any, block_shape: Sequence[int], layout: Any = None,
                   padding: str = "zero", round_f32_to_tf32: bool = False) -> TensorDescriptor:
        """A descriptor of the whole of `array` (its shape, row-major strides), read in blocks
        of `block_shape`."""
        if not (hasattr(array, "shape") and hasattr(array, "dtype")):
            raise TypeError(f"TensorDescriptor.from_array: array={array!r} must be an array "
                            f"(with .shape and .dtype).")
        return cls(array, tuple(array.shape), strides_from_shape(tuple(array.shape)),
                   tuple(block_shape), layout, padding, round_f32_to_tf32)

    @property
    def rank(self) -> int:
        return len(self.shape)


def signature_type(desc: TensorDescriptor) -> str:
    """The descriptor's type in a Triton signature, e.g. "tensordesc<fp32[64,64]>"."""
    element = _spec.pointer_type(desc.base.dtype, what="TensorDescriptor base")[1:]
    block = ",".join(str(dim) for dim in desc.block_shape)
    layout = "" if desc.layout is None else f",{desc.layout!r}"
    return f"tensordesc<{element}[{block}]{layout}>"


def abstract(desc: TensorDescriptor, base: Any) -> TensorDescriptor:
    """`desc` over the abstract `base` (shape and dtype only): hashable, for a call's spec."""
    return dataclasses.replace(desc, base=jax.ShapeDtypeStruct(tuple(base.shape),
                                                               np.dtype(base.dtype)))
