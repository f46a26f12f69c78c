"""The benchmark scripts: --help prints usage and exits; each says first, before it imports JAX,
whether it needs a GPU, and without one a script that needs it says so in one line."""

import json
import os
import subprocess
import sys

import pytest

import jax_triton_rocm as jtr
from tests import kernels
from tests.subprocess_utils import ROOT, SharedInterpreter

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))  # for the scripts' own functions
import _needs  # noqa: E402  (from the scripts' folder)

# The scripts; modules named with a leading underscore are their shared parts.
BENCHMARKS = sorted(name for name in os.listdir(os.path.join(ROOT, "benchmarks"))
                    if name.endswith(".py") and not name.startswith("_"))
GPU_ONLY = ["overhead.py", "moe_permute.py", "autotune_launch.py", "launch_cost.py",
            "scalar_compile.py"]
CPU_IS_ENOUGH = ["autotune_compile.py", "memory.py", "relower.py"]
no_gpu_device = pytest.mark.skipif(bool(_needs.gpu_device_files()),
                                   reason="a GPU device is present: the benchmark would run")


def run_benchmark(name, *args, timeout=120):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, os.path.join("benchmarks", name), *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def helps(tmp_path_factory):
    """Each script's `--help`, all run in one interpreter."""
    shared = SharedInterpreter(tmp_path_factory.mktemp("helps") / "interpreter.log")
    try:
        yield {name: shared.run(os.path.join(ROOT, "benchmarks", name), "--help", cwd=ROOT)
               for name in BENCHMARKS}
    finally:
        shared.close()


@pytest.mark.parametrize("name", BENCHMARKS)
def test_help_prints_usage_and_exits(name, helps):
    result = helps[name]
    assert result["ok"], result["stderr"][-3000:] + result["error"][-3000:]
    assert result["stdout"].startswith("usage: "), result["stdout"][:500]


def test_the_scripts_are_sorted_by_what_they_need():
    assert sorted(GPU_ONLY + CPU_IS_ENOUGH) == BENCHMARKS


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_script_says_what_it_needs_before_it_imports_jax(name):
    with open(os.path.join(ROOT, "benchmarks", name)) as source:
        text = source.read()
    call = "_needs.gpu_needed(" if name in GPU_ONLY else "_needs.cpu_is_enough("
    first_import = min(text.index(s) for s in ("\nimport jax", "\nfrom _common", "\nimport _common")
                       if s in text)
    assert call in text[:first_import], f"benchmarks/{name} does not call {call}...) first"


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
    assert len(same) == 3 + jax_triton and len(new) == 2 + jax_triton, result.stdout
    assert "XLA add" in new[0] and "jaxlib FFI target" in new[1]
    for row in same + new:  # wall, ratio, CPU, ratio
        assert all(float(value) > 0 for value in row.split()[-4:]), row
    assert "goal, same shape: 1.25 at most; measured " in result.stdout
    assert "goal, new shape: 1.1 at most; measured " in result.stdout


