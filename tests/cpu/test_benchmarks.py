"""The benchmark scripts: --help prints usage and exits; each says first, before it imports JAX,
whether it needs a GPU, and without one a script that needs it says so in one line."""

import dataclasses
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from tests.support import kernels
from tests.support.subprocess_utils import CPU_IS_ENOUGH, GPU_ONLY, ROOT, SharedInterpreter

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))  # for the scripts' own functions

# The scripts; modules named with a leading underscore are their shared parts.
BENCHMARKS = sorted(name for name in os.listdir(os.path.join(ROOT, "benchmarks"))
                    if name.endswith(".py") and not name.startswith("_"))


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


def test_first_result_help_says_it_measures_what_its_table_shows(helps):
    # The table's columns: cold and warm seconds, with JAX's persistent cache off and on.
    usage = " ".join(helps["first_result.py"]["stdout"].split())
    assert "cold (an empty Triton cache) and warm (a second process on it)" in usage, usage
    assert "JAX's persistent compilation cache off and on" in usage, usage


def test_the_scripts_are_sorted_by_what_they_need():
    assert sorted(GPU_ONLY + CPU_IS_ENOUGH) == BENCHMARKS


@pytest.mark.parametrize("name", BENCHMARKS)
def test_every_script_says_what_it_needs_before_it_imports_jax(name):
    with open(os.path.join(ROOT, "benchmarks", name)) as source:
        text = source.read()
    call = "_needs.gpu_needed(" if name in GPU_ONLY else "_needs.cpu_is_enough("
    # A script that imports JAX only inside its functions has no such line: all of it counts.
    first_import = min([text.index(s) for s in ("\nimport jax", "\nfrom _common",
                                                "\nimport _common") if s in text] or [len(text)])
    assert call in text[:first_import], f"benchmarks/{name} does not call {call}...) first"


