"""The calls of `test_xla_route` run and compared with jax.numpy on Triton's interpreter, on the
CPU: the every-route tests of tests/support/every_route/xla_surfaces.py, collected here with
the routes of this folder (the `routes` mark).
"""

import pytest

from tests.support.every_route.xla_surfaces import (  # run here on this folder's routes
    test_every_surface_matches_jnp,
    test_scalars_of_every_type_reach_the_kernel,
    test_an_int_multiple_of_16_is_the_value_the_kernel_uses,
    test_each_value_of_a_runtime_scalar_is_the_one_the_kernel_uses,
)

pytestmark = pytest.mark.filterwarnings("ignore:.*donated buffers.*:UserWarning")

# Every-route tests, written once in tests/support/every_route/xla_surfaces.py.
__all__ = [
    "test_every_surface_matches_jnp",
    "test_scalars_of_every_type_reach_the_kernel",
    "test_an_int_multiple_of_16_is_the_value_the_kernel_uses",
    "test_each_value_of_a_runtime_scalar_is_the_one_the_kernel_uses",
]
