"""Every error a user can cause: a clear message naming the argument, the value and the fix.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_errors.py.
"""

import pytest

from tests.support.subprocess_utils import failing_import, last_line, run_python


@pytest.mark.process
def test_triton_not_installed_gives_the_install_command():
    result = run_python("""
        import sys
        sys.modules["triton"] = None
        import jax.numpy as jnp, jax_triton_rocm as jtr
        try:
            jtr.triton_call(jnp.zeros(4), kernel=None, out_shape=jnp.zeros(4), grid=1)
        except ImportError as err:
            print(type(err.__cause__).__name__, "pip install 'triton" in str(err))
    """)
    assert last_line(result) == "ModuleNotFoundError True", result.stderr[-2000:]


@pytest.mark.process
@pytest.mark.parametrize("raised", ["RuntimeError", "ValueError", "ImportError"])
def test_a_broken_triton_import_becomes_an_import_error_with_the_cause(raised):
    result = run_python(failing_import("triton", raised, "simulated: built for another LLVM"), """
        from jax_triton_rocm.base import _compat
        try:
            _compat.triton_info()
        except ImportError as err:
            print(type(err.__cause__).__name__, "does not import" in str(err))
    """)
    assert last_line(result) == f"{raised} True", result.stderr[-2000:]


@pytest.mark.process
def test_a_ptxas_failure_is_reported_without_a_dump_and_leaves_no_files():
    result = run_python("""
        import os, re
        import jax, jax.numpy as jnp
        import jax_triton_rocm as jtr
        from tests.support import kernels

        x = jax.ShapeDtypeStruct((128,), jnp.int32)
        try:
            with jtr.target_arch(cuda="sm_90"):
                jax.jit(lambda x: jtr.triton_call(
                    x, kernel=kernels.bogus_asm_kernel, out_shape=x, grid=(1,), BLOCK=128)
                ).trace(x).lower(lowering_platforms=("cuda",))
        except Exception as err:
            named = re.findall(r"\\S+[.]ptx", str(err))
            print("RESULT", type(err).__name__, "ptxas" in str(err), bool(named),
                  any(os.path.exists(p) or os.path.exists(p + ".o") for p in named))
    """)
    assert "please share the reproducer" not in result.stdout
    assert last_line(result) == "RESULT PTXASError True True False", result.stdout[-3000:]
