"""With jax-triton installed and imported in the same process, the package still runs kernels."""

import importlib.util

import pytest

from tests.support.subprocess_utils import last_line, run_python

pytestmark = [pytest.mark.gpu, pytest.mark.process]


@pytest.mark.skipif(importlib.util.find_spec("jax_triton") is None,
                    reason="jax-triton is not installed (pip install jax-triton==0.3.1)")
def test_kernels_run_after_importing_jax_triton(tmp_path):
    # A fresh process: importing jax-triton empties TRITON_CACHE_DIR for the whole process.
    result = run_python("""
        import os
        import jax_triton
        assert os.environ.get("TRITON_CACHE_DIR") == "", "jax-triton no longer empties it"
        import jax, jax.numpy as jnp, numpy as np
        from tests.support.kernels import add
        x = jnp.arange(4096, dtype=jnp.float32)
        np.testing.assert_allclose(jax.jit(add)(x, x), x + x)
        print(jax_triton.__version__, repr(os.environ["TRITON_CACHE_DIR"]))
    """, env={"TRITON_HOME": str(tmp_path)})
    assert last_line(result).endswith(" ''"), result.stderr[-3000:]
    assert "TRITON_CACHE_DIR" in result.stderr  # the one warning saying why
