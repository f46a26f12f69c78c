"""examples/multi_process.py: two processes joined by jax.distributed, a Triton kernel per shard."""

import os
import subprocess
import sys

import pytest

from tests.subprocess_utils import ROOT

SCRIPT = os.path.join(ROOT, "examples", "multi_process.py")


def _launch(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          env=env, timeout=280, cwd=ROOT)


def _check_both_processes_matched(result: subprocess.CompletedProcess, platform: str) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for process_id in (0, 1):
        assert (f"process {process_id}/2: 2 devices ({platform}), 1 local shard(s) match, "
                f"global sum") in result.stdout, result.stdout[-3000:]
    assert "exit codes [0, 0]" in result.stdout


def test_two_cpu_processes_run_the_kernel_on_their_shards():
    _check_both_processes_matched(_launch("--platform", "cpu"), "cpu")


@pytest.mark.gpu
@pytest.mark.multi_gpu
def test_two_gpu_processes_run_the_kernel_on_their_shards():
    _check_both_processes_matched(_launch("--platform", "cuda"), "gpu")
