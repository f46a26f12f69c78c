"""The route a call takes when nothing forces one (`routes._primitive`: jaxlib's Triton call, on
every GPU platform), the ways to ask for XLA's call, and how the route is reported: the log each
lowering writes, `info`, and the test session's route counts (JAX_TRITON_ROCM_TEST_ROUTE_COUNTS).

Lowered for CUDA (sm_90) and ROCm (gfx942) on the CPU. XLA's call needs this jaxlib's Triton
dialect (`_xla_native.xla_triton_dialect`), which every CI lane's jaxlib has; a jaxlib without it
is stood in.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_route_rule.py.
"""

import json
import subprocess
import sys

import pytest

from tests.support.subprocess_utils import ROOT, child_env


@pytest.mark.process
def test_the_test_session_counts_lowerings_by_route(tmp_path):
    path = tmp_path / "routes.json"
    tests = ["tests/cpu/test_route_rule.py::"
             "test_xla_native_true_takes_xlas_call[constexpr length-cuda]",
             "tests/cpu/test_route_rule.py::test_a_kernel_with_its_output_before_its_inputs_takes_"
             "jaxlibs_call[rocm]",
             "tests/cpu/test_route_rule.py::"
             "test_an_autotuned_call_without_a_choice_takes_jaxlibs_legacy_call[cuda]"]
    env = child_env({"JAX_TRITON_ROCM_TEST_ROUTE_COUNTS": str(path)})
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-n", "2", *tests], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-3000:]
    counts = json.loads(path.read_text())
    assert counts["lowerings"] == {"xla": 1, "jaxlib": 1, "jaxlib legacy": 1}
    assert counts["kernel_names"]["jaxlib legacy"] == ["tuned_add_kernel"]
    assert counts["share"]["xla"] == pytest.approx(1 / 3)
    assert "lowerings by route: jaxlib 1 (33%; 1 kernels)" in result.stdout
    assert list(tmp_path.iterdir()) == [path]  # the workers' files merged and removed
