"""Helpers for the Gluon tests: the targets, the example, error chains, device warp sizes."""

import importlib.util
import pathlib

# The targets CI lowers for: (platform, arch, warp size).
TARGETS = [("rocm", "gfx942", 64), ("rocm", "gfx950", 64), ("cuda", "sm_90", 32)]

EXAMPLE = pathlib.Path(__file__).parents[2] / "examples" / "gluon_add.py"


def load_example():
    """examples/gluon_add.py, imported as a module."""
    spec = importlib.util.spec_from_file_location("gluon_add_example", EXAMPLE)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


def cause_types(error: BaseException) -> list[type]:
    """The types along `error`'s chain of causes (JAX inserts its own link when lowering)."""
    types = []
    cause = error.__cause__
    while cause is not None:
        types.append(type(cause))
        cause = cause.__cause__
    return types


def device_warp_size(device) -> int:
    """The warp size of a JAX GPU device: 64 on AMD gfx9xx (CDNA), else 32."""
    if device.platform != "rocm":
        return 32
    from jax_triton_rocm.backends.hip import _hip

    return _hip.warp_size(str(device.compute_capability).split(":")[0])
