"""NumPy scalars as constexprs: they compile on a cold Triton cache, and to the same kernel as the
Python scalars they equal, through `triton_call` and `triton_call_lowering` alike.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_numpy_constexprs.py.
"""

import json

import pytest

from tests.support.subprocess_utils import last_line, run_python


# Run in a fresh process with an empty TRITON_CACHE_DIR: the NumPy-valued call compiles first,
# on the cold cache; prints, per API and platform, whether it gave the Python-valued kernel.
COLD_CACHE = """
    import json
    import jax.numpy as jnp
    from tests.support.lowering_utils import capture_one, spec
    from tests.support.numpy_constexpr_calls import (NUMPY_VALUES, PYTHON_VALUES, affine_call,
                                                     affine_primitive, positional_call, N)

    X = spec((N,), jnp.float32)
    same = {}
    for api, fn in (("triton_call", affine_call), ("triton_call_lowering", affine_primitive),
                    ("positional", positional_call)):
        for platform in ("cuda", "rocm"):
            numpy_kernel, python_kernel = (
                capture_one(lambda x: fn(x, values), X, platform=platform).kernels[0]
                for values in (NUMPY_VALUES, PYTHON_VALUES))
            same[f"{api} {platform}"] = (numpy_kernel.key == python_kernel.key
                                         and numpy_kernel.binary == python_kernel.binary)
    print(json.dumps(same))
"""


@pytest.mark.process
def test_numpy_constexprs_compile_on_a_cold_cache_as_the_python_values_do(tmp_path):
    result = run_python(COLD_CACHE, env={"TRITON_CACHE_DIR": str(tmp_path / "cold"),
                                         "JAX_PLATFORMS": "cpu"})
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(last_line(result)) == {
        f"{api} {platform}": True
        for api in ("triton_call", "triton_call_lowering", "positional")
        for platform in ("cuda", "rocm")}
