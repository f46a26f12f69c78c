"""Autotuned calls whose operands are computed earlier in the same program, on poisoned memory.

Each check runs in a fresh process that first fills the GPU allocator's memory with huge int32
values (`real_data_kernels.poison_memory`): an autotuner that timed the configs before the
program's earlier kernels ran would see those values as indices and read or write far out of
bounds (an illegal-address crash, or stray writes into other buffers that the results show).
Forcing jaxlib's typed-FFI target (JAX_TRITON_ROCM_AUTOTUNE_TARGET=ffi) brings that back: these
are the tests that fail then. They also run under compute-sanitizer (docs/testing.md, "On a GPU").
"""

import json

import pytest

from jax_triton_rocm.base import _compat, _env
from tests.support.subprocess_utils import run_python

pytestmark = [pytest.mark.gpu, pytest.mark.process]

_PRELUDE = """
import json
from tests.support import real_data_kernels as rd
rd.poison_memory()
"""


def _run(statement: str, env: dict | None = None):
    """Runs `statement` after the prelude in a fresh process; returns what it printed last."""
    result = run_python(_PRELUDE, statement, env={"XLA_PYTHON_CLIENT_PREALLOCATE": "false",
                                                  **(env or {})}, timeout=600)
    assert result.returncode == 0, (
        f"exit status {result.returncode}\nstdout:\n{result.stdout[-2000:]}\n"
        f"stderr:\n{result.stderr[-5000:]}")
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""


def test_a_gather_by_an_index_sorted_in_the_same_jit_reads_the_real_index():
    _run("rd.check_sorted_gather()")


def test_an_in_place_kernel_on_buffers_computed_in_the_same_jit_counts_right():
    _run("rd.check_histogram()")


def test_a_chain_of_library_primitives_with_the_map_among_the_outputs_permutes_right():
    _run("rd.check_moe_chain()")


def test_the_gather_under_vmap_reads_each_examples_real_index():
    _run("rd.check_sorted_gather_under_vmap()")


def test_the_gather_under_shard_map_on_one_gpu_reads_the_real_index():
    _run("rd.check_sorted_gather_under_shard_map(n_devices=1)")


@pytest.mark.multi_gpu
def test_the_gather_under_shard_map_on_two_gpus_reads_each_shards_real_index():
    _run("rd.check_sorted_gather_under_shard_map(n_devices=2)")


@pytest.mark.parametrize("tune", ["tune_sorted_gather", "tune_moe_chain"])
def test_a_config_picked_on_real_data_is_reused_by_a_new_process_without_trials(tmp_path, tune):
    env = {_env.ENV_AUTOTUNE_DIR: str(tmp_path)}
    first = json.loads(_run(f"print(json.dumps(rd.{tune}()))", env))
    assert list(tmp_path.rglob("*.json")), "autotune remembered nothing on disk"
    second = json.loads(_run(f"print(json.dumps(rd.{tune}()))", env))
    assert second == first
    for program in (first, second):
        assert program[0]["undecided"] == []
        autotuned = [c for c in program[0]["calls"] if c["target"] == _compat.LEGACY_CALL_NAME]
        assert autotuned == [], "a tuned call still reaches jaxlib's autotuner"
        assert all(len(c["launches"]) == 1 for c in program[0]["calls"])
