"""The benchmark scripts: --help prints usage and exits; without a GPU, one line says so."""

import os
import subprocess
import sys

import pytest

from tests.subprocess_utils import ROOT

BENCHMARKS = sorted(name for name in os.listdir(os.path.join(ROOT, "benchmarks"))
                    if name.endswith(".py"))


def run_benchmark(name, *args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, os.path.join("benchmarks", name), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("name", BENCHMARKS)
def test_help_prints_usage_and_exits(name):
    result = run_benchmark(name, "--help")
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("usage: "), result.stdout[:500]


@pytest.mark.parametrize("name", ["overhead.py", "moe_permute.py", "autotune_launch.py"])
def test_without_a_gpu_says_so_in_one_line_and_exits_1(name):
    import jax

    if jax.devices()[0].platform in ("gpu", "cuda", "rocm"):
        pytest.skip("a GPU is present: the benchmark would run")
    result = run_benchmark(name)
    assert result.returncode == 1
    # Above it, stderr may hold JAX's own log of a GPU plugin that failed to start.
    lines = [line for line in result.stderr.splitlines() if line.startswith("benchmarks/")]
    assert len(lines) == 1 and "needs a CUDA or ROCm GPU" in lines[0], result.stderr[-3000:]
    assert result.stderr.strip().splitlines()[-1] == lines[0]


def test_overhead_relower_mode_runs_without_a_gpu():
    result = run_benchmark("overhead.py", "relower")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = [line for line in result.stdout.splitlines() if line.startswith("re-lower, ms:")]
    assert len(rows) == 3, result.stdout
    assert "XLA Triton call" in rows[2] and "goal: 1.25" in result.stdout
