"""Real Triton kernels through the package against the same kernels launched by Triton's own
launcher from PyTorch.

`python benchmarks/real_kernels.py` (on a GPU machine) prints, from one run, for each kernel of
`_real_kernels.py` (softmax with its output first, layer-norm forward and backward, seeded
dropout, an fp16 matmul, a causal flash-attention forward, and a matmul through host-side TMA
descriptors on sm_90+), µs per call in a jitted chain of 50 calls, each on the previous call's
output, with XLA's command buffers on and off (each setting in a fresh process, as XLA reads its
flags once):

- the package's default route: `jax_triton_rocm.triton_call` as a user writes it (the kernel's
  own parameter order, runtime scalars as Python scalars), and the route its calls took (from
  the package's route log): the wall clock of the jitted call, and the same chain's GPU
  timeline (its first kernel's start to its last kernel's end, from JAX's profiler; "-" where
  the profiler records no kernels, or a run's kernels cannot be told from the next run's). The difference is the host time JAX spends on each
  execution before its GPU work starts, which XLA's own kernels pay the same;
- PyTorch: the same kernel with the same constexprs, num_warps and num_stages, 50 launches by
  Triton's launcher (`kernel[grid](tensors...)`), timed by wall clock (`time.perf_counter()`
  around the launches and a `torch.cuda.synchronize()`, as the package's side is: the ratio,
  the goal's figure) and by CUDA events beside it; and "alone", those 50
  launches captured in a CUDA graph and replayed: the kernels' own time, the floor;
- the package's chain again, 10 executions queued back to back and only the last waited for
  ("queued"): JAX's asynchronous dispatch prepares each execution while the GPU runs the one
  before, as a training loop runs it and as PyTorch's launches run ahead of its kernels, so
  what is left of JAX's host time is what the GPU work does not hide; PyTorch's side the same,
  10 chains between its CUDA events;
- the ratios package / PyTorch, by wall clock, by GPU timeline and queued, each flagged above
  1.05;

- bitwise (command buffers on): each kernel's outputs on the default route, on jaxlib's and on
  XLA's (each forced by JAX_TRITON_ROCM_XLA_NATIVE) against the same kernel launched twice by
  Triton's launcher from PyTorch on the same inputs, byte for byte ("nondet." where PyTorch's two
  launches differ); outputs of the default route that differ are a failure;

and the chain of 200 small adds (runtime `n`) on the default route against XLA's own add kept
unfused (goal: at most 1.10), one execution at a time and queued. Every kernel's result is checked once against jax.numpy before it
is timed, on each side; a wrong result is not timed. The versions and the GPU head the table;
`--json PATH` writes it as JSON too. PyTorch's columns need PyTorch with a GPU.
`--bitwise-only` runs the bitwise check alone (nothing timed).

`--check-on-cpu` needs no GPU: it runs every kernel at small sizes through the package in
Triton's interpreter (JAX on the CPU), single calls and chains of 2, against jax.numpy; lowers
every chain at the measured sizes for CUDA sm_90 under `target_arch` (the route each takes, the
binary's shared memory against the H200's limit); and, where PyTorch is installed, runs the
PyTorch launches on CPU tensors under TRITON_INTERPRET=1 (in a child process) against the same
references. Exit status 1 if anything failed. Without a CUDA or ROCm device the default mode
prints one line saying so and exits with status 1.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.gpu_needed(__file__, unless=("--check-on-cpu", "--worker"))

import argparse
import collections
import importlib.metadata
import importlib.util
import json
import os
import platform as host
import sys

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")  # Triton's default, said (3.9 warns)

import jax  # noqa: E402  (after the environment)
import triton  # noqa: E402

import jax_triton_rocm as jtr  # noqa: E402

from _common import gpu_missing, print_rows, run_fresh, stream_fresh  # noqa: E402
from _real_cases import BY_NAME, CASES  # noqa: E402
import _real_measure  # noqa: E402
from _real_measure import ADD, FORCED_ROUTES, QUEUED, progress, worker  # noqa: E402

CHAIN_LENGTH = 50
ADD_LENGTH = 200
REPEATS = 30
GOAL = 1.05  # package / PyTorch, each kernel
ADD_GOAL = 1.10  # the add chain / XLA's unfused add
IDLE_TIMEOUT_S = 120.0  # a worker silent this long (a hung kernel) is killed
NAMES = [case.name for case in CASES] + [ADD]


def versions() -> dict[str, str]:
    def installed(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    plugins = [f"{name} {installed(name)}" for name in ("jax-cuda13-plugin", "jax-cuda12-plugin",
                                                         "jax-rocm7-plugin") if installed(name)]
    return {"gpu": jax.devices()[0].device_kind, "python": host.python_version(),
            "jax": jax.__version__, "jaxlib": installed("jaxlib") or "?",
            "plugin": ", ".join(plugins) or "none", "triton": triton.__version__,
            "torch": installed("torch") or "not installed",
            "jax_triton_rocm": jtr.__version__}


def measured(names: list[str], args, command_buffers: bool,
             worker_flags: tuple[str, ...] = ()) -> dict[str, dict]:
    """Each kernel's results from worker processes with command buffers on or off (given
    `worker_flags` too: "--bitwise", "--no-timing"). A worker that dies or hangs on a kernel
    marks it failed, with the end of what it printed, and a fresh worker goes on from the next
    kernel."""
    setting = "on" if command_buffers else "off"
    results: dict[str, dict] = {}
    start = 0
    while start < len(names):
        tail = collections.deque(maxlen=8)

        def on_line(line: str) -> None:
            if line.startswith('{"kernel"'):
                try:  # the line may have another process's output after it (its stderr)
                    found, _ = json.JSONDecoder().raw_decode(line)
                    results[found["kernel"]] = found
                    return
                except ValueError:
                    pass
            if line.startswith("real_kernels: "):
                print(f"[command buffers {setting}] {line[len('real_kernels: '):]}", flush=True)
            else:
                tail.append(line)

        status = stream_fresh("real_kernels.py", [
            "--worker", "--kernels", ",".join(names[start:]), "--length", str(args.length),
            "--repeats", str(args.repeats), "--add-length", str(args.add_length),
            "--keep", args.keep, *worker_flags],
            command_buffers, on_line, idle_timeout_s=IDLE_TIMEOUT_S)
        left = [i for i in range(start, len(names)) if names[i] not in results]
        if not left:
            break
        results[names[left[0]]] = {"kernel": names[left[0]], "failed": (
            f"the worker exited ({status}) on it: " + " | ".join(tail)[-400:])}
        start = left[0] + 1
    return results


def _us(side: dict, key: str = "us") -> float | str:
    if "unavailable" in side:
        return "-"
    if "failed" in side:
        return "failed"
    if side.get("correct") is False:
        return "wrong"
    return side.get(key, "-")


def _ratio(top, bottom) -> float | str:
    return top / bottom if isinstance(top, float) and isinstance(bottom, float) else "-"


def kernel_row(name: str, on: dict, off: dict) -> dict:
    """One kernel's figures, both settings, as the table and the JSON show them."""
    row = {"kernel": name, "route": on.get("route", "-")}
    for setting, found in (("on", on), ("off", off)):
        package, torch = found.get("package", found), found.get("torch", found)
        if "skipped" in found:
            package = torch = {"unavailable": found["skipped"]}
        row[f"package_{setting}"] = _us(package)
        row[f"torch_{setting}"] = _us(torch)  # between CUDA events
        wall = _us(torch, "wall_us")
        row[f"torch_wall_{setting}"] = wall if wall != "-" else row[f"torch_{setting}"]
        row[f"ratio_{setting}"] = _ratio(row[f"package_{setting}"],
                                         row[f"torch_wall_{setting}"])
        row[f"gpu_{setting}"] = _us(package, "gpu_us")
        row[f"gpu_ratio_{setting}"] = _ratio(row[f"gpu_{setting}"], row[f"torch_{setting}"])
        row[f"queued_{setting}"] = _us(package, "queued_us")
        row[f"torch_queued_{setting}"] = _us(torch, "queued_us")
        row[f"queued_ratio_{setting}"] = _ratio(row[f"queued_{setting}"],
                                                row[f"torch_queued_{setting}"])
    row["alone"] = _us(on.get("torch", on), "alone_us")
    for side in ("package", "torch"):
        error = on.get(side, {}).get("max_error")
        row[f"error_{side}"] = f"{error:.1e}" if isinstance(error, float) else "-"
    over = [s for s in ("on", "off") if isinstance(row[f"ratio_{s}"], float)
            and row[f"ratio_{s}"] > GOAL]
    for measure, name in (("gpu", "GPU"), ("queued", "queued")):
        over += [f"{name} {s}" for s in ("on", "off")
                 if isinstance(row[f"{measure}_ratio_{s}"], float)
                 and row[f"{measure}_ratio_{s}"] > GOAL]
    wrong = "wrong" in (row["package_on"], row["torch_on"])
    row["flag"] = "WRONG" if wrong else (f">{GOAL} " + "+".join(over) if over else "")
    if "skipped" in on:
        row["flag"] = "skipped"
    row.update(bitwise_columns(on))
    return row


