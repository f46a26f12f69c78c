"""The launch parameters a `TensorDescriptor` argument becomes (encoded, a TMA descriptor jaxlib's
CUDA plugin encodes at launch; or decomposed into plain parameters), and what the jaxlib plugin
must do for them; docs/design.md, "jaxlib's call, encoded".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.backends._vendors import Vendor
from jax_triton_rocm.base import _compat
from jax_triton_rocm.routes.jaxlib import _proto
from jax_triton_rocm.kernel._tensordesc import TensorDescriptor, signature_type

# Triton numbers TMA element types one way in a kernel's metadata and CUDA's tensor-map API
# another (`TMA_DTYPE_DEVICE_TO_HOST` in triton/backends/nvidia/driver.py); the rest agree.
_DEVICE_TO_HOST = {8: 10, 9: 8, 10: 9}
_HOST_TF32 = 11  # CU_TENSOR_MAP_DATA_TYPE_TFLOAT32
_MAX_TMA_BOX = 256  # elements per box dimension (cuTensorMapEncodeTiled)


@dataclasses.dataclass(frozen=True)
class TmaDescriptor:
    """What jaxlib needs to encode a CUDA tensor map (`cuTensorMapEncodeTiled`) at launch:
    `elem_type` in CUDA's host numbering, not Triton's device one; `swizzle` CUDA's
    `CUtensorMapSwizzle`; `block_shape` the box one TMA copy moves (Triton's, maybe narrower than
    the descriptor's block); sizes in elements; `oob_fill` 1 fills with NaN, 0 with zeros."""

    elem_type: int
    swizzle: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    block_shape: tuple[int, ...]
    oob_fill: int


def launch_types(sig_type: str, encoded: bool, vendor: Vendor) -> list[str]:
    """The types of the launch parameters one descriptor parameter of signature type
    `sig_type` becomes, `encoded` where the kernel has `tensordesc_meta`."""
    try:  # Triton's own expansion, which newer Triton shares between its launchers
        from triton.backends.driver import expand_signature
    except ImportError:  # each launcher keeps its own (3.6)
        pass
    else:
        return list(expand_signature([sig_type], [{}] if encoded else None,
                                     vendor.encoded_descriptor))
    rank = sig_type.split("[", 1)[1].split("]", 1)[0].count(",") + 1
    element = sig_type.split("<", 1)[1].split("[", 1)[0]
    head = [vendor.encoded_descriptor] if encoded else ["*" + element] + ["i64"] * 2 * rank + ["i1"]
    return head + ["i32"] * rank + ["i64"] * rank


def one_descriptor_params(desc: TensorDescriptor, types: Sequence[str],
                          meta: Mapping[str, Any] | None) -> list[_proto.Param]:
    """The jaxlib parameters for `desc` of launch `types`, in kernel order; `meta`: its
    `tensordesc_meta` entry where the kernel takes it encoded. Its base is the operand buffer the
    first of them consumes.

    Raises:
      NotImplementedError: a launch layout this package does not know (a newer Triton).
      ValueError: a descriptor TMA cannot encode (`tma_descriptor`).
    """
    flags = [desc.padding == "nan"] + [bool(desc.round_f32_to_tf32)] * (types.count("i1") - 1)
    if meta is None and desc.round_f32_to_tf32 and types.count("i1") < 2:
        raise NotImplementedError(
            f"TensorDescriptor(round_f32_to_tf32=True) without TMA needs a Triton that passes "
            f"the rounding to the kernel (3.9 does; this one, {_compat.triton_info().version}, "
            f"passes {list(types)}). Round the base yourself (jax.lax.reduce_precision(x, 8, "
            f"10)), or use a GPU whose descriptors are TMA (sm_90+).")
    if meta is not None:
        values: list[Any] = [tma_descriptor(desc, meta)]
    else:
        values = [desc.base, *desc.shape, *desc.strides, *flags]
    values += [*desc.shape, *desc.strides]
    if len(values) != len(types):
        raise NotImplementedError(
            f"The installed Triton ({_compat.triton_info().version}) passes a tensor descriptor "
            f"as {list(types)}, a layout this package does not fill; please report it.")
    return [_param(kind, value) for kind, value in zip(types, values)]


def _param(kind: str, value: Any) -> _proto.Param:
    if isinstance(value, TmaDescriptor):
        return _proto.Param("tensor_descriptor", descriptor=value)
    if kind.startswith("*"):
        return _proto.Param("array")
    if kind == "i1":
        return _proto.Param("bool", bool(value))
    return _proto.Param(kind, int(value))


def tma_descriptor(desc: TensorDescriptor, meta: Mapping[str, Any]) -> TmaDescriptor:
    """The tensor map jaxlib encodes for `desc`, from Triton's metadata for it.

    Raises:
      NotImplementedError: an im2col or fp4-padded descriptor (no jaxlib encodes those).
      ValueError: a box or padding CUDA's tensor maps refuse, naming the descriptor's field.
    """
    for flag in ("is_im2col", "fp4_padded"):
        if meta.get(flag):
            raise NotImplementedError(f"Triton compiled this TensorDescriptor as {flag}; "
                                      f"jaxlib's TMA parameter has no such mode.")
    itemsize = np.dtype(desc.base.dtype).itemsize
    box = tuple(int(dim) for dim in meta["block_size"])
    if any(dim > _MAX_TMA_BOX for dim in box) or (box[-1] * itemsize) % 16:
        raise ValueError(
            f"TensorDescriptor block_shape={desc.block_shape}: TMA moves boxes of at most "
            f"{_MAX_TMA_BOX} elements per dimension whose last dimension spans a multiple of 16 "
            f"bytes; Triton's box is {box} of {itemsize}-byte elements.")
    if desc.padding == "nan" and itemsize < 2:
        raise ValueError(f"TensorDescriptor padding='nan' on an {itemsize}-byte dtype: TMA fills "
                         f"NaN for 16-bit and wider floats only. Use padding='zero'.")
    elem_type = int(meta["elem_type"])
    return TmaDescriptor(
        elem_type=_HOST_TF32 if desc.round_f32_to_tf32 else _DEVICE_TO_HOST.get(elem_type,
                                                                                 elem_type),
        swizzle=int(meta["swizzle"]), shape=desc.shape, strides=desc.strides, block_shape=box,
        oob_fill=1 if desc.padding == "nan" else 0)


def check_launchable(vendor: Vendor, features: _vendors.PluginFeatures, *, kernel: str,
                     arch: str) -> None:
    """Raises NotImplementedError unless the plugin that will launch `kernel` encodes its
    tensor descriptors (a kernel compiled with `tensordesc_meta`)."""
    if not vendor.jaxlib_encodes_descriptors:
        raise NotImplementedError(
            f"Kernel {kernel} takes a TensorDescriptor that Triton compiled for {arch} as an "
            f"encoded hardware descriptor, which no jaxlib release encodes at launch on "
            f"{vendor.platform}. Build the descriptor inside the kernel instead "
            f"(tl.make_tensor_descriptor on the base pointer).")
    if not features.tma_descriptors:
        since = ".".join(map(str, _vendors.PLUGIN_FEATURES["tma_descriptors"][0]))
        raise NotImplementedError(
            f"Kernel {kernel} takes a TensorDescriptor, which on {arch} is a TMA descriptor that "
            f"jaxlib encodes at launch from jax/jaxlib {since} on; the jaxlib plugin here "
            f"({features.detected_from}) cannot. Upgrade JAX ({vendor.install_hint} with "
            f"jax>={since}), or build the descriptor inside the kernel "
            f"(tl.make_tensor_descriptor, which needs jax {since} as well).")


def descriptor_params(compiled: Any, features: _vendors.PluginFeatures, arch: Any,
                      desc: TensorDescriptor, i: int) -> list[_proto.Param]:
    """The jaxlib parameters of `desc`, the kernel's descriptor number `i` (in launch order), as
    `compiled` (a `compile._compile.CompiledKernel`) takes them on `arch` (a `GpuArch`).

    Raises:
      NotImplementedError: the plugin cannot encode the kernel's TMA descriptors
        (`check_launchable`), or a layout this package does not fill.
      ValueError: a descriptor TMA cannot encode.
    """
    metas = list(compiled.metadata.get("tensordesc_meta") or ())
    vendor = _vendors.vendor(arch.platform)
    if metas:
        check_launchable(vendor, features, kernel=compiled.name, arch=arch.arch)
    types = launch_types(signature_type(desc), bool(metas), vendor)
    return one_descriptor_params(desc, types, metas[i] if metas else None)
