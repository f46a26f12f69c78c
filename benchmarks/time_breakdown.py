"""Where the wall time of one jitted chain goes: the package's calls against the same chain of
XLA's own kernels, and PyTorch's launches by wall clock.

`python benchmarks/time_breakdown.py` (on a GPU machine) takes each kernel of `real_kernels.py`
(`_real_cases.py`) as a jitted chain of 50 calls, each on the previous call's output, and the
same chain of XLA's own kernels computing the same outputs (the case's jax.numpy reference,
`_real_references.py`). Each chain runs a few times under JAX's profiler, one execution at a
time, each marked with trace annotations, and each execution's wall time is split, on the
trace's one clock, into:

- dispatch: from the Python call until it returns the (not yet ready) result: JAX's dispatch
  and the work XLA does before handing the execution to its stream;
- to the first kernel: from the call until the first kernel starts on the GPU (dispatch
  included): everything the host does before the GPU can start;
- GPU: from the first kernel's start to the last kernel's end, idle gaps between kernels
  included (what CUDA events around the same launches measure);
- final wait: from the last kernel's end until `block_until_ready` returns.

and the host events that lie before the first kernel, by total span and by own time (each
event's span less the events nested in it on its thread), for both chains (the trace's own
names: JAX's dispatch, XLA's executable and thunks, the CUDA driver's calls; `--host-events N`
lists N of each, 6 by default). The package's share of an
execution is its own host time: from the call to its first kernel and from its last kernel to
the wait's return (its total less its GPU span, both on the one clock of one execution). The two
chains take turns, `--rounds` times, so that what the machine does meanwhile falls on both; the
report gives each side's medians over all its executions and the package's share against XLA's,
the median of the rounds' ratios with their range. Beside it, PyTorch's
side of the same kernel by wall clock: `time.perf_counter()` around its 50 launches and a
`torch.cuda.synchronize()`, as a user waits for it, and by CUDA events, and the package's wall
time against PyTorch's wall time.

`--command-buffers off` runs both chains with XLA's command buffers off (an empty
`--xla_gpu_enable_command_buffer=` in XLA_FLAGS, set before JAX starts its backend);
`--command-buffers no-custom-calls` with XLA's default list less custom calls
(`--xla_gpu_enable_command_buffer=-CUSTOM_CALL`): the package's calls are launched one by one,
XLA's own kernels still recorded.

`--results held` (the default) keeps each execution's result alive until the next call has
returned, in the wall loop and in the profiled executions alike, as `y = f(x)` in a loop does:
the next execution's outputs then land in other buffers, and XLA updates its command buffer
for them. `--results dropped` frees each result first, so that XLA may hand the same buffers
back (until 2026-12-05 the wall loop dropped and the profiled executions held).

`--check-on-cpu` needs no GPU: the chains at small sizes, the package's in Triton's
interpreter, with the same annotations and split (no GPU columns: the CPU has no kernels).
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.gpu_needed(__file__, unless=("--check-on-cpu",))

import argparse
import collections
import glob
import gzip
import json
import os
import statistics
import sys
import tempfile
import time

CHAIN_LENGTH = 50
ANNOTATION = "jtr_breakdown"  # prefix of the trace annotations around each execution
KERNELS = ("softmax", "layernorm", "layernorm_bwd", "dropout", "matmul", "attention")
TOP_EVENTS = 6
# `_common.COMMAND_BUFFER_SETTINGS`' keys, named here so that --help needs no JAX.
COMMAND_BUFFER_CHOICES = ("on", "off", "no-custom-calls")
# What happens to each execution's result before the next call (`--results`): XLA updates a
# command buffer when an execution's buffers are not those of the one before.
RESULTS = ("held", "dropped")


def load_trace(folder: str) -> list[dict]:
    """The events of the Perfetto trace JAX's profiler wrote under `folder`."""
    traces = glob.glob(os.path.join(folder, "**", "perfetto_trace.json.gz"), recursive=True)
    if not traces:
        return []
    with gzip.open(traces[0]) as file:
        data = json.load(file)
    return data["traceEvents"] if isinstance(data, dict) else data


