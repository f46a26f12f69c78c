"""benchmarks/time_breakdown.py: one execution's wall time split on the profiler's clock into
dispatch, host time before the first kernel, GPU time and the final wait.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_time_breakdown_benchmark.py.
"""

import json
import os

import pytest

from tests.support.subprocess_utils import run_script


@pytest.mark.process
def test_check_on_cpu_splits_both_chains(tmp_path):
    report = tmp_path / "breakdown.json"
    result = run_script(os.path.join("benchmarks", "time_breakdown.py"), "--check-on-cpu",
                        "--kernels", "softmax", "--executions", "1", "--repeats", "1",
                        "--command-buffers", "off", "--json", str(report), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    written = json.loads(report.read_text())
    assert written["command_buffers"] == "off" and "command buffers off" in result.stdout
    assert "--xla_gpu_enable_command_buffer=" in written["xla_flags"].split(), written["xla_flags"]
    (softmax,) = written["results"]
    for side in ("package", "xla"):
        assert softmax[side]["wall"] > 0 and softmax[side]["dispatch"] > 0, softmax
    assert "host events before the first kernel" in result.stdout
    assert "  softmax: " in result.stdout.split("\ngoal (wall within 1.05")[1]
