"""jax-triton 0.3.1's public API on this package, for code written for it: replace
`import jax_triton as jt` with `import jax_triton_rocm.compat.v0_3 as jt`, or leave the import
and call `jax_triton_rocm.compat.install_as_jax_triton("0.3")` first
([Porting from jax-triton](porting.md#code-written-for-jax-triton-03)).

The names are jax-triton 0.3.1's `__all__`, with its signatures, and its
`get_compute_capability` and `get_serialized_metadata`; `triton_lib`, `utils` and `version` are
its submodules (here `triton_lib_0_3`, `utils_0_3` and `version_0_3`). `__version__` is the
jax-triton version served ("0.3.1"); the package's is `jax_triton_rocm.__version__`.
"""

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.compat import triton_lib_0_3 as triton_lib
from jax_triton_rocm.compat import utils_0_3 as utils
from jax_triton_rocm.compat import version_0_3 as version
from jax_triton_rocm.compat.triton_lib_0_3 import triton_call
from jax_triton_rocm.compat.utils_0_3 import cdiv, next_power_of_2, strides_from_shape
from jax_triton_rocm.compat.version_0_3 import __version__, __version_info__
from jax_triton_rocm.routes.jaxlib import _proto

__all__ = ["utils", "triton_call", "cdiv", "next_power_of_2", "strides_from_shape", "__version__",
           "__version_info__"]


def get_compute_capability(device: int) -> int:
    """The compute capability of local GPU number `device` as jaxlib reads it (90 for an sm_90
    GPU), as jax-triton 0.3.1's (jaxlib's, through the plugin of the GPU's vendor).

    Raises:
      RuntimeError: JAX has no such GPU here.
    """
    import jax

    seen = []
    for platform in _vendors.installed_gpu_platforms():
        try:
            devices = jax.local_devices(backend=platform)
        except RuntimeError:  # the plugin is installed, its GPU absent
            continue
        seen.extend(devices)
        module = _vendors.plugin_triton_module(platform)
        if device < len(devices) and module is not None:
            return module.get_compute_capability(device)
    raise RuntimeError(
        f"jax_triton.get_compute_capability({device}) reads GPU {device}'s compute capability, "
        f"and JAX has no such GPU here (GPUs: {seen or 'none'}; devices: {jax.devices()}). Call "
        f"it where that GPU is, or pass triton_call the compute_capability= to compile for.")


def get_serialized_metadata(opaque: bytes) -> bytes:
    """The `serialized_metadata` a kernel call's opaque (its backend config, as compressed)
    carries, as jax-triton 0.3.1's: read by jaxlib's parser where a jaxlib GPU plugin is
    installed (no GPU needed), else by the package's own decoder of the same messages."""
    modules = map(_vendors.plugin_triton_module, _vendors.installed_gpu_platforms())
    module = next(filter(None, modules), None)
    return module.get_serialized_metadata(opaque) if module else _proto.decode(opaque).metadata
