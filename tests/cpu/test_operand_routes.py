"""jax-triton 0.4's operands on every route, here Triton's interpreter on the CPU: the tests of
tests/support/every_route/operands.py, collected here with the routes of this folder (the `routes`
mark).
"""

from tests.support.every_route.operands import *  # noqa: F403  (its tests)
