"""Compiles started when a call is traced, at a fork and at the interpreter's exit (fresh
processes: docs/design.md, "Compiles start at the trace")."""

import pathlib

import pytest

from tests.support.subprocess_utils import run_python

pytestmark = pytest.mark.process

# Traces (never lowers) the three-config autotuned add for sm_90: one config compiles, one at a
# time, the other two wait in the pool's queue.
TRACE_TUNED_ADD = """
import os, sys
import jax, jax.numpy as jnp
import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state
from tests.support import autotune_utils

x = jax.ShapeDtypeStruct((1024,), jnp.float32)
with jtr.target_arch(cuda="sm_90"):
    jax.make_jaxpr(autotune_utils.tuned_add)(x, x)
assert len(_state.COMPILE_POOL) == 3, len(_state.COMPILE_POOL)
"""


def _env(tmp_path) -> dict:
    return {"JAX_PLATFORMS": "cpu", "JAX_TRITON_ROCM_COMPILE_THREADS": "1",
            "TRITON_CACHE_DIR": str(tmp_path / "triton")}


def test_the_exit_drops_the_queued_compiles_and_waits_for_the_one_running(tmp_path):
    result = run_python(TRACE_TUNED_ADD, "print('exiting')", env=_env(tmp_path))
    assert result.returncode == 0 and "exiting" in result.stdout, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    compiled = list(pathlib.Path(tmp_path / "triton").rglob("*.cubin"))
    assert len(compiled) == 1, compiled


def test_a_child_forked_while_compiles_run_lowers_without_the_parent_s(tmp_path):
    result = run_python(TRACE_TUNED_ADD, """
    pid = os.fork()
    if pid == 0:  # the parent's running compile holds its one slot: the child has its own
        forgot = len(_state.COMPILE_POOL) == 0
        with jtr.target_arch(cuda="sm_90"):
            lowered = jax.jit(autotune_utils.tuned_add).trace(x, x).lower(
                lowering_platforms=("cuda",))
        os._exit(0 if forgot and len(jtr.kernel_calls(lowered)) == 1 else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
    """, env=_env(tmp_path), timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "child 0" in result.stdout, result.stdout + result.stderr[-3000:]
