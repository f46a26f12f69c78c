"""benchmarks/time_breakdown.py: one execution's wall time split on the profiler's clock into
dispatch, host time before the first kernel, GPU time and the final wait."""

import os
import sys

import pytest

from tests.support.subprocess_utils import ROOT

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))  # for the script's own functions
import time_breakdown as tb  # noqa: E402  (from the scripts' folder)


def _trace():
    """Two marked executions; the GPU runs kernels from 30 to 80 and from 230 to 300."""
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/host:CPU"}},
            {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "name": "thread_name", "pid": 2, "tid": 7, "args": {"name": "Stream #7"}}]

    def span(name, pid, ts, dur, tid=1):
        return {"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}

    return meta + [
        span(f"{tb.ANNOTATION}_call_0", 1, 0, 20), span(f"{tb.ANNOTATION}_wait_0", 1, 20, 70),
        span("Execute", 1, 5, 10), span("cuLaunchKernel", 1, 25, 10),
        span("k", 2, 30, 20, tid=7), span("k", 2, 60, 20, tid=7),
        span(f"{tb.ANNOTATION}_call_1", 1, 200, 10), span(f"{tb.ANNOTATION}_wait_1", 1, 210, 95),
        span("Execute", 1, 202, 6), span("k", 2, 230, 70, tid=7),
    ]


def test_each_execution_is_split_at_its_first_and_last_kernel():
    first, second = tb.split_executions(_trace(), 2)
    assert first["dispatch"] == 20 and first["to_first_kernel"] == 30
    assert first["gpu"] == 50 and first["final_wait"] == 10 and first["total"] == 90
    assert first["host"] == {"Execute": 10, "cuLaunchKernel": 5}  # cut at the first kernel
    assert second["to_first_kernel"] == 30 and second["gpu"] == 70
    assert second["final_wait"] == 5


def test_the_median_split_keeps_the_largest_host_events():
    split = tb.median_split(tb.split_executions(_trace(), 2))
    assert split["to_first_kernel"] == 30 and split["gpu"] == 60
    assert list(split["host"]) == ["Execute", "cuLaunchKernel"]
    assert list(tb.median_split(tb.split_executions(_trace(), 2), top=1)["host"]) == ["Execute"]


def test_own_time_leaves_out_the_events_nested_on_the_same_thread():
    def span(name, ts, dur, tid=1):
        return {"ph": "X", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur}

    events = [span("call", 0, 100), span("execute", 10, 60), span("thunk", 20, 15),
              span("thunk", 40, 10), span("other thread", 5, 30, tid=2),
              span("late", 100, 30)]
    own = tb.self_times(events, before=110)
    assert own == {"call": 40, "execute": 35, "thunk": 25, "other thread": 30, "late": 10}
    first, _ = tb.split_executions(_trace(), 2)
    assert first["host_self"] == {"Execute": 10, "cuLaunchKernel": 5}


def test_the_report_lists_both_chains_host_events_by_span_and_by_own_time(capsys):
    side = {"wall": 1.0, "dispatch": 1.0, "to_first_kernel": None, "gpu": None,
            "final_wait": None, "host_share": None}
    result = {"kernel": "softmax", "length": 2, "rounds": 1, "share_ratios": [],
              "package": {**side, "host": {"Execute": 9.0}, "host_self": {"thunk": 4.0}},
              "xla": {**side, "host": {"Execute": 3.0}, "host_self": {"kernel": 1.0}}}
    tb.print_report([result])
    spans, own = capsys.readouterr().out.split("host events before the first kernel")[1:]
    assert "softmax, package: Execute 9.0" in spans and "softmax, xla: Execute 3.0" in spans
    assert "softmax, package: thunk 4.0" in own and "softmax, xla: kernel 1.0" in own


def test_an_execution_without_kernels_has_no_gpu_figures():
    events = [e for e in _trace() if e.get("pid") != 2 or e.get("ph") == "M"]
    first, _ = tb.split_executions(events, 2)
    assert first["gpu"] is None and first["to_first_kernel"] is None
    assert first["total"] == 90


def test_the_host_share_is_each_executions_total_less_its_gpu_span():
    first, second = tb.split_executions(_trace(), 2)
    assert tb.host_share(first) == 40 and tb.host_share(second) == 35
    assert tb.median_split([first, second])["host_share"] == 37.5
    events = [e for e in _trace() if e.get("pid") != 2 or e.get("ph") == "M"]
    assert tb.median_split(tb.split_executions(events, 2))["host_share"] is None


def test_the_share_ratio_cell_gives_the_rounds_median_and_range():
    assert tb._ratio_cell([]) == "-"
    assert tb._ratio_cell([1.234]) == "1.23"
    assert tb._ratio_cell([1.3, 0.9, 1.1]) == "1.10 (0.90-1.30)"


def test_the_goal_is_met_by_wall_or_else_by_the_host_share():
    def result(wall, torch_wall, ratios):
        return {"package": {"wall": wall}, "share_ratios": ratios,
                **({"pytorch": {"wall": torch_wall}} if torch_wall else {})}

    assert tb.goal_verdict(result(105.0, 100.0, [2.0])) == (
        "met by wall (wall / PyTorch 1.050, share / XLA's 2.000)")
    assert tb.goal_verdict(result(120.0, 100.0, [1.2, 0.9, 1.0])) == (
        "met by share (wall / PyTorch 1.200, share / XLA's 1.000)")
    assert tb.goal_verdict(result(120.0, 100.0, [1.06])) == (
        "not met (wall / PyTorch 1.200, share / XLA's 1.060)")
    assert tb.goal_verdict(result(120.0, None, [])) == (
        "unknown (no PyTorch wall and no share ratio)")
    assert tb.goal_verdict(result(120.0, None, [1.1])) == "not met (share / XLA's 1.100)"


def test_each_command_buffer_setting_replaces_the_flag_and_keeps_the_others(monkeypatch):
    import _common

    assert set(tb.COMMAND_BUFFER_CHOICES) == set(_common.COMMAND_BUFFER_SETTINGS)
    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/d --xla_gpu_enable_command_buffer=FUSION")
    flags = {setting: _common.fresh_environment(setting)["XLA_FLAGS"].split()
             for setting in (*tb.COMMAND_BUFFER_CHOICES, True, False)}
    assert flags["on"] == flags[True] == ["--xla_dump_to=/d"]
    assert flags["off"] == flags[False] == ["--xla_dump_to=/d", "--xla_gpu_enable_command_buffer="]
    assert flags["no-custom-calls"] == ["--xla_dump_to=/d",
                                        "--xla_gpu_enable_command_buffer=-CUSTOM_CALL"]


def test_an_unknown_command_buffer_setting_is_named():
    import _common

    with pytest.raises(ValueError, match="command_buffers='custom'.*'no-custom-calls'"):
        _common.fresh_environment("custom")


class _Result:
    """A stand-in result: `jax.block_until_ready` passes over an object it cannot wait on."""


@pytest.mark.parametrize("hold", [True, False])
@pytest.mark.parametrize("runner", ["wall", "profile"])
def test_a_held_result_lives_through_the_next_call_and_a_dropped_one_does_not(runner, hold):
    """XLA updates a command buffer when an execution's buffers moved: `--results held` keeps
    each result alive through the next call (as `y = f(x)` in a loop does), `dropped` frees it
    first, in the wall figure and in the profiled executions alike."""
    import weakref

    live, seen = weakref.WeakSet(), []

    def fn():
        seen.append(len(live))  # results of earlier calls still alive at this call
        result = _Result()
        live.add(result)
        return result

    if runner == "wall":
        tb.wall_us(fn, (), 3, hold=hold)
    else:
        tb.profile_chain(fn, (), 2, hold=hold)
    assert seen[0] == 0
    assert seen[1:] == [1 if hold else 0] * (len(seen) - 1)
