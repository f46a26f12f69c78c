"""`tools/lowered_snapshot.py`: the lowered modules of a fixed set of calls, written and compared
byte for byte (the check that a refactor keeps the package's output)."""

import os
import subprocess
import sys

import pytest

from tests.support.subprocess_utils import ROOT

TOOL = os.path.join(ROOT, "tools", "lowered_snapshot.py")


@pytest.mark.process
def test_a_second_run_matches_the_first_and_a_changed_module_is_named(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    result = subprocess.run([sys.executable, TOOL, str(first)], capture_output=True, text=True,
                            timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    names = sorted(os.listdir(first))
    assert len(names) == 24 and "xla-rocm-gluon_copy.txt" in names, names
    texts = {name: (first / name).read_text() for name in names}
    assert not [n for n, text in texts.items() if text.startswith("error:")], texts
    assert "@triton_kernel_call_ffi(" in texts["jaxlib-cuda-add.txt"]
    assert "__gpu$xla.gpu.triton" in texts["xla-rocm-add.txt"]
    changed = first / "jaxlib-rocm-add_in_place.txt"
    changed.write_text(changed.read_text().replace("1000", "1001", 1))
    result = subprocess.run([sys.executable, TOOL, str(second), "--compare", str(first)],
                            capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 1, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == (
        f"differ from {first}: jaxlib-rocm-add_in_place.txt"), result.stdout
