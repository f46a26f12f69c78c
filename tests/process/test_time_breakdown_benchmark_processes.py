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
    """Also: the report's first line and the JSON name the settings the figures were taken
    under, the user's own XLA flags kept beside the command-buffer one."""
    report = tmp_path / "breakdown.json"
    own_flag = "--xla_gpu_command_buffer_update_mode=SKIP_TEMP"
    result = run_script(os.path.join("benchmarks", "time_breakdown.py"), "--check-on-cpu",
                        "--kernels", "softmax", "--executions", "1", "--repeats", "1",
                        "--command-buffers", "off", "--results", "dropped",
                        "--json", str(report), env={"XLA_FLAGS": own_flag}, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    written = json.loads(report.read_text())
    assert written["command_buffers"] == "off" and written["held_results"] is False, written
    flags = written["xla_flags"].split()
    assert flags == [own_flag, "--xla_gpu_enable_command_buffer="], flags
    settings = next(line for line in result.stdout.splitlines() if line.startswith("command"))
    assert settings.startswith("command buffers off; results dropped; "), settings
    assert settings.endswith(f"XLA_FLAGS {written['xla_flags']}"), settings
    (softmax,) = written["results"]
    for side in ("package", "xla"):
        assert softmax[side]["wall"] > 0 and softmax[side]["dispatch"] > 0, softmax
    assert "host events before the first kernel" in result.stdout
    assert "  softmax: " in result.stdout.split("\ngoal (wall within 1.05")[1]