def _bitwise_text(found: dict) -> str:
    """One route's bitwise verdict as the table shows it."""
    if "verdict" not in found:
        return "-"
    if found["verdict"] == "unequal":
        return f"DIFFERS {found.get('differing', '?')}/{found.get('bytes', '?')} B"
    return {"equal": "equal", "nondeterministic": "nondet."}[found["verdict"]]


def bitwise_columns(result: dict) -> dict:
    """A kernel's bitwise verdicts against PyTorch's launch: the default route (and which it
    is), jaxlib's and XLA's, each forced ("failed", or "-" where not checked)."""
    bitwise = result.get("bitwise", {})
    columns = {"bitwise_route": bitwise.get("default", {}).get("route", "-")}
    for route in ("default", *[name for name, _ in FORCED_ROUTES]):
        columns[f"bitwise_{route}"] = ("failed" if "failed" in bitwise
                                       else _bitwise_text(bitwise.get(route, {})))
    return columns


def print_bitwise(rows: list[dict]) -> None:
    print("\nbitwise: the package's outputs against the same kernel launched twice by Triton's "
          "launcher from PyTorch on the same inputs (command buffers on); nondet.: PyTorch's "
          "two launches differ:")
    print_rows([(f"{row['kernel']}-bitwise", row["bitwise_route"], row["bitwise_default"],
                 row["bitwise_jaxlib"], row["bitwise_xla"]) for row in rows],
               ("default route", "bitwise default", "jaxlib", "xla"))


