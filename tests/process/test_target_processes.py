"""Which architecture a lowering compiles for: `target_arch`, the environment, the devices.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_target.py.
"""

import pytest

from tests.support.subprocess_utils import last_line, run_python


@pytest.mark.process
def test_environment_variable_names_the_default_arch():
    result = run_python("""
        import jax, jax.numpy as jnp
        import jax_triton_rocm as jtr
        from tests.support import kernels
        x = jax.ShapeDtypeStruct((1024,), jnp.float32)
        jtr.register(platforms=("cuda", "rocm"))
        for platform in ("cuda", "rocm"):
            lowered = jax.jit(kernels.add).trace(x, x).lower(lowering_platforms=(platform,))
            kernel = jtr.kernel_calls(lowered)[0].message.kernel_call.kernel
            print(kernel.compute_capability, end=" ")
        print()
    """, env={"JAX_TRITON_ROCM_TARGET_ARCH": "cuda=sm_80,rocm=gfx950"})
    assert last_line(result) == "80 95", result.stderr[-2000:]


@pytest.mark.process
def test_the_variable_unset_after_it_was_read_is_refused_as_too_late():
    result = run_python("""
        import os
        import jax, jax.numpy as jnp
        import jax_triton_rocm as jtr
        from tests.support import kernels
        del os.environ["JAX_TRITON_ROCM_TARGET_ARCH"]
        x = jax.ShapeDtypeStruct((1024,), jnp.float32)
        try:
            jax.jit(kernels.add).trace(x, x).lower(lowering_platforms=("cuda",))
        except RuntimeError as err:
            print(err)
    """, env={"JAX_TRITON_ROCM_TARGET_ARCH": "cuda=sm_80"})
    assert last_line(result).startswith(
        "JAX_TRITON_ROCM_TARGET_ARCH was unset too late: jax_triton_rocm read it when it was "
        "imported ('cuda=sm_80' then)"), result.stderr[-2000:]
