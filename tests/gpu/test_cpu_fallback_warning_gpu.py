"""One warning when kernels fall back to Triton's interpreter while a GPU plugin is installed.

Each case is a fresh process (the warning is once per process) running two kernels, twice each,
on the CPU. With a jaxlib GPU plugin installed (a stand-in whose start-up fails, as on a machine
without the GPU) the package's logger warns once, saying why and how to change it; with none
installed the CPU is the only choice and nothing is logged.

This file holds the tests that need a GPU (mark `gpu`); the others are in
tests/process/test_cpu_fallback_warning.py.
"""

import pytest

from tests.support.subprocess_utils import INTERPRETER_WARNING, run_two_kernels_twice

pytestmark = pytest.mark.process  # each test starts Python processes


@pytest.mark.gpu
def test_a_computation_placed_on_the_cpu_beside_a_gpu_says_so_once():
    stderr = run_two_kernels_twice("")
    assert stderr.count(INTERPRETER_WARNING) == 1, stderr[-3000:]
    assert "A GPU is present, but this computation is placed on the CPU" in stderr, stderr[-3000:]