def add_row(on: dict, off: dict) -> dict:
    row = {"kernel": ADD, "route": on.get("route", "-")}
    for setting, found in (("on", on), ("off", off)):
        for key in ("package_us", "xla_us", "package_queued_us", "xla_queued_us",
                    "package_gpu_us", "xla_gpu_us", "compiled_gpu_us"):
            value = found.get(key)
            row[f"{key[:-3]}_{setting}"] = value if isinstance(value, float) else (
                "-" if ("queued" in key or "gpu" in key) and value is None
                and "failed" not in found else "failed")
        if found.get("compiled_correct") is False:
            row[f"compiled_gpu_{setting}"] = "wrong"
        row[f"ratio_{setting}"] = _ratio(row[f"package_{setting}"], row[f"xla_{setting}"])
        for kind in ("queued", "gpu"):
            row[f"{kind}_ratio_{setting}"] = _ratio(row[f"package_{kind}_{setting}"],
                                                    row[f"xla_{kind}_{setting}"])
        row[f"compiled_gpu_ratio_{setting}"] = _ratio(row[f"compiled_gpu_{setting}"],
                                                      row[f"xla_gpu_{setting}"])
    ratios = [row[f"ratio_{s}"] for s in ("on", "off")]
    row["goal"] = ("met" if all(isinstance(r, float) and r <= ADD_GOAL for r in ratios)
                   else "NOT met")
    return row


