"""benchmarks/first_result.py: each side's first result in fresh processes, cold then warm, and
the package's ratio to PyTorch.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_first_result_benchmark.py.
"""

import json
import os
import sys

import pytest

from tests.support.subprocess_utils import ROOT, run_script

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))  # for the scripts' own functions
import first_result  # noqa: E402  (from the scripts' folder)


@pytest.mark.process
def test_check_on_cpu_times_every_kernel_cold_and_warm_with_right_results(tmp_path):
    report = tmp_path / "first.json"
    result = run_script(os.path.join("benchmarks", "first_result.py"), "--check-on-cpu",
                        "--json", str(report), timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = json.loads(report.read_text())["rows"]
    assert {(r["kernel"], r["jax_cache"]) for r in rows} == {
        (k, c) for k in first_result.KERNELS for c in ("off", "on")}
    for row in rows:
        assert "problem" not in row, row
        assert row["cold"] > 0 and row["warm"] > 0, row
