"""The differential check against Triton's launcher, on a GPU machine (docs/testing.md).

    python tools/differential.py --out DIR

runs the GPU tests (tests/gpu, `-m gpu`) once per route, each in its own pytest process with the
check on (`--differential`, tests/support/differential.py): JAX_TRITON_ROCM_XLA_NATIVE=0 (jaxlib's
Triton call) and =1 (XLA's, where a call fits it); then `benchmarks/real_kernels.py
--bitwise-only`; and prints, last, a summary: per run and route taken, the kernels, the calls
compared, bitwise equal, unequal (listed with their tests), nondeterministic, not compared
(reasons counted). `real_kernels.py` runs beside the tests (it times nothing here). DIR keeps
each run's JSON lines and logs. Exit status 1 where a call on jaxlib's route differs (it launches
the binary pip Triton built, so it must be bitwise equal), where the benchmark fails, or where a
run did not finish; XLA's route's differences are reported, not failures.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = (("0", "jaxlib's route forced"), ("1", "XLA's route forced"))
JAXLIB_ROUTES = ("jaxlib", "jaxlib legacy")
VERDICTS = ("equal", "unequal", "nondeterministic", "not compared", "error")
_PYTEST_COUNTS = re.compile(r"\d+ (passed|failed|skipped|deselected|errors?)\b")
LISTED = 30  # unequal calls and errors listed per run


def read_lines(path: str) -> list[dict]:
    """The JSON lines of one run's report; [] where the run wrote none."""
    if not os.path.exists(path):
        return []
    with open(path) as file:
        return [json.loads(line) for line in file if line.strip()]


def summary(runs: dict[str, list[dict]], outcomes: dict[str, tuple[bool, str]],
            benchmark: dict | None) -> tuple[list[str], bool]:
    """The summary's lines, and whether the check failed: `runs` holds each run's report lines
    by its JAX_TRITON_ROCM_XLA_NATIVE value, `outcomes` for each whether pytest finished (with
    passed or failed tests) and its last line, and `benchmark` the JSON of `real_kernels.py
    --bitwise-only` (None where it was not asked for)."""
    lines = ["differential check: every GPU test's calls and the real kernels, against the same "
             "kernel launched by Triton's launcher from PyTorch, bitwise"]
    failed = False
    header = ("run", "route", "kernels", "calls", "equal", "unequal", "nondet.",
              "not compared", "errors", "not instrumented")
    rows = []
    runs = {flag: _unstable_kernels_marked(records) for flag, records in runs.items()}
    for flag, records in runs.items():
        finished, last = outcomes.get(flag, (False, "did not run"))
        lines.append(f"XLA_NATIVE={flag}: pytest: {last}" + ("" if finished else
                                                              " (DID NOT FINISH)"))
        failed = failed or not finished
        by_route = collections.defaultdict(list)
        for record in records:
            by_route[record["route"]].append(record)
        for route, found in sorted(by_route.items()):
            counts = collections.Counter(record["verdict"] for record in found)
            compared = [r for r in found if r["verdict"] in ("equal", "unequal",
                                                             "nondeterministic")]
            rows.append((f"XLA_NATIVE={flag}", route,
                         str(len({r["kernel"] for r in compared})),
                         str(sum(counts[v] for v in VERDICTS)),
                         *[str(counts[v]) for v in VERDICTS], str(counts["not instrumented"])))
            failed = failed or (route in JAXLIB_ROUTES and counts["unequal"] > 0)
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
    lines += ["  ".join(cell.ljust(width) for cell, width in zip(row, widths))
              for row in (header, *rows)]
    for flag, records in runs.items():
        lines += _listing(flag, records)
    if benchmark is not None:
        lines.append("benchmarks/real_kernels.py (default route; bitwise on the default route, "
                     "jaxlib's and XLA's):")
        lines += [f"  {row['kernel']}: {row['bitwise_route']}; default {row['bitwise_default']}, "
                  f"jaxlib {row['bitwise_jaxlib']}, xla {row['bitwise_xla']}"
                  for row in benchmark.get("bitwise", [])]
        lines += [f"  FAILED: {problem}" for problem in benchmark.get("problems", [])]
        differs = [row["kernel"] for row in benchmark.get("bitwise", [])
                   if row["bitwise_jaxlib"].startswith("DIFFERS")]
        if differs:
            lines.append(f"  jaxlib's route differs for {', '.join(differs)}")
        failed = failed or bool(benchmark.get("problems")) or bool(differs)
    lines.append("differential check: " + ("FAILED" if failed else "ok (no call on jaxlib's "
                                                                   "route differs)"))
    return lines, failed


def _unstable_kernels_marked(records: list[dict]) -> list[dict]:
    """`records`, where a kernel that Triton's launcher ran to two different results somewhere
    in the run (float atomics) has its unequal calls counted as nondeterministic: two launches
    agreeing once does not make its order of atomics fixed."""
    unstable = {r["kernel"] for r in records if r["verdict"] == "nondeterministic"}
    return [dict(r, verdict="nondeterministic",
                 detail=r["detail"] + " (nondeterministic elsewhere under Triton's launcher)")
            if r["verdict"] == "unequal" and r["kernel"] in unstable else r for r in records]