def problems(results: dict[str, dict[str, dict]]) -> list[str]:
    """What failed or was wrong, by kernel and setting."""
    lines = []
    for setting, found in results.items():
        for name, result in found.items():
            for side in ("", "package", "torch"):
                part = result.get(side, {}) if side else result
                if "failed" in part:
                    lines.append(f"{name} ({side or 'worker'}, command buffers {setting}): "
                                 f"{part['failed']}")
                elif part.get("correct") is False:
                    lines.append(f"{name} ({side or 'result'}, command buffers {setting}): wrong "
                                 f"result (max error {part.get('max_error')})")
            if result.get("compiled_correct") is False:
                lines.append(f"{name} (n compiled in, command buffers {setting}): wrong result")
            bitwise = result.get("bitwise", {})
            if "failed" in bitwise:
                lines.append(f"{name} (bitwise, command buffers {setting}): {bitwise['failed']}")
            default = bitwise.get("default", {})
            if default.get("verdict") == "unequal":
                lines.append(
                    f"{name} (bitwise, the default route: {default['route']}): the outputs "
                    f"differ from PyTorch's launch of the same kernel on the same inputs "
                    f"({default.get('differing', default.get('detail'))} of "
                    f"{default.get('bytes', '?')} bytes)")
    return lines


def not_measured(results: dict[str, dict[str, dict]]) -> dict[str, list[str]]:
    """Why a kernel, or its PyTorch side, could not be measured here (no PyTorch, no sm_90),
    with where: neither is a failure."""
    found = collections.defaultdict(list)
    for setting, results_here in results.items():
        for name, result in results_here.items():
            if "skipped" in result:
                found[result["skipped"]].append(f"{name} (command buffers {setting})")
            elif "unavailable" in result.get("torch", {}):
                found[result["torch"]["unavailable"]].append(
                    f"{name}'s PyTorch side (command buffers {setting})")
            elif "unavailable" in result.get("bitwise", {}):
                found[result["bitwise"]["unavailable"]].append(
                    f"{name}'s bitwise check (command buffers {setting})")
    return dict(found)