def test_relower_report_stops_when_a_new_length_compiles_a_kernel():
    import relower

    def block_per_length(x, y):  # a new length picks another BLOCK, a constexpr: a new kernel
        return kernels.add(x, y, block=256 if x.size == relower.BASE_LENGTH else 512)

    with pytest.raises(RuntimeError, match="compiled a new kernel"):
        relower.interleaved_ms({"per length": block_per_length}, relower.new_lengths(1))


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
def test_scalar_compile_dry_run_compiles_once_per_value_on_xlas_route_only():
    result = run_benchmark("scalar_compile.py", "--dry-run", "--values", "3", timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    compiles = {line.rsplit(None, 4)[0]: line.split()[-1]
                for line in result.stdout.splitlines() if line.split()[-1].isdigit()}
    assert compiles == {"jaxlib FFI target": "1", "XLA Triton call": "3"}, result.stdout


@pytest.mark.slow
def test_launch_cost_worker_prints_each_row_and_carries_on_past_a_failure(monkeypatch, capsys):
    import launch_cost

    measured = []

    def fake_chain(op, length, size):  # the chain itself needs a GPU
        measured.append(op)
        if len(measured) == 2:
            raise RuntimeError("boom")
        return 1.5

    monkeypatch.setattr(launch_cost, "chain_per_kernel_us", fake_chain)
    with jtr.target_arch(cuda="sm_90"):
        launch_cost.measure_rows(2, platform_name="cuda")
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [key for line in lines for key in line] == [row.key for row in launch_cost.ROWS]
    values = [value for line in lines for value in line.values()]
    assert values[1] == "failed: RuntimeError: boom"
    assert values[:1] + values[2:] == [1.5] * (len(values) - 1)


def test_launch_cost_report_shows_rows_a_failed_row_and_a_crashed_worker(monkeypatch, capsys):
    import launch_cost

    keys = [row.key for row in launch_cost.ROWS]
    starts = []

    def fake_run_fresh(script, args, command_buffers, timeout_s=None, env=None):
        start = int(args[args.index("--from-row") + 1])
        starts.append((command_buffers, start))
        values = {k: 1.0 if i == 0 else 2.0 for i, k in enumerate(keys)}
        values[keys[3]] = "failed: RuntimeError: boom"
        if command_buffers:
            return 0, "\n".join(json.dumps({k: values[k]}) for k in keys[start:]), ""
        crash_at = 5 if start < 5 else len(keys)  # the worker dies on row 5, once
        lines = [json.dumps({k: values[k]}) for k in keys[start:crash_at]]
        return -11, "\n".join(lines), "Fatal Python error: Segmentation fault"

    monkeypatch.setattr(launch_cost, "run_fresh", fake_run_fresh)
    assert launch_cost.report(200) == 1
    out = capsys.readouterr().out
    assert starts == [(True, 0), (False, 0), (False, 6)]
    [small] = [line for line in out.splitlines() if line.startswith("small (4 params)")]
    assert small.split()[-4:] == ["2.000", "2.000", "2.000", "2.000"]
    [big] = [line for line in out.splitlines() if line.startswith("big (~20x")]
    assert big.split()[-4:] == ["2.000", "2.000", "failed", "-"]
    assert "small/ptx_only (command buffers on): failed: RuntimeError: boom" in out
    assert ("big/default (command buffers off): failed: the worker exited (-11) on it: Fatal "
            "Python error: Segmentation fault") in out
    assert "binary 20x larger: big / small: 1.000, -" in out


@pytest.mark.process
def test_overhead_runs_dry_run_checks_each_chains_route_in_fresh_processes():
    from jax_triton_rocm.base import _compat

    result = run_benchmark("overhead.py", "--runs", "2", "--dry-run", timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    runs = _rows(result.stdout, "run ")
    assert [line.split(":")[0] for line in runs] == [
        f"run {i}, command buffers {s}" for i in (1, 2) for s in ("on", "off")]
    plain = (_compat.XLA_TRITON_TARGET if _compat.jaxlib_version() in
             _compat.XLA_TRITON_CALL_RUN["cuda"] else _compat.FFI_TARGET)
    for line in runs:
        routes = json.loads(line.split("routes ")[1].split(" (dry run")[0])
        assert routes == {"plain": plain, "ffi": _compat.FFI_TARGET, "unfused": "XLA"}, line


@pytest.mark.parametrize("plain,status,verdict", [(1.5, 0, "met"), (1.8, 1, "NOT met")])
def test_overhead_runs_print_every_figure_and_the_worst_ratio(monkeypatch, capsys, plain,
                                                               status, verdict):
    import overhead

    calls = []

    def fake_in_fresh_process(script, args, command_buffers):
        calls.append((script, args, command_buffers))
        base = 1.4 if command_buffers else 5.0
        slow = [base, base * plain / 1.4 if command_buffers else base, base]
        return {"routes": {"plain": "xla", "ffi": "ffi", "unfused": "XLA"},
                "us": {"plain": slow, "ffi": [9.0] * 3, "unfused": [base] * 3}}

    monkeypatch.setattr(overhead, "in_fresh_process", fake_in_fresh_process)
    assert overhead.runs_report(3, 3, dry_run=False) == status
    out = capsys.readouterr().out
    assert len(calls) == 6 and all(args[:3] == ["chain-worker", "--rows", "plain,ffi,unfused"]
                                   for _, args, _ in calls)
    assert [c[2] for c in calls] == [True, False] * 3
    assert out.count("default route / XLA's unfused add: ") == 6
    assert f"1.000, {plain / 1.4:.3f}, 1.000" in out and "9.000, 9.000, 9.000" in out
    assert (f"worst ratio, default route of a plain kernel / XLA's unfused add: "
            f"{plain / 1.4:.3f} (command buffers on), 1.000 (off); goal 1.15 at most: "
            f"{verdict}") in out


def test_overhead_runs_report_a_failed_run_and_go_on(monkeypatch, capsys):
    import overhead

    def fake_in_fresh_process(script, args, command_buffers):
        if not command_buffers:
            raise RuntimeError("the worker crashed")
        return {"routes": {"plain": "xla", "ffi": "ffi", "unfused": "XLA"},
                "us": {"plain": [1.4], "ffi": [3.0], "unfused": [1.4]}}

    monkeypatch.setattr(overhead, "in_fresh_process", fake_in_fresh_process)
    assert overhead.runs_report(2, 1, dry_run=False) == 1
    out = capsys.readouterr().out
    assert out.count("command buffers off: FAILED: the worker crashed") == 2
    assert out.count("default route / XLA's unfused add: 1.000") == 2


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


def test_overhead_chain_figures_time_each_chain_in_turn():
    import overhead

    # XLA's own adds run on the CPU too: the timing loop itself, without a GPU.
    found = overhead.chain_figures(["unfused", "fused"], 2)
    assert found["routes"] == {"unfused": "XLA", "fused": "XLA"}
    assert [len(found["us"][name]) for name in ("unfused", "fused")] == [2, 2]
    assert all(value > 0 for values in found["us"].values() for value in values)


# Each call of the timed chain (200 of them: `_chain`'s default length) multiplies by SCALE, so
# float32 overflows to inf, which the timing does not mind; NumPy's warning about it (the
# interpreter computes with NumPy) is noise.
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")
def test_autotune_launch_measures_every_route_on_the_cpu(tmp_path, monkeypatch):
    """Each route of benchmarks/autotune_launch.py, chain and first call, on tiny inputs in the
    interpreter: the timed paths the GPU run takes, the remembered choice made beforehand."""
    import importlib.util

    from jax_triton_rocm.lowering import _choices

    spec = importlib.util.spec_from_file_location(
        "autotune_launch", os.path.join(ROOT, "benchmarks", "autotune_launch.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv(_choices.ENV_AUTOTUNE_DIR, str(tmp_path))
    monkeypatch.setattr(bench, "CHAIN_LENGTH", 2)
    bench.tune_first_calls(size=1024)
    for route in bench.ROUTES:
        assert bench.per_kernel_us(route, 3, repeats=1) > 0
        assert bench.first_call_ms(route, range(7, 8), size=1024) > 0
