"""Kernels run through every route a call can take, compared with jax.numpy references: on
Triton's interpreter, on the CPU. The tests are tests/support/every_route/calls.py's
(tests/gpu/test_routes_gpu.py runs them on the GPU routes, with the tests only a GPU can run),
collected here with the routes of this folder (the `routes` mark).
"""

from tests.support.every_route.calls import *  # noqa: F403  (its tests)