def report(names: list[str], args) -> int:
    """Measures `names` with command buffers on, then off, and prints the table."""
    info = versions()
    progress("; ".join(f"{key} {value}" for key, value in info.items()))
    found = {}
    for command_buffers in (True, False):  # the bitwise check once, with command buffers on
        found["on" if command_buffers else "off"] = measured(
            names, args, command_buffers, ("--bitwise",) if command_buffers else ())
    on, off = found["on"], found["off"]
    print("\n" + "; ".join(f"{key} {value}" for key, value in info.items()))
    kernels = [kernel_row(name, on.get(name, {}), off.get(name, {}))
               for name in names if name != ADD]
    table = {"versions": info, "length": args.length, "repeats": args.repeats,
             "add_length": args.add_length, "kernels": kernels, "results": found}
    if kernels:
        print(f"\nµs per call, jitted chain of {args.length} (pkg: wall clock of the jitted "
              f"call; GPU: the same chain's GPU timeline from JAX's profiler; PyTorch: "
              f"{args.length} launches by Triton's launcher, by wall clock to the return of "
              f"torch.cuda.synchronize(); events: the same between CUDA events; alone: those "
              f"replayed from a CUDA graph); ratio = package / PyTorch, both by wall clock (the "
              f"goal's figure); GPU ratio = GPU / events; command buffers on | off:")
        print_rows([(row["kernel"], row["route"], row["error_package"], row["error_torch"],
                     row["package_on"], row["torch_wall_on"], row["ratio_on"], row["gpu_on"],
                     row["torch_on"], row["gpu_ratio_on"], row["package_off"],
                     row["torch_wall_off"], row["ratio_off"], row["gpu_off"], row["torch_off"],
                     row["gpu_ratio_off"], row["alone"], row["flag"])
                    for row in kernels],
                   ("route", "err pkg", "err torch", "on: pkg", "PyTorch", "ratio", "GPU",
                    "events", "GPU ratio", "off: pkg", "PyTorch", "ratio", "GPU", "events",
                    "GPU ratio", "alone", "flag"))
        for case in CASES:
            if case.name in names:
                print(f"  {case.name}: {case.title}")
        print(f"\nµs per call, the same chains, {QUEUED} executions queued back to back and only "
              f"the last waited for (JAX's asynchronous dispatch prepares each execution while "
              f"the GPU runs the one before, as PyTorch's launches run ahead of its kernels; "
              f"PyTorch: {QUEUED} chains between its CUDA events); ratio = package / PyTorch:")
        print_rows([(f"{row['kernel']}-queued", row["route"], row["queued_on"],
                     row["torch_queued_on"], row["queued_ratio_on"], row["queued_off"],
                     row["torch_queued_off"], row["queued_ratio_off"]) for row in kernels],
                   ("route", "on: queued", "PyTorch", "ratio", "off: queued", "PyTorch",
                    "ratio"))
        print_bitwise(kernels)
        slow = [row["kernel"] for row in kernels if row["flag"].startswith(">")]
        print(f"above {GOAL}x PyTorch: {', '.join(slow) or 'none'}")
    if ADD in names:
        row = table["add"] = add_row(on.get(ADD, {}), off.get(ADD, {}))
        print(f"\nchain of {args.add_length} adds of 1024 floats (runtime n), µs per kernel, "
              f"against XLA's own add kept unfused; goal {ADD_GOAL} at most (wall clock); "
              f"-GPU: the chains' GPU timeline; -n-compiled-in: the same add with n a "
              f"constexpr, on the timeline:")
        print_rows([(f"{ADD}{suffix}", row["route"], row[f"{key}_on"], row[f"xla{base}_on"],
                     row[f"{ratio}_on"], row[f"{key}_off"], row[f"xla{base}_off"],
                     row[f"{ratio}_off"], row["goal"] if not suffix else "")
                    for suffix, key, base, ratio in (
                        ("", "package", "", "ratio"),
                        ("-queued", "package_queued", "_queued", "queued_ratio"),
                        ("-GPU", "package_gpu", "_gpu", "gpu_ratio"),
                        ("-n-compiled-in", "compiled_gpu", "_gpu", "compiled_gpu_ratio"))],
                   ("route", "on: pkg", "XLA add", "ratio", "off: pkg", "XLA add", "ratio",
                    "goal"))
    print("\nroutes (command buffers on):")
    for name in names:
        for kernel, route, reason in on.get(name, {}).get("routes", []):
            print(f"  {kernel}: {route}: {reason}")
    for why, where in not_measured(found).items():
        print(f"not measured: {', '.join(where)}: {why}")
    return finish(table, found, args)


def finish(table: dict, found: dict, args) -> int:
    """Prints what failed, writes the JSON; 1 if anything failed."""
    failed = table["problems"] = problems(found)
    for line in failed:
        print(f"FAILED: {line}")
    if args.json:
        with open(args.json, "w") as file:
            json.dump(table, file, indent=1)
        print(f"written to {args.json}")
    return 1 if failed else 0


