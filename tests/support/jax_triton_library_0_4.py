"""A library written for jax-triton 0.4: it imports `jax_triton` and `jax_triton.triton_lib`
when it is imported and calls 0.4's API (`out_type=`, keyword operands). Nothing here knows
about jax_triton_rocm: the tests run it through
`jax_triton_rocm.compat.install_as_jax_triton("0.4")`."""

import jax
import triton
from jax_triton import triton_lib

import jax_triton as jt
from tests.support.kernels import add_kernel

if jt.__version_info__ < (0, 4):
    raise ImportError(f"this library needs jax-triton 0.4, not {jt.__version__}")


def add(x, y):
    return triton_lib.triton_call(x, y_ptr=y, n=x.size, kernel=add_kernel,
                                  out_type=jax.typeof(x), grid=(triton.cdiv(x.size, 256),),
                                  BLOCK=256)