def test_relower_report_stops_when_a_new_length_compiles_a_kernel():
    import relower

    def block_per_length(x, y):  # a new length picks another BLOCK, a constexpr: a new kernel
        return kernels.add(x, y, block=256 if x.size == relower.BASE_LENGTH else 512)

    with pytest.raises(RuntimeError, match="compiled a new kernel"):
        relower.interleaved_ms({"per length": block_per_length}, relower.new_lengths(1))


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

    from jax_triton_rocm.base import _env

    spec = importlib.util.spec_from_file_location(
        "autotune_launch", os.path.join(ROOT, "benchmarks", "autotune_launch.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))
    monkeypatch.setattr(bench, "CHAIN_LENGTH", 2)
    bench.tune_first_calls(size=1024)
    for route in bench.ROUTES:
        assert bench.per_kernel_us(route, 3, repeats=1) > 0
        assert bench.first_call_ms(route, range(7, 8), size=1024) > 0


# Philox's multiplications wrap around in uint32 by design; the interpreter's NumPy says so.
@pytest.mark.filterwarnings("ignore:overflow encountered in multiply:RuntimeWarning")
def test_real_kernels_check_on_cpu_reports_a_wrong_kernel(monkeypatch, capsys):
    import _real_cases
    import _real_cpu

    case = _real_cases.BY_NAME["dropout"]

    def other_p_reference(sizes, step, x):  # the mask of another p: not what the kernel does
        return case.reference(dict(sizes, p=0.25), step, x)

    monkeypatch.setitem(_real_cases.BY_NAME, "dropout",
                        dataclasses.replace(case, reference=other_p_reference))
    [failure] = _real_cpu.interpreted(["dropout"], torch_side=False)
    assert failure.startswith("dropout (package): wrong result, max error ")
    [line] = capsys.readouterr().out.splitlines()
    assert line.startswith("check dropout (package, Triton's interpreter): max error ")
    assert line.endswith(": FAILED")


@pytest.mark.parametrize("outputs,expected", [
    ([np.ones(3)], (0.0, True)),
    ([np.array([1.0, 1.5, 1.0])], (0.5, False)),
    ([np.array([1.0, np.nan, 1.0])], (float("inf"), False)),
    ([np.ones(4)], (float("inf"), False)),
    ([np.ones(3), np.ones(3)], (0.0, False)),
])
def test_real_kernels_max_error_fails_a_difference_a_nan_a_shape_and_a_count(outputs, expected):
    import _real_measure

    assert _real_measure.max_error(outputs, [np.ones(3)], (1e-3, 1e-3)) == expected


def _fake_result(name, command_buffers, package_us=60.0, torch_us=50.0):
    if name == "add":
        scale = 1.0 if command_buffers else 3.0
        return {"kernel": name, "route": "xla", "routes": [["add_kernel", "xla", "it fits"]],
                "correct": True, "package_us": 1.5 * scale, "xla_us": 1.4 * scale,
                "package_queued_us": 1.2 * scale, "xla_queued_us": 1.25 * scale,
                "package_gpu_us": 1.0 * scale, "xla_gpu_us": 0.8 * scale,
                "compiled_correct": True, "compiled_gpu_us": 0.84 * scale}
    return {"kernel": name, "title": name, "route": "jaxlib",
            "routes": [[f"{name}_kernel", "jaxlib", "runtime scalars"]],
            "package": {"max_error": 1e-3, "correct": True, "us": package_us, "gpu_us": 48.0,
                        "queued_us": 49.0},
            "torch": {"max_error": 2e-3, "correct": True, "us": torch_us, "alone_us": 45.0,
                      "queued_us": 49.5, "wall_us": torch_us}}


def test_real_kernels_report_flags_slow_and_wrong_kernels_and_writes_json(monkeypatch, capsys,
                                                                          tmp_path):
    import argparse

    import real_kernels

    def fake_measured(names, args, command_buffers, worker_flags=()):
        found = {name: _fake_result(name, command_buffers) for name in names}
        found["matmul"]["package"]["us"] = 52.0  # 1.04: within the goal
        found["matmul"]["torch"]["us"] = 49.0  # events: what the GPU ratio divides by
        found["softmax"]["package"].pop("gpu_us")  # no profiler: wall clock only
        found["layernorm_bwd"]["package"]["gpu_us"] = 53.0  # 1.06 on the GPU's timeline too
        found["layernorm_bwd"]["package"]["queued_us"] = 54.0  # and queued
        if not command_buffers:
            found["softmax"]["package"]["us"] = 40.0  # slow with command buffers on only
        found["dropout"]["torch"] = {"max_error": 0.5, "correct": False}
        found["attention"] = {"kernel": "attention", "failed": "the worker exited (-11) on it"}
        found["layernorm"]["torch"] = {"unavailable": "PyTorch sees no GPU"}
        found["matmul_tma"] = {"kernel": "matmul_tma", "skipped": "needs sm_90+"}
        found["matmul"]["package"]["gpu_us"] = 48.0
        if not command_buffers:  # the add with n compiled in gave a wrong result
            found["add"].update(compiled_correct=False, compiled_gpu_us=None)
        return found

    monkeypatch.setattr(real_kernels, "measured", fake_measured)
    path = tmp_path / "table.json"
    args = argparse.Namespace(length=50, repeats=3, add_length=200, keep="all", json=str(path))
    assert real_kernels.report(real_kernels.NAMES, args) == 1
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0] in real_kernels.NAMES}
    # pkg, PyTorch (wall), ratio, GPU, events, GPU ratio; on, then off; alone, flag
    assert rows["softmax"][4:] == ["60.000", "50.000", "1.200", "-", "50.000", "-", "40.000",
                                   "50.000", "0.800", "-", "50.000", "-", "45.000", ">1.05",
                                   "on"]
    assert rows["matmul"][4:] == ["52.000", "50.000", "1.040", "48.000", "49.000", "0.980",
                                  "52.000", "50.000", "1.040", "48.000", "49.000", "0.980",
                                  "45.000"]  # no flag
    assert " ".join(rows["layernorm_bwd"][-6:]) == (
        ">1.05 on+off+GPU on+GPU off+queued on+queued off")
    queued = {line.split()[0]: line.split() for line in out.splitlines()
              if line.split() and line.split()[0].endswith("-queued")}
    assert queued["matmul-queued"][2:] == ["49.000", "49.500", "0.990", "49.000", "49.500",
                                           "0.990"]
    assert queued["layernorm_bwd-queued"][4] == "1.091"
    assert queued["layernorm-queued"][2:] == ["49.000", "-", "-", "49.000", "-", "-"]
    assert queued["add-queued"][2:] == ["1.200", "1.250", "0.960", "3.600", "3.750", "0.960"]
    assert rows["dropout"][-1] == "WRONG" and rows["dropout"][5] == "wrong"
    assert rows["attention"][4:8] == ["failed", "failed", "-", "failed"]
    assert rows["add"][2:] == ["1.500", "1.400", "1.071", "4.500", "4.200", "1.071", "met"]
    adds = {line.split()[0]: line.split() for line in out.splitlines()
            if line.split() and line.split()[0].startswith("add-")}
    assert adds["add-GPU"][2:] == ["1.000", "0.800", "1.250", "3.000", "2.400", "1.250"]
    assert adds["add-n-compiled-in"][2:] == ["0.840", "0.800", "1.050", "wrong", "2.400", "-"]
    assert rows["layernorm"][4:] == ["60.000", "-", "-", "48.000", "-", "-", "60.000", "-", "-",
                                     "48.000", "-", "-", "-"]
    assert rows["matmul_tma"][4:] == ["-"] * 13 + ["skipped"]
    assert "above 1.05x PyTorch: softmax, layernorm_bwd" in out
    assert ("not measured: layernorm's PyTorch side (command buffers on), layernorm's PyTorch "
            "side (command buffers off): PyTorch sees no GPU") in out
    assert ("not measured: matmul_tma (command buffers on), matmul_tma (command buffers off): "
            "needs sm_90+") in out
    # attention's worker and dropout's PyTorch, on and off; the add with n compiled in, off
    assert out.count("FAILED: ") == 5
    assert "FAILED: add (n compiled in, command buffers off): wrong result" in out
    assert "FAILED: attention (worker, command buffers on): the worker exited (-11) on it" in out
    assert "FAILED: dropout (torch, command buffers off): wrong result (max error 0.5)" in out
    table = json.loads(path.read_text())
    assert [row["kernel"] for row in table["kernels"]] == real_kernels.NAMES[:-1]
    assert table["kernels"][0]["ratio_on"] == pytest.approx(1.2)
    by_name = {row["kernel"]: row for row in table["kernels"]}
    assert by_name["matmul"]["gpu_ratio_on"] == pytest.approx(48 / 49)
    assert by_name["matmul"]["ratio_on"] == pytest.approx(52 / 50)  # by wall clock
    assert by_name["layernorm_bwd"]["gpu_on"] == 53.0
    assert by_name["softmax"]["queued_ratio_off"] == pytest.approx(49 / 49.5)
    assert table["add"]["goal"] == "met" and table["versions"]["triton"]
    assert table["results"]["off"]["softmax"]["package"]["us"] == 40.0