def _listing(flag: str, records: list[dict]) -> list[str]:
    """One run's unequal calls and errors (each with its test), nondeterministic kernels, and
    the reasons calls were not compared or lowerings not instrumented, counted."""
    lines = []
    for verdict in ("unequal", "error"):
        found = [r for r in records if r["verdict"] == verdict]
        for record in found[:LISTED]:
            lines.append(f"  XLA_NATIVE={flag} {verdict.upper()}: {record['route']} "
                         f"{record['kernel']} in {record['test']}: {record['detail']} "
                         f"[{record.get('launch', '')}]")
        if len(found) > LISTED:
            lines.append(f"  ... and {len(found) - LISTED} more {verdict}")
    unstable = sorted({r["kernel"] for r in records if r["verdict"] == "nondeterministic"})
    if unstable:
        lines.append(f"  XLA_NATIVE={flag} nondeterministic under Triton's launcher: "
                     f"{', '.join(unstable)}")
    for verdict in ("not compared", "not instrumented"):
        reasons = collections.Counter(r["detail"] for r in records if r["verdict"] == verdict)
        for reason, count in reasons.most_common():
            lines.append(f"  XLA_NATIVE={flag} {verdict} ({count}): {reason}")
    return lines


def run_tests(flag: str, out: str, workers: int, timeout_s: float,
              pytest_args: list[str]) -> tuple[bool, str]:
    """One pytest process over the GPU tests with the check on; returns whether it finished
    (its tests passed or failed) and its last line."""
    report, log = (os.path.join(out, f"xla_native_{flag}{suffix}") for suffix in (".jsonl",
                                                                                  ".log"))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-m", "gpu",
               "-n", str(workers), f"--differential={report}", *pytest_args]
    env = dict(os.environ, JAX_TRITON_ROCM_XLA_NATIVE=flag)
    start = time.monotonic()
    with open(log, "w") as file:
        try:
            status = subprocess.run(command, cwd=ROOT, env=env, stdout=file,
                                    stderr=subprocess.STDOUT, timeout=timeout_s,
                                    check=False).returncode
        except subprocess.TimeoutExpired:
            return False, f"timed out after {timeout_s:.0f} s"
    with open(log, errors="replace") as file:
        text = [line.strip() for line in file if line.strip()]
    last = next((line for line in reversed(text) if _PYTEST_COUNTS.search(line)),
                text[-1] if text else "no output")
    return status in (0, 1), (f"{last.strip('= ')} (exit status {status}, "
                               f"{time.monotonic() - start:.0f} s wall)")


def run_benchmark(out: str, timeout_s: float) -> dict:
    """`benchmarks/real_kernels.py --bitwise-only`'s JSON; its problems say where it failed to
    write one."""
    path, log = os.path.join(out, "real_kernels.json"), os.path.join(out, "real_kernels.log")
    with open(log, "w") as file:
        try:
            subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "real_kernels.py"),
                            "--bitwise-only", "--json", path], cwd=ROOT, stdout=file,
                           stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            return {"problems": [f"real_kernels.py timed out after {timeout_s:.0f} s ({log})"]}
    if not os.path.exists(path):
        return {"problems": [f"real_kernels.py wrote no JSON (see {log})"]}
    with open(path) as file:
        return json.load(file)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for the reports and logs")
    parser.add_argument("--workers", type=int, default=8, help="pytest-xdist workers (8)")
    parser.add_argument("--routes", default="0,1",
                        help="JAX_TRITON_ROCM_XLA_NATIVE values, one run each (default 0,1)")
    parser.add_argument("--timeout", type=float, default=150.0,
                        help="seconds per pytest run (150)")
    parser.add_argument("--no-benchmark", action="store_true",
                        help="leave out benchmarks/real_kernels.py --bitwise-only")
    parser.add_argument("pytest_args", nargs="*",
                        help="after --: what pytest runs (default: tests/gpu)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    benchmark: dict = {}
    if not args.no_benchmark:  # beside the test runs: it times nothing
        print("differential: benchmarks/real_kernels.py --bitwise-only, beside the tests",
              flush=True)
        side = threading.Thread(target=lambda: benchmark.update(run_benchmark(args.out, 300.0)))
        side.start()
    runs, outcomes = {}, {}
    for flag in args.routes.split(","):
        print(f"differential: XLA_NATIVE={flag}: running the GPU tests", flush=True)
        outcomes[flag] = run_tests(flag, args.out, args.workers, args.timeout,
                                   args.pytest_args or ["tests/gpu"])
        runs[flag] = read_lines(os.path.join(args.out, f"xla_native_{flag}.jsonl"))
        print(f"differential: XLA_NATIVE={flag}: {outcomes[flag][1]}; {len(runs[flag])} "
              f"calls and lowerings reported", flush=True)
    if not args.no_benchmark:
        side.join()
    lines, failed = summary(runs, outcomes, None if args.no_benchmark else benchmark)
    print("\n".join(lines))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