def split_executions(events: list[dict], executions: int) -> list[dict]:
    """Each marked execution's split (µs): dispatch, to_first_kernel, gpu, final_wait, total,
    and `host` (host event name -> µs, before the first kernel, our annotations left out).
    The GPU fields are None where the trace holds no kernel inside the execution."""
    processes = {e["pid"]: e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    devices = {pid for pid, name in processes.items() if "/device:GPU" in name}
    spans = [e for e in events if e.get("ph") == "X"]
    kernels = [e for e in spans if e.get("pid") in devices]
    streams = [e for e in kernels if threads.get((e["pid"], e["tid"]), "").startswith("Stream")]
    kernels = sorted(streams or kernels, key=lambda e: e["ts"])
    host = [e for e in spans if e.get("pid") not in devices
            and not str(e.get("name", "")).startswith(ANNOTATION)]
    marks = {e["name"]: e for e in spans if str(e.get("name", "")).startswith(ANNOTATION)}
    results = []
    for k in range(executions):
        call, wait = marks.get(f"{ANNOTATION}_call_{k}"), marks.get(f"{ANNOTATION}_wait_{k}")
        if call is None or wait is None:
            continue
        start, call_end = call["ts"], call["ts"] + call.get("dur", 0)
        end = wait["ts"] + wait.get("dur", 0)
        inside = [e for e in kernels if start <= e["ts"] < end]
        first = inside[0]["ts"] if inside else None
        last = max(e["ts"] + e.get("dur", 0) for e in inside) if inside else None
        before = first if first is not None else end
        early = [e for e in host if start <= e["ts"] < before]
        totals: dict[str, float] = collections.defaultdict(float)
        for e in early:
            totals[str(e.get("name"))] += min(e.get("dur", 0), before - e["ts"])
        results.append({
            "dispatch": call_end - start,
            "to_first_kernel": None if first is None else first - start,
            "gpu": None if first is None else last - first,
            "final_wait": None if last is None else end - last,
            "total": end - start,
            "host": dict(totals),
            "host_self": self_times(early, before),
        })
    return results


def self_times(events: list[dict], before: float) -> dict[str, float]:
    """Each name's own time (µs) among host `events`, each cut at `before`: its span less the
    spans of the events directly inside it on the same thread, so that nested names (JAX's
    call around XLA's execute around its thunks) are not counted again at each level."""
    own: dict[str, float] = collections.defaultdict(float)
    by_thread = collections.defaultdict(list)
    for e in events:
        by_thread[(e.get("pid"), e.get("tid"))].append(e)
    for spans in by_thread.values():
        open_spans: list[list] = []  # [end, name, own time so far], innermost last
        for e in sorted(spans, key=lambda e: (e["ts"], -e.get("dur", 0))):
            while open_spans and open_spans[-1][0] <= e["ts"]:  # those that ended before it
                _, name, time_own = open_spans.pop()
                own[name] += time_own
            end = min(e["ts"] + e.get("dur", 0), before)
            if open_spans:
                open_spans[-1][2] -= end - e["ts"]
            open_spans.append([end, str(e.get("name")), end - e["ts"]])
        for _, name, time_own in open_spans:
            own[name] += time_own
    return dict(own)


def host_share(split: dict) -> float | None:
    """An execution's host time outside its GPU span: its total less its GPU figure (None
    without kernels)."""
    return None if split["gpu"] is None else split["total"] - split["gpu"]


def median_split(splits: list[dict], top: int = TOP_EVENTS) -> dict:
    """The median of each field over the executions (None where any is None), the host share's
    (`host_share`), and the `top` host events' median µs, largest first, by span (`host`) and
    by own time (`host_self`, `self_times`)."""
    out = {}
    for field in ("dispatch", "to_first_kernel", "gpu", "final_wait", "total"):
        values = [s[field] for s in splits]
        out[field] = None if not values or None in values else statistics.median(values)
    shares = [host_share(s) for s in splits]
    out["host_share"] = None if not shares or None in shares else statistics.median(shares)
    for key in ("host", "host_self"):
        names = {name for s in splits for name in s[key]}
        medians = {name: statistics.median([s[key].get(name, 0.0) for s in splits])
                   for name in names}
        out[key] = dict(sorted(medians.items(), key=lambda item: -item[1])[:top])
    return out


def profile_chain(fn, args, executions: int, *, hold: bool) -> list[dict]:
    """`fn(*args)` run `executions` times under JAX's profiler, each marked; each one's split.
    With `hold` each result lives until the next call has returned (as `y = f(x)` in a loop
    keeps it), else it is freed before the next call (`RESULTS`)."""
    import jax

    out = fn(*args)
    jax.block_until_ready(out)
    if not hold:
        del out
    options = {}
    if hasattr(jax.profiler, "ProfileOptions"):
        # Python's own calls are not traced: tracing them would slow the dispatch it measures.
        options["profiler_options"] = jax.profiler.ProfileOptions()
        options["profiler_options"].python_tracer_level = 0
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True, **options):
            for k in range(executions):
                with jax.profiler.TraceAnnotation(f"{ANNOTATION}_call_{k}"):
                    out = fn(*args)
                with jax.profiler.TraceAnnotation(f"{ANNOTATION}_wait_{k}"):
                    jax.block_until_ready(out)
                if not hold:
                    del out
                time.sleep(0.005)
        splits = split_executions(load_trace(folder), executions)
    if len(splits) != executions:
        raise RuntimeError(f"the trace holds {len(splits)} of the {executions} marked "
                           f"executions")
    return splits


