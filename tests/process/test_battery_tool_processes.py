"""`tools/battery`, the battery of bad and edge inputs: its classification rule, and one run.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_battery_tool.py.
"""

import json
import subprocess
import sys

import pytest

from tests.support.subprocess_utils import BATTERY, ROOT


@pytest.mark.process
def test_a_run_prints_the_counts_and_writes_each_result(tmp_path):
    out = tmp_path / "results.json"
    result = subprocess.run(
        [sys.executable, BATTERY, "-k", "triton_call: grid=(-1,)", "--json", str(out)],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("1 inputs in "), result.stdout
    [entry] = json.loads(out.read_text())
    assert entry["class"] == "clear" and entry["group"] == "triton_call", entry
