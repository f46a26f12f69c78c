"""benchmarks/first_result.py: each side's first result in fresh processes, cold then warm, and
the package's ratio to PyTorch."""

import os
import sys

from tests.support.subprocess_utils import ROOT

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


def test_the_program_is_checked_kernel_by_kernel():
    import jax

    cases = first_result.program_cases("cpu")
    assert [case.name for case, _, _ in cases] == list(first_result.PROGRAM)
    right = [case.reference(sizes, 0, *arrays) for case, sizes, arrays in cases]
    assert first_result.program_correct(cases, right)
    wrong = right[:-1] + [jax.tree.map(lambda x: x + 1, right[-1])]
    assert not first_result.program_correct(cases, wrong)