def _perfetto(path, events):
    import gzip

    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7,
             "args": {"name": "Stream #14(Compute)"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 8, "args": {"name": "XLA Ops"}}]
    with gzip.open(path, "wt") as file:
        json.dump({"traceEvents": meta + events}, file)


def test_real_kernels_gpu_spans_split_executions_and_ignore_host_and_op_lines(tmp_path):
    import _real_measure

    def kernel(ts, dur, pid=1, tid=7):
        return {"ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, "name": "k"}

    path = tmp_path / "perfetto_trace.json.gz"
    # Two executions (the second with an idle gap of 30 µs inside), an op line spanning far
    # beyond them, and a host event between them that would join them.
    _perfetto(path, [kernel(0, 10), kernel(10, 10), kernel(5000, 10), kernel(5040, 20),
                     kernel(0, 9000, tid=8), kernel(20, 5000, pid=2)])
    assert _real_measure.gpu_spans_us(str(path), split_gap_us=1000.0) == [20, 60]
    assert _real_measure.gpu_spans_us(str(path), split_gap_us=25.0) == [20, 10, 20]
    _perfetto(path, [kernel(20, 5000, pid=2)])
    assert _real_measure.gpu_spans_us(str(path), split_gap_us=1000.0) == []


def test_real_kernels_gpu_timeline_is_none_without_gpu_kernels():
    import _real_measure

    chain = jax.jit(lambda x: x * 2 + 1)
    assert _real_measure.gpu_timeline_us(chain, (jnp.ones(8),), length=1, executions=2) is None


def test_real_kernels_go_on_in_a_fresh_worker_after_one_dies(monkeypatch, capsys):
    import argparse

    import real_kernels

    starts = []

    def fake_stream_fresh(script, args, command_buffers, on_line, idle_timeout_s=None):
        names = args[args.index("--kernels") + 1].split(",")
        starts.append(names)
        on_line("real_kernels: softmax: start")
        for name in names:
            if name == "dropout" and len(starts) == 1:
                on_line("Fatal Python error: Segmentation fault")
                return -11
            on_line(json.dumps(_fake_result(name, command_buffers)) + "E0101 interleaved log")
        return 0

    monkeypatch.setattr(real_kernels, "stream_fresh", fake_stream_fresh)
    args = argparse.Namespace(length=50, repeats=3, add_length=200, keep="all")
    found = real_kernels.measured(["softmax", "dropout", "matmul", "add"], args, True)
    assert starts == [["softmax", "dropout", "matmul", "add"], ["matmul", "add"]]
    assert found["dropout"] == {"kernel": "dropout", "failed": "the worker exited (-11) on it: "
                                "Fatal Python error: Segmentation fault"}
    assert found["softmax"]["package"]["us"] == 60.0 and found["add"]["package_us"] == 1.5
    assert capsys.readouterr().out.count("[command buffers on] softmax: start") == 2


def test_real_kernels_add_chain_runs_each_side_once_on_the_cpu():
    """The add chain's measurement, on the CPU too: both adds checked and timed; on the GPU's
    timeline where there is a GPU (off it the profiler records no kernels: no figure)."""
    import _real_measure

    on_gpu = jax.default_backend() != "cpu"
    found = _real_measure.measure_add(2)
    assert found["correct"] and found["compiled_correct"]
    assert (found["route"] == "interpreter") != on_gpu
    assert all(isinstance(found[key], float) and found[key] > 0 for key in (
        "package_us", "xla_us", "package_queued_us", "xla_queued_us"))
    timeline = [found[f"{side}_gpu_us"] for side in ("package", "xla", "compiled")]
    assert all(isinstance(t, float) for t in timeline) if on_gpu else timeline == [None] * 3


def test_real_kernels_route_log_reads_the_packages_route_records():
    import jax
    import jax.numpy as jnp

    import _real_measure
    from _common import triton_add

    x = jnp.ones(1024, jnp.float32)
    with _real_measure.RouteLog() as log:
        jax.jit(lambda x: triton_add(x, x, xla_native=None)).lower(x)
    assert log.summary() == "interpreter"
    assert log.routes() == [["add_kernel", "interpreter", "lowered for the CPU"]]
    log.seen = {("layer_norm_bwd_dx_kernel", "jaxlib"): "zeroed outputs",
                ("layer_norm_bwd_dwdb_kernel", "xla"): "it fits"}
    assert log.summary() == "dwdb: xla, dx: jaxlib"


def test_memory_report_says_what_it_needs_in_one_line(monkeypatch, capsys):
    import importlib.util

    import memory

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "triton" else find_spec(name, *a))
    monkeypatch.setattr(memory.subprocess, "run", lambda *a, **k: pytest.fail("a process ran"))
    assert memory.main([]) == 2
    assert capsys.readouterr().out == "needs triton (pip install jax '.[test]')\n"


