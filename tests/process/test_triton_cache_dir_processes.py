"""Coexisting with jax-triton, which sets TRITON_CACHE_DIR to the empty string when imported."""

import os

import pytest

from tests.support.subprocess_utils import last_line, run_python

# Lowers two different kernels (two Triton compiles) for sm_90 after the stand-in has emptied
# TRITON_CACHE_DIR, then prints what the environment says afterwards.
LOWER_AFTER_JAX_TRITON = """
    import logging, os
    logging.basicConfig(level=logging.WARNING, format="LOG %(levelname)s %(message)s")
    import tests.support.jax_triton_standin  # what importing jax-triton 0.3.1 does to the env
    import jax, jax.numpy as jnp
    import jax_triton_rocm as jtr
    from tests.support.kernels import add, softmax

    with jtr.target_arch(cuda="sm_90"):
        for fn, args in ((add, (jax.ShapeDtypeStruct((1024,), jnp.float32),) * 2),
                         (softmax, (jax.ShapeDtypeStruct((8, 100), jnp.float32),))):
            lowered = jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
            assert len(jtr.kernel_calls(lowered)) == 1
    import triton
    print(repr(os.environ["TRITON_CACHE_DIR"]), "dir" in vars(triton.knobs.cache))
"""


@pytest.mark.process
def test_lowering_works_and_leaves_the_environment_as_jax_triton_set_it(tmp_path):
    result = run_python(LOWER_AFTER_JAX_TRITON, env={"TRITON_HOME": str(tmp_path)})
    assert last_line(result) == "'' False", result.stderr[-3000:]


@pytest.mark.process
def test_compiles_go_to_tritons_default_location(tmp_path):
    result = run_python(LOWER_AFTER_JAX_TRITON, env={"TRITON_HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    cache = tmp_path / ".triton" / "cache"
    # One folder per Triton compile (each holds the kernel's IR, binary and metadata).
    assert len([entry for entry in cache.iterdir() if entry.is_dir()]) >= 2, os.listdir(cache)


@pytest.mark.process
def test_the_reason_is_logged_once_at_warning_level(tmp_path):
    result = run_python(LOWER_AFTER_JAX_TRITON, env={"TRITON_HOME": str(tmp_path)})
    warnings = [line for line in result.stderr.splitlines()
                if line.startswith("LOG WARNING jax_triton_rocm: TRITON_CACHE_DIR")]
    assert len(warnings) == 1, result.stderr[-3000:]
    assert "jax-triton" in warnings[0] and str(tmp_path / ".triton" / "cache") in warnings[0]
