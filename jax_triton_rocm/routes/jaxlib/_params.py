"""The parameters of one kernel call, as jaxlib takes them, in kernel order: each array's pointer
(with its divisibility, and the bytes jaxlib zeroes before the launch), each runtime scalar, and
each tensor descriptor's parameters (`_tma`, from the compiled kernel). jaxlib hands the array
parameters the operands' buffers and then the results', in order; the call's layout
(`checks._checker`) puts them so.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from jax_triton_rocm.routes.jaxlib._proto import KernelCall, KernelImage, Param

if TYPE_CHECKING:
    from jax_triton_rocm.plan import _plan


def size_bytes(aval: Any) -> int:
    """The bytes of an array of `aval`'s shape and dtype."""
    return int(math.prod(aval.shape)) * np.dtype(aval.dtype).itemsize


def kernel_call(image: KernelImage, launch: _plan.Launch, out_avals: tuple,
                aliases: tuple[tuple[int, int], ...] = (),
                descriptors: Callable[..., list] | None = None) -> KernelCall:
    """One launch of `image`, as jaxlib's kernel call carries it, its parameters in kernel
    order; `descriptors` gives those of the kernel's tensor descriptors
    (`_tma.descriptor_params`). An output to zero that has no pointer of its own is zeroed
    through the input it is aliased to (the same buffer).

    Raises:
      NotImplementedError: a zeroed output aliased to a TensorDescriptor's base.
    """
    bound, zeroed = launch.bound, set(launch.zeroed)
    params = []
    specs = dict(bound.specializations)
    own = {source.index for source in bound.sources if source.kind == "output"}
    zero_inputs = {i: o for i, o in aliases if o in zeroed and o not in own}
    n_descriptors = 0
    for source in bound.sources:
        if source.kind == "scalar":
            params.append(Param(source.scalar.proto_kind, source.scalar.value))
            continue
        if source.kind == "descriptor":
            if source.index in zero_inputs:
                raise NotImplementedError(
                    f"zeroed_outputs names output {zero_inputs[source.index]}, which is written "
                    f"through a TensorDescriptor; zero its base before the call instead.")
            params.extend(descriptors(source.descriptor, n_descriptors))
            n_descriptors += 1
            continue
        # Its key in `BoundKernel.specializations`: the position, or (position, *path).
        key = (source.position, *source.path) if source.path else source.position
        divisibility = 16 if "D" in specs.get(key, "") else 0
        if source.kind == "output":
            zeroes = source.index if source.index in zeroed else None
        else:
            zeroes = zero_inputs.get(source.index)
        zero = 0 if zeroes is None else size_bytes(out_avals[zeroes])
        params.append(Param("array", bytes_to_zero=zero, ptr_divisibility=divisibility))
    return KernelCall(kernel=image, grid=launch.grid, params=tuple(params))
