"""The calls of `test_xla_route` run and compared with jax.numpy on Triton's interpreter, on the
CPU: the every-route tests of tests/support/every_route/xla_surfaces.py, collected here with
the routes of this folder (the `routes` mark).
"""

import pytest

from tests.support.every_route.xla_surfaces import *  # noqa: F403  (its tests)

pytestmark = pytest.mark.filterwarnings("ignore:.*donated buffers.*:UserWarning")