def test_real_kernels_bitwise_difference_tells_equal_unequal_and_nondeterministic():
    import _real_measure

    same = np.arange(4, dtype=np.float32)
    other = same.copy()
    other.view(np.uint8)[5] ^= 1
    found = _real_measure.bitwise_difference
    assert found([same], [[same], [same]]) == {"verdict": "equal", "differing": 0,
                                               "unstable": 0, "bytes": 16}
    assert found([other], [[same], [same]])["differing"] == 1
    assert found([other], [[same], [same]])["verdict"] == "unequal"
    assert found([same], [[same], [other]])["verdict"] == "nondeterministic"
    assert found([same, same], [[same], [same]])["verdict"] == "unequal"


def _bitwise(default="equal", jaxlib="equal", xla="equal", route="xla"):
    def one(verdict, route):
        return {"route": route, "verdict": verdict, "differing": 3 if verdict == "unequal"
                else 0, "unstable": 0, "bytes": 4096}

    return {"default": one(default, route), "jaxlib": one(jaxlib, "jaxlib"),
            "xla": one(xla, "xla")}


def test_real_kernels_report_shows_bitwise_verdicts_and_fails_a_default_route_that_differs(
        monkeypatch, capsys):
    import argparse

    import real_kernels

    flags_seen = []

    def fake_measured(names, args, command_buffers, worker_flags=()):
        flags_seen.append((command_buffers, worker_flags))
        found = {name: _fake_result(name, command_buffers) for name in names}
        if command_buffers:
            found["softmax"]["bitwise"] = _bitwise(xla="unequal", route="jaxlib")
            found["dropout"]["bitwise"] = _bitwise(default="unequal", xla="unequal")
            found["layernorm_bwd"]["bitwise"] = _bitwise(
                default="nondeterministic", jaxlib="nondeterministic", xla="nondeterministic")
            found["attention"]["bitwise"] = {"failed": "RuntimeError: no"}
            found["matmul"]["bitwise"] = {"unavailable": "PyTorch sees no GPU"}
        return found

    monkeypatch.setattr(real_kernels, "measured", fake_measured)
    args = argparse.Namespace(length=50, repeats=3, add_length=200, keep="all", json=None)
    assert real_kernels.report(real_kernels.NAMES, args) == 1
    assert flags_seen == [(True, ("--bitwise",)), (False, ())]
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()
            if line.split() and line.split()[0].endswith("-bitwise")}
    assert rows["softmax-bitwise"] == ["jaxlib", "equal", "equal", "DIFFERS", "3/4096", "B"]
    assert rows["dropout-bitwise"] == ["xla", "DIFFERS", "3/4096", "B", "equal", "DIFFERS",
                                       "3/4096", "B"]
    assert rows["layernorm_bwd-bitwise"] == ["xla", "nondet.", "nondet.", "nondet."]
    assert rows["attention-bitwise"] == ["-", "failed", "failed", "failed"]
    assert rows["layernorm-bitwise"] == ["-", "-", "-", "-"]
    failed = [line for line in out.splitlines() if line.startswith("FAILED: ")]
    assert failed == [
        "FAILED: dropout (bitwise, the default route: xla): the outputs differ from PyTorch's "
        "launch of the same kernel on the same inputs (3 of 4096 bytes)",
        "FAILED: attention (bitwise, command buffers on): RuntimeError: no"]
    assert ("not measured: matmul's bitwise check (command buffers on): PyTorch sees no GPU"
            in out)


def test_real_kernels_bitwise_only_times_nothing_and_fails_a_default_route_that_differs(
        monkeypatch, capsys):
    import argparse

    import real_kernels

    def fake_measured(names, args, command_buffers, worker_flags=()):
        assert command_buffers and worker_flags == ("--bitwise", "--no-timing")
        assert "add" not in names
        return {name: {"kernel": name, "bitwise": _bitwise(
            default="unequal" if name == "matmul" else "equal")} for name in names}

    monkeypatch.setattr(real_kernels, "measured", fake_measured)
    args = argparse.Namespace(length=50, repeats=3, add_length=200, keep="all", json=None)
    assert real_kernels.report_bitwise(real_kernels.NAMES, args) == 1
    out = capsys.readouterr().out
    assert out.count("-bitwise ") == len(real_kernels.CASES)
    [failed] = [line for line in out.splitlines() if line.startswith("FAILED: ")]
    assert failed.startswith("FAILED: matmul (bitwise, the default route: xla): ")
