"""Issue 21's bad inputs beyond one row of `test_bad_inputs.py`'s table: the same value through
`triton_call` and `triton_call_lowering` gets the same verdict; inputs only a primitive's lowering
rule can give; a compile error remembered by the kernel cache; good inputs next to the limits the
checks enforce.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_bad_inputs_apis.py.
"""


import pytest

from tests.support.subprocess_utils import run_python


_UNDER_TRITON_INTERPRET = """
    import jax, jax.numpy as jnp
    import jax_triton_rocm as jtr
    from tests.support.kernels import add

    x = jax.device_put(jnp.ones(1024), jax.devices("cpu")[0])
    print("cpu", float(jax.jit(add)(x, x).sum()))
    try:
        with jtr.target_arch(cuda="sm_90"):
            jax.jit(add).trace(x, x).lower(lowering_platforms=("cuda",))
    except TypeError as err:
        print("sm_90", err)
"""


@pytest.mark.process
def test_triton_interpret_runs_on_the_cpu_and_is_named_where_a_gpu_lowering_refuses_it():
    result = run_python(_UNDER_TRITON_INTERPRET, env={"TRITON_INTERPRET": "1",
                                                      "JAX_PLATFORMS": "cpu"})
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["cpu", "sm_90"], result.stderr[-3000:]
    assert lines[0] == "cpu 2048.0"
    assert "kernel 'add_kernel' is Triton's InterpretedFunction" in lines[1]
    assert "TRITON_INTERPRET=1 was set" in lines[1] and "Unset TRITON_INTERPRET" in lines[1]