def wall_us(fn, args, repeats: int, *, hold: bool) -> float:
    """Median µs of one execution, from the call to `block_until_ready`, one at a time; with
    `hold` each result lives until the next call has returned, else it is freed before it."""
    import jax

    out = fn(*args)
    jax.block_until_ready(out)
    times = []
    for _ in range(repeats):
        if not hold:
            del out
        start = time.perf_counter()
        out = fn(*args)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def torch_side(case, sizes: dict, length: int, repeats: int) -> dict:
    """PyTorch's `length` launches of the case's kernel: median µs by wall clock (the launches
    and a synchronize) and by CUDA events; {} without PyTorch and a GPU."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    import jax
    import numpy as np

    state, consts = case.inputs(sizes, jax.random.PRNGKey(0))
    tensors = [torch.tensor(np.asarray(a), device="cuda") for a in (*state, *consts)]
    n_state = len(state)

    def run():
        current = tensors[:n_state]
        for step in range(length):
            current = list(case.torch(sizes, step, *current, *tensors[n_state:])[:n_state])

    run()
    torch.cuda.synchronize()
    walls, events = [], []
    for _ in range(repeats):
        begin, finish = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start = time.perf_counter()
        begin.record()
        run()
        finish.record()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - start) * 1e6)
        events.append(begin.elapsed_time(finish) * 1e3)
    return {"wall": statistics.median(walls), "events": statistics.median(events)}


def measure(name: str, where: str, executions: int, repeats: int, rounds: int, *,
            hold: bool, top: int = TOP_EVENTS) -> dict:
    import jax

    import _real_cases
    from _real_measure import chain_of

    case = _real_cases.BY_NAME[name]
    sizes = case.full if where == "gpu" else case.small
    length = CHAIN_LENGTH if where == "gpu" else 2
    state, consts = case.inputs(sizes, jax.random.PRNGKey(0))
    args = (tuple(state), tuple(consts))
    result = {"kernel": name, "length": length, "rounds": rounds}
    sides = {"package": case.package, "xla": case.reference}
    fns = {side: jax.jit(chain_of(call, sizes, length)) for side, call in sides.items()}
    walls: dict = {side: [] for side in sides}
    splits: dict = {side: [] for side in sides}
    ratios = []
    for _ in range(rounds):  # the sides take turns
        shares = {}
        for side, fn in fns.items():
            walls[side].append(wall_us(fn, args, repeats, hold=hold))
            found = profile_chain(fn, args, executions, hold=hold)
            splits[side] += found
            shares[side] = median_split(found)["host_share"]
        if shares["package"] is not None and shares["xla"]:
            ratios.append(shares["package"] / shares["xla"])
    for side in sides:
        result[side] = {"wall": statistics.median(walls[side]),
                        **median_split(splits[side], top)}
    result["share_ratios"] = ratios
    if where == "gpu":
        result["pytorch"] = torch_side(case, sizes, length, repeats)
    return result


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio_cell(ratios: list[float]) -> str:
    """The median of the rounds' ratios, with their range where there are several."""
    if not ratios:
        return "-"
    middle = f"{statistics.median(ratios):.2f}"
    return middle if len(ratios) == 1 else f"{middle} ({min(ratios):.2f}-{max(ratios):.2f})"


def _wall_ratio(result: dict) -> float | None:
    """The package's wall time against PyTorch's, both by wall clock; None without PyTorch's."""
    torch_wall = result.get("pytorch", {}).get("wall")
    return result["package"]["wall"] / torch_wall if torch_wall else None


GOAL = 1.05  # issue 46: wall within 1.05 of PyTorch's, or the host share within 1.05 of XLA's


def goal_verdict(result: dict) -> str:
    """Whether one kernel meets the goal: its wall time within GOAL of PyTorch's (both by wall
    clock), or, where that fails, its host share within GOAL of XLA's own chain's (the median
    of the rounds' ratios); what each figure was, and "unknown" where neither could be taken."""
    wall = _wall_ratio(result)
    ratios = result.get("share_ratios", [])
    share = statistics.median(ratios) if ratios else None
    figures = ", ".join(f"{name} {value:.3f}" for name, value in
                        (("wall / PyTorch", wall), ("share / XLA's", share)) if value is not None)
    if wall is not None and wall <= GOAL:
        return f"met by wall ({figures})"
    if share is not None and share <= GOAL:
        return f"met by share ({figures})"
    if wall is None and share is None:
        return "unknown (no PyTorch wall and no share ratio)"
    return f"not met ({figures})"


