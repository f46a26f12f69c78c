"""The ROCm path without an AMD GPU: real HSACO, lowering for `rocm`, delivery modes, prewarm.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_hip.py.
"""


import pytest

from tests.support.lowering_utils import ROCM_FEATURES


@pytest.mark.process
def test_embedded_opaque_is_the_same_in_two_processes():
    if not ROCM_FEATURES.module_image:
        pytest.skip("embedded delivery needs jaxlib 0.11.1+")
    from tests.support.subprocess_utils import last_line, run_python

    code = """
        import hashlib, jax.numpy as jnp
        from tests.support import kernels
        from tests.support.lowering_utils import lower_one, spec
        x = spec((4096,), jnp.float32)
        print(hashlib.sha256(lower_one(kernels.add, x, x, platform="rocm").opaque).hexdigest())
    """
    assert last_line(run_python(code)) == last_line(run_python(code))