def report_bitwise(names: list[str], args) -> int:
    """The bitwise check alone (`--bitwise-only`): each kernel's outputs on each route against
    PyTorch's launch, command buffers on, nothing timed."""
    info = versions()
    found = {"on": measured([name for name in names if name != ADD], args, True,
                            ("--bitwise", "--no-timing"))}
    print("\n" + "; ".join(f"{key} {value}" for key, value in info.items()))
    rows = [dict(kernel=name, **bitwise_columns(result)) for name, result in found["on"].items()]
    print_bitwise(rows)
    for why, where in not_measured(found).items():
        print(f"not measured: {', '.join(where)}: {why}")
    return finish({"versions": info, "bitwise": rows, "results": found}, found, args)


def check_on_cpu(names: list[str], torch_side: bool) -> int:
    """Every kernel at small sizes in Triton's interpreter against jax.numpy (the package's
    calls, or with `torch_side` PyTorch's launches); the package's chains lowered for sm_90;
    PyTorch's side in a child process where PyTorch is installed. Returns 1 if anything
    failed."""
    import _real_cpu

    failures = _real_cpu.interpreted(names, torch_side)
    if torch_side:
        return 1 if failures else 0
    failures += _real_cpu.lowered_for_sm90(names)
    if importlib.util.find_spec("torch") is None:
        print("PyTorch side: not checked: PyTorch is not installed")
    else:
        status, stdout, stderr = run_fresh(
            "real_kernels.py", ["--check-on-cpu", "--torch-side", "--kernels", ",".join(names)],
            True, env={"TRITON_INTERPRET": "1", "JAX_PLATFORMS": "cpu"})
        print(stdout, end="")
        if status != 0:
            failures.append(f"the PyTorch side exited with {status}: {stderr[-2000:]}")
    for line in failures:
        print(f"FAILED: {line}")
    print(f"check on the CPU: {'all ok' if not failures else f'{len(failures)} FAILED'}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kernels", default=",".join(NAMES),
                        help=f"the kernels to measure, by name (default: all: {','.join(NAMES)})")
    parser.add_argument("--length", type=int, default=CHAIN_LENGTH,
                        help=f"calls per chain (default {CHAIN_LENGTH})")
    parser.add_argument("--repeats", type=int, default=REPEATS,
                        help=f"timed chains per figure, the median taken (default {REPEATS})")
    parser.add_argument("--add-length", type=int, default=ADD_LENGTH,
                        help=f"adds in the add chain (default {ADD_LENGTH})")
    parser.add_argument("--json", metavar="PATH", help="also write the table as JSON to PATH")
    parser.add_argument("--keep", choices=("all", "last"), default="all",
                        help="what a jitted chain returns besides its last call's first output: "
                             "every call's other outputs (all, the default: a layer norm chain "
                             "of 50 returns 101 arrays), or the last call's only (last); the "
                             "kernels compute every output either way")
    parser.add_argument("--check-on-cpu", action="store_true",
                        help="no GPU: check every kernel in Triton's interpreter and lower it "
                             "for sm_90")
    parser.add_argument("--bitwise-only", action="store_true",
                        help="only compare each kernel's outputs on each route bitwise with "
                             "PyTorch's launch (no timing)")
    parser.add_argument("--torch-side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--bitwise", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-timing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = args.kernels.split(",")
    unknown = [name for name in names if name not in NAMES]
    if unknown:
        parser.error(f"--kernels: no kernel {', '.join(unknown)}; kernels: {', '.join(NAMES)}")
    for name in ("length", "repeats", "add_length"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')}={getattr(args, name)}: give a positive "
                         f"number")
    if args.check_on_cpu:
        return check_on_cpu(names, args.torch_side)
    if gpu_missing("real_kernels.py"):
        return 1
    if args.worker:
        _real_measure.KEEP = args.keep
        worker(names, BY_NAME, args.length, args.repeats, args.add_length, args.bitwise,
               not args.no_timing)
        return 0
    if args.bitwise_only:
        return report_bitwise(names, args)
    progress(f"kernels {', '.join(names)}; command buffers on, then off (a fresh process each)")
    return report(names, args)


if __name__ == "__main__":
    sys.exit(main())
