"""jax-triton 0.4.1's public API on this package, for code written for jax-triton: replace
`import jax_triton as jt` with `import jax_triton_rocm.compat as jt`
([Porting from jax-triton](porting.md#the-one-line-switch)).

The names are jax-triton 0.4.1's `__all__`, with its signatures; `triton_lib` and `version` are
its submodules. Every plain call lowers as jax-triton 0.4.1 lowers it, to one jaxlib custom
call that produces the results (`triton_call`). `__version__` is the jax-triton version served
("0.4.1"); the package's is `jax_triton_rocm.__version__`.

`jax_triton_rocm.compat.v0_3` is jax-triton 0.3.1's API, for code written for 0.3;
`install_as_jax_triton("0.3" or "0.4")` makes `import jax_triton` give one of the two, for a
library that imports `jax_triton` itself.
"""

from jax_triton_rocm.compat._switch import install_as_jax_triton
from jax_triton_rocm.compat.triton_lib import (CUSTOM_CALL_TARGET_NAME, TensorDescriptor,
                                               strides_from_shape, triton_call)
from jax_triton_rocm.compat.version import __version__, __version_info__

__all__ = ["triton_call", "strides_from_shape", "CUSTOM_CALL_TARGET_NAME", "TensorDescriptor",
           "__version__", "__version_info__"]

# jax-triton 0.3's top-level names that 0.4 removed, with what replaces each.
_REMOVED_IN_0_4 = {
    "cdiv": "triton.cdiv",
    "next_power_of_2": "triton.next_power_of_2",
    "utils": "triton.cdiv and triton.next_power_of_2 (what jax_triton.utils held)",
    "get_compute_capability": "jax.devices()[0].compute_capability",
    "get_serialized_metadata": "jax._src.lib.gpu_triton.get_serialized_metadata",
    "pallas": "jax.experimental.pallas",
}


def __getattr__(name: str):
    if name in _REMOVED_IN_0_4:
        # An AttributeError, as jax-triton 0.4.1 gives: `hasattr(jt, name)` stays False.
        raise AttributeError(
            f"module 'jax_triton_rocm.compat' has no attribute {name!r}: jax-triton 0.4.1, "
            f"whose API this module offers, removed jax-triton 0.3's `{name}`; use "
            f"{_REMOVED_IN_0_4[name]}, or jax_triton_rocm.compat.v0_3, which offers "
            f"jax-triton 0.3.1's API.")
    raise AttributeError(f"module 'jax_triton_rocm.compat' has no attribute {name!r}")