def print_report(results: list[dict]) -> None:
    length = results[0]["length"] if results else CHAIN_LENGTH
    rounds = results[0].get("rounds", 1) if results else 1
    print(f"µs per execution of a jitted chain of {length} calls (median), split on the "
          f"profiler's clock; host share: each execution's total less its GPU span; the two "
          f"chains in turn, {rounds} round(s); PyTorch: the same {length} launches:")
    header = ("kernel", "side", "wall", "dispatch", "to 1st kernel", "GPU", "final wait",
              "host share", "share / XLA's", "PyTorch wall", "PyTorch events",
              "wall / PyTorch wall")
    rows = [header]
    for r in results:
        torch_wall = r.get("pytorch", {}).get("wall")
        torch_events = r.get("pytorch", {}).get("events")
        for side in ("package", "xla"):
            s = r[side]
            package = side == "package"
            rows.append((r["kernel"], side, _fmt(s["wall"]), _fmt(s["dispatch"]),
                         _fmt(s["to_first_kernel"]), _fmt(s["gpu"]), _fmt(s["final_wait"]),
                         _fmt(s.get("host_share")),
                         _ratio_cell(r.get("share_ratios", [])) if package else "",
                         _fmt(torch_wall) if package else "",
                         _fmt(torch_events) if package else "",
                         f"{_wall_ratio(r):.3f}" if package and torch_wall else ""))
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(header))]
    for row in rows:
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths)).rstrip())
    for key, what in (("host", "span"), ("host_self", "own time, nested events left out")):
        print(f"\nhost events before the first kernel (µs, median; {what}):")
        for r in results:
            for side in ("package", "xla"):
                events = ", ".join(f"{name} {us:.1f}" for name, us in r[side][key].items())
                print(f"  {r['kernel']}, {side}: {events or '-'}")
    print(f"\ngoal (wall within {GOAL} of PyTorch's, or else the host share within {GOAL} of "
          f"XLA's own chain's):")
    for r in results:
        print(f"  {r['kernel']}: {goal_verdict(r)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernels", default=",".join(KERNELS),
                        help=f"comma-separated, of {', '.join(KERNELS)}")
    parser.add_argument("--executions", type=int, default=5,
                        help="profiled executions per chain (default 5)")
    parser.add_argument("--repeats", type=int, default=20,
                        help="timed executions per wall-clock figure (default 20)")
    parser.add_argument("--rounds", type=int, default=3,
                        help="turns the two chains take, each a wall figure and profiled "
                             "executions (default 3)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--command-buffers", choices=COMMAND_BUFFER_CHOICES, default="on",
                        help="XLA's command buffers for both chains (default on; off sets "
                             "--xla_gpu_enable_command_buffer= in XLA_FLAGS, no-custom-calls "
                             "--xla_gpu_enable_command_buffer=-CUSTOM_CALL)")
    parser.add_argument("--results", choices=RESULTS, default="held",
                        help="held (default): each execution's result lives until the next "
                             "call returns, as in a loop `y = f(x)`, so its buffers move "
                             "between executions; dropped: freed before the next call, so XLA "
                             "may hand the same buffers back")
    parser.add_argument("--host-events", type=int, default=TOP_EVENTS, metavar="N",
                        help=f"host events listed for each chain, by span and by own time "
                             f"(default {TOP_EVENTS})")
    parser.add_argument("--check-on-cpu", action="store_true",
                        help="small sizes, the package's chain in Triton's interpreter")
    args = parser.parse_args(argv)
    import _needs
    from _common import fresh_environment

    # JAX is imported below this point only: XLA reads its flags when the backend starts.
    os.environ["XLA_FLAGS"] = fresh_environment(args.command_buffers)["XLA_FLAGS"]

    kernels = _needs.chosen_kernels(parser, args.kernels, KERNELS)
    where = "cpu" if args.check_on_cpu else "gpu"
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give 1 or more")
    if args.host_events < 1:
        parser.error(f"--host-events {args.host_events}: give 1 or more")
    hold = args.results == "held"
    results = [measure(name, where, args.executions, args.repeats, args.rounds, hold=hold,
                       top=args.host_events) for name in kernels]
    from jax_triton_rocm.base import _compat, _env
    plain_target = _compat.plain_call_name(_env.lowering_settings(()), exporting=False)
    print(f"command buffers {args.command_buffers}; results {args.results}; the package's plain "
          f"calls: {plain_target}; XLA_FLAGS {os.environ['XLA_FLAGS'] or '(empty)'}")
    print_report(results)
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"where": where, "command_buffers": args.command_buffers,
                       "held_results": hold,
                       "xla_flags": os.environ["XLA_FLAGS"], "plain_call_target": plain_target,
                       "results": results}, out, indent=1)
        print(f"written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    if "--check-on-cpu" in sys.argv:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
    sys.exit(main())
