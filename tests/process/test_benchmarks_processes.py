"""The benchmark scripts: --help prints usage and exits; each says first, before it imports JAX,
whether it needs a GPU, and without one a script that needs it says so in one line.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_benchmarks.py.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from tests.support.subprocess_utils import CPU_IS_ENOUGH, GPU_ONLY, ROOT, run_script

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))  # for the scripts' own functions
import _needs  # noqa: E402  (from the scripts' folder)

no_gpu_device = pytest.mark.skipif(bool(_needs.gpu_device_files()),
                                   reason="a GPU device is present: the benchmark would run")


def run_benchmark(name, *args, timeout=120):
    return run_script(os.path.join("benchmarks", name), *args, timeout=timeout)


@pytest.fixture
def without_jax(tmp_path):
    """A PYTHONPATH entry under which importing JAX fails: what a script prints then, it
    printed before importing JAX."""
    (tmp_path / "jax").mkdir()
    (tmp_path / "jax" / "__init__.py").write_text("raise ImportError('JAX was imported')\n")
    return str(tmp_path)


@pytest.mark.process
@no_gpu_device
@pytest.mark.parametrize("name", GPU_ONLY)
def test_without_a_gpu_device_the_one_line_comes_before_jax_is_imported(name, without_jax):
    env = dict(os.environ, PYTHONPATH=without_jax)
    result = subprocess.run([sys.executable, os.path.join("benchmarks", name)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "JAX was imported" not in result.stderr, result.stderr
    assert result.stderr.splitlines() == [
        f"benchmarks/{name}: needs a CUDA or ROCm GPU, and this machine has none (no "
        f"/dev/nvidia[0-9]* or /dev/kfd device)"]


@pytest.mark.process
@pytest.mark.parametrize("name", CPU_IS_ENOUGH)
def test_a_script_that_runs_on_the_cpu_says_so_before_jax_is_imported(name, without_jax):
    env = dict(os.environ, PYTHONPATH=without_jax)
    result = subprocess.run([sys.executable, os.path.join("benchmarks", name)], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "JAX was imported" in result.stderr
    assert result.stdout.startswith(f"benchmarks/{name}: runs on the CPU (no GPU needed): ")


@pytest.mark.process
@pytest.mark.parametrize("name", GPU_ONLY)
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


def _rows(stdout, prefix):
    return [line for line in stdout.splitlines() if line.startswith(prefix)]


@pytest.mark.process
@pytest.mark.parametrize("command", [("overhead.py", "relower"), ("relower.py", "--rounds", "5")])
def test_relower_report_runs_without_a_gpu(command):
    result = run_benchmark(*command)
    assert result.returncode == 0, result.stderr[-3000:]
    same, new = (_rows(result.stdout, f"re-lower, {what} shape, ms:") for what in ("same", "new"))
    jax_triton = not _rows(result.stdout, "jax-triton: not measured")
    assert len(same) == 4 + jax_triton and len(new) == 4 + jax_triton, result.stdout
    assert "XLA add" in new[0] and "jaxlib FFI target" in new[1] and "helper" in new[2]
    assert "XLA Triton call" in new[3], result.stdout
    for row in same + new:  # wall, ratio, CPU, ratio
        assert all(float(value) > 0 for value in row.split()[-4:]), row
    assert "goal, same shape: 1.25 at most; measured " in result.stdout
    assert "goal, new shape: 1.1 at most; measured " in result.stdout


@pytest.mark.process
@pytest.mark.slow
def test_launch_cost_dry_run_checks_every_row_without_a_gpu():
    result = run_benchmark("launch_cost.py", "--dry-run", timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    checks = [line.split()[-1] for line in result.stdout.splitlines()
              if line.endswith((" ok", " FAILED"))]
    import launch_cost

    assert checks == ["ok"] * len(launch_cost.ROWS), result.stdout
    [ratio] = _rows(result.stdout, "big / small binary")
    assert float(ratio.split(": ")[1].split("x")[0]) >= 15, ratio


@pytest.mark.process
def test_scalar_compile_dry_run_compiles_once_for_every_value_on_both_routes():
    result = run_benchmark("scalar_compile.py", "--dry-run", "--values", "3", timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    compiles = {line.rsplit(None, 4)[0]: line.split()[-1]
                for line in result.stdout.splitlines() if line.split()[-1].isdigit()}
    assert compiles == {"jaxlib FFI target": "1", "XLA Triton call": "1"}, result.stdout


@pytest.mark.process
def test_overhead_runs_dry_run_checks_each_chains_route_in_fresh_processes():
    from jax_triton_rocm.base import _compat

    result = run_benchmark("overhead.py", "--runs", "2", "--dry-run", timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = _rows(result.stdout, "run ")
    assert [line.split(":")[0] for line in runs] == [
        f"run {i}, command buffers {s}" for i in (1, 2) for s in ("on", "off")]
    for line in runs:
        routes = json.loads(line.split("routes ")[1].split(" (dry run")[0])
        # With command buffers off the default (auto) takes the legacy target; the FFI row
        # forces its own.
        plain = _compat.LEGACY_CALL_NAME if line.endswith("off") or "off:" in line else \
            _compat.FFI_CALL_NAME
        assert routes == {"plain": plain, "ffi": _compat.FFI_CALL_NAME, "unfused": "XLA"}, line


@pytest.mark.process
def test_launch_cost_rows_picks_rows_and_keeps_the_baseline():
    result = run_benchmark("launch_cost.py", "--dry-run", "--rows", "small/ttir,big/native",
                           timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    checked = [line.rsplit(None, 8)[0].strip() for line in result.stdout.splitlines()
               if line.endswith(" ok")]
    assert checked == ["XLA add, unfused", "small: FFI, CUBIN + TTIR", "big: XLA Triton call"]
    wrong = run_benchmark("launch_cost.py", "--dry-run", "--rows", "small/nothing")
    assert wrong.returncode == 2 and "--rows: no row small/nothing" in wrong.stderr


@pytest.mark.process
@pytest.mark.slow
def test_real_kernels_check_on_cpu_checks_and_lowers_every_kernel():
    """The package's side of every kernel in the interpreter against jax.numpy, and every chain
    lowered for sm_90 at the measured sizes (skipped only where this jax cannot, as the TMA
    kernel on jax < 0.11.1)."""
    import importlib.util

    import real_kernels

    result = run_benchmark("real_kernels.py", "--check-on-cpu", timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    lines = result.stdout.splitlines()
    for name in real_kernels.NAMES:
        [check] = [line for line in lines if line.startswith(f"check {name} (package")]
        assert check.endswith(": ok"), check
        [lower] = [line for line in lines if line.startswith(f"lower {name} for sm_90: ")]
        assert lower.endswith(": ok") or ": skipped: " in lower, lower
    if importlib.util.find_spec("torch") is None:
        assert "PyTorch side: not checked: PyTorch is not installed" in lines
    else:
        assert sum(line.startswith("check ") and "(PyTorch" in line and line.endswith(": ok")
                   for line in lines) == len(real_kernels.CASES), result.stdout
    assert lines[-1] == "check on the CPU: all ok"


@pytest.mark.process
def test_stream_fresh_hands_over_each_line_and_kills_a_silent_process(tmp_path):
    import time

    from _common import stream_fresh

    script = tmp_path / "silent.py"
    script.write_text("import time\nprint('first', flush=True)\ntime.sleep(60)\n")
    lines = []
    start = time.monotonic()
    status = stream_fresh(str(script), [], True, lines.append, idle_timeout_s=1.0)
    assert status == "printed nothing for 1.0 s" and lines == ["first"]
    assert time.monotonic() - start < 30
    talking = tmp_path / "talking.py"
    talking.write_text("import os, sys\nprint(os.environ['XLA_FLAGS'])\n"
                       "print('to stderr', file=sys.stderr)\nsys.exit(3)\n")
    lines.clear()
    assert stream_fresh(str(talking), [], False, lines.append) == 3
    assert lines[0].endswith("--xla_gpu_enable_command_buffer=") and lines[1] == "to stderr"


@pytest.mark.process
def test_real_kernels_refuse_an_unknown_kernel():
    result = run_benchmark("real_kernels.py", "--check-on-cpu", "--kernels", "softmax,nothing")
    assert result.returncode == 2
    assert "--kernels: no kernel nothing; kernels: softmax," in result.stderr


@pytest.mark.process
def test_memory_report_sets_the_package_beside_triton_and_jax_alone():
    result = run_benchmark("memory.py", "--variants", "3", timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {line.split("  ")[0]: line for line in result.stdout.splitlines()
            if line.startswith(("this checkout  ", "Triton only  ", "JAX only  "))}
    assert sorted(rows) == ["JAX only", "Triton only", "this checkout"], result.stdout
    # RSS / live CompiledKernel objects / the package's cache entries, at each of 4 stages
    package = re.findall(r"([\d.]+) /\s+(\d+) /\s+(\d+)", rows["this checkout"])
    assert [int(kernels) for _, kernels, _ in package] == [1, 4, 0, 0]
    assert int(package[1][2]) > int(package[0][2]) and int(package[2][2]) == 0
    assert "MB per 1000" in result.stdout
