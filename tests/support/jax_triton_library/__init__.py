"""A library written for jax-triton 0.3, as public ones are: it imports `jax_triton` when it is
imported, checks its version, and calls 0.3's API (`jt.cdiv`, `jax_triton.utils`, `out_shape=`
lists, positional scalars, `zeroed_outputs`, an autotuned kernel with a `pre_hook` called with
one of its tuned keys, a `custom_vjp`). Nothing here knows about jax_triton_rocm: the tests run
it through `jax_triton_rocm.compat.install_as_jax_triton("0.3")`."""

import jax_triton as jt

if jt.__version_info__[:2] != (0, 3):
    raise ImportError(f"this library needs jax-triton 0.3, not {jt.__version__}")

from tests.support.jax_triton_library.ops import scaled_add, sum_and_max, tuned_copy  # noqa: E402

__all__ = ["scaled_add", "sum_and_max", "tuned_copy"]
