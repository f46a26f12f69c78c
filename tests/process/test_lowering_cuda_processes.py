"""Lowering for platform `cuda` on a machine without a GPU, read back through jaxlib's parser
(jaxlib's Triton call: XLA's is `test_xla_native`'s).

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_lowering_cuda.py.
"""


import pytest



@pytest.mark.process
def test_same_opaque_bytes_in_two_processes():
    from tests.support.subprocess_utils import last_line, run_python

    code = """
        import hashlib, jax.numpy as jnp
        from tests.support import kernels
        from tests.support.lowering_utils import lower_one, spec
        x = spec((4096,), jnp.float32)
        print(hashlib.sha256(lower_one(kernels.add, x, x, platform="cuda").opaque).hexdigest())
    """
    first, second = run_python(code), run_python(code)
    assert last_line(first) == last_line(second)
