"""benchmarks/first_result.py: each side's first result in fresh processes, cold then warm, and
the package's ratio to PyTorch."""

import json
import os
import sys

import pytest

from tests.support.subprocess_utils import ROOT, run_script

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))  # for the script's own functions
import first_result  # noqa: E402  (from the scripts' folder)


def test_ratios_divide_each_package_row_by_pytorchs_same_state(monkeypatch):
    seconds = {("package", False): {"cold": 2.0, "warm": 1.0},
               ("package", True): {"cold": 3.0, "warm": 0.5},
               ("pytorch", False): {"cold": 4.0, "warm": 2.0}}
    monkeypatch.setattr(first_result, "run_side",
                        lambda kernel, side, jax_cache, where: dict(seconds[side, jax_cache]))
    rows = first_result.table(["softmax"], "gpu")
    by_side = {(r["side"], r["jax_cache"]): r for r in rows}
    assert by_side["package", "off"]["ratio_cold"] == 0.5
    assert by_side["package", "off"]["ratio_warm"] == 0.5
    assert by_side["package", "on"]["ratio_cold"] == 0.75
    assert by_side["package", "on"]["ratio_warm"] == 0.25
    assert "ratio_cold" not in by_side["pytorch", "-"]


def test_a_failed_or_wrong_side_is_printed_as_a_problem(capsys):
    first_result.print_table([{"kernel": "matmul", "side": "package", "jax_cache": "off",
                               "cold": 1.0, "problem": "package matmul warm: wrong result"}])
    out = capsys.readouterr().out
    assert "problem: package matmul warm: wrong result" in out
    assert "matmul" in out.splitlines()[1]


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
