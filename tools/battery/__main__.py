"""A battery of bad and edge inputs for `triton_call` and `triton_call_lowering`, each classified
by what the package does with it.

Run from the repository root (no GPU needed; every case lowers on the CPU for sm_90 or gfx942
under `target_arch`, or runs in Triton's interpreter):

    python tools/battery                   # every case; prints the counts by class
    python tools/battery -k grid -v        # the cases whose name contains "grid", each shown
    python tools/battery --json out.json   # also writes every result

Each case runs in one of a few worker processes (a crash or a hang costs only that case), with a
private, empty Triton cache folder (so cold-cache behaviour shows). Classes:

  clear         a bad input refused with an error whose text (message and notes) contains every
                text the case's hand-kept `mentions` lists (the argument, the offending value,
                sometimes the fix), each as a whole token, and an advice form (`ADVICE`: what to
                do or what is allowed), and is no internal failure (`INTERNAL`)
  unclear       a bad input refused with any other error
  silent        a bad input accepted, or an input accepted with a wrong result (its `check`)
  correct       a good or tolerable input accepted, with the right result where checked
  refused-good  a good input refused
  crash         the worker died on the case
  hang          no answer within --timeout seconds
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CLASSES = ("clear", "unclear", "silent", "correct", "refused-good", "crash", "hang")
# Words and forms that say what to do, or what is allowed.
ADVICE = re.compile(r"\b(use|pass|set|give|drop|rename|remove|add|cast|wrap|unset|call|choose|fix|"
                    r"must|instead|one of|expected|allowed|supported|lower|register|install|"
                    r"takes|needs|at most|at least|or fewer|parameters are|names are)\b|\be\.g\.|"
                    r"\(\d+\.\.\d+\)", re.IGNORECASE)
INTERNAL = ("PassManager::run failed",)


def all_cases() -> dict:
    sys.path[:0] = [HERE, ROOT]
    import cases_autotune
    import cases_call
    import cases_idioms
    import cases_lowering
    import cases_reliability
    import cases_target
    import cases_values

    cases = [case for module in (cases_call, cases_values, cases_lowering, cases_autotune,
                                 cases_target, cases_idioms, cases_reliability)
             for case in module.cases()]
    by_name = {f"{case.group}: {case.name}": case for case in cases}
    assert len(by_name) == len(cases), "case names must be unique"
    return by_name


def error_text(err: BaseException) -> str:
    """What a user reads: the type, the message and the notes (JAX's note about its filtered
    traceback left out: it gives advice about tracebacks, not about the input)."""
    notes = [n for n in getattr(err, "__notes__", ()) if "JAX_TRACEBACK_FILTERING" not in n]
    return "\n".join([f"{type(err).__name__}: {err}"] + notes)


def mentioned(text: str, mention: str) -> bool:
    """Whether `text` holds one of `mention`'s alternatives ("a|b") as a whole token."""
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(alt)}(?![A-Za-z0-9_])", text, re.I)
               for alt in mention.split("|"))


def classify(case, error: BaseException | None, result) -> tuple[str, str]:
    """(class, text shown for it) for `case`, which raised `error` or returned `result`."""
    if error is not None:
        text = error_text(error)
        if case.expect == "accept":
            return "refused-good", text
        clear = (all(mentioned(text, m) for m in case.mentions) and ADVICE.search(text)
                 and not any(marker in text for marker in INTERNAL))
        return ("clear" if clear else "unclear"), text
    if case.expect == "refuse":
        return "silent", f"accepted; returned {type(result).__name__}"
    if case.check is not None:
        try:
            right = bool(case.check(result))
        except Exception as err:  # noqa: BLE001  (a check that cannot read the result: wrong)
            right, result = False, f"check raised {type(err).__name__}: {err}"
        if not right:
            return "silent", f"accepted with a wrong result: {str(result)[:300]}"
    return "correct", ""


def worker() -> None:
    """Runs the cases named on stdin, one per line; one JSON result per line on the real stdout
    (anything the cases print goes to stderr)."""
    results = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    cases = all_cases()
    for line in sys.stdin:
        case = cases[line.strip()]
        start = time.monotonic()
        error, result = None, None
        try:
            result = case.run()
        except Exception as err:  # noqa: BLE001  (what the case is about)
            error = err
        kind, text = classify(case, error, result)
        if kind in ("unclear", "refused-good") and os.environ.get("BATTERY_TRACEBACKS"):
            traceback.print_exception(error)
        results.write(json.dumps({"name": line.strip(), "class": kind, "text": text[:4000],
                                  "seconds": round(time.monotonic() - start, 2)}) + "\n")


class Worker:
    """One worker process and the case it is running."""

    def __init__(self, env: dict, log) -> None:
        self.process = subprocess.Popen([sys.executable, HERE, "--worker"], env=env, cwd=ROOT,
                                        text=True, stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=log)
        self.case: str | None = None
        self.started = 0.0

    def give(self, name: str) -> None:
        self.case, self.started = name, time.monotonic()
        self.process.stdin.write(name + "\n")
        self.process.stdin.flush()

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def run_all(names: list[str], workers: int, timeout: float, env: dict, log) -> dict:
    """Runs `names` on `workers` processes; returns each case's result by name."""
    pending, results = collections.deque(names), {}
    pool = [Worker(env, log) for _ in range(min(workers, len(names)))]
    while pending or any(w.case for w in pool):
        for w in pool:
            if w.case is None and pending:
                w.give(pending.popleft())
        busy = {w.process.stdout: w for w in pool if w.case}
        ready, _, _ = select.select(list(busy), [], [], 1.0)
        for stream in ready:
            w = busy[stream]
            line = stream.readline()
            if line:
                results[w.case] = json.loads(line)
            else:
                results[w.case] = {"name": w.case, "class": "crash", "seconds": 0,
                                   "text": f"worker died (status {w.process.wait()})"}
                pool[pool.index(w)] = w = Worker(env, log)
            w.case = None
        for i, w in enumerate(pool):
            if w.case and time.monotonic() - w.started > timeout:
                results[w.case] = {"name": w.case, "class": "hang", "seconds": timeout,
                                   "text": f"no answer in {timeout:.0f} s"}
                w.stop()
                pool[i] = Worker(env, log)
    for w in pool:
        w.process.stdin.close()
        w.process.wait()
    return results


def report(cases: dict, results: dict, seconds: float, verbose: bool) -> None:
    counts = collections.Counter(r["class"] for r in results.values())
    print(f"{len(results)} inputs in {seconds:.0f} s: " + ", ".join(
        f"{counts[c]} {c}" for c in CLASSES))
    groups = sorted({cases[name].group for name in results})
    print(f"\n{'by group':22} " + " ".join(f"{c:>12}" for c in CLASSES))
    for group in groups:
        in_group = collections.Counter(r["class"] for n, r in results.items()
                                       if cases[n].group == group)
        print(f"{group:22} " + " ".join(f"{in_group[c]:>12}" for c in CLASSES))
    from_issue = collections.Counter(r["class"] for n, r in results.items()
                                     if cases[n].from_issue)
    print(f"{'(listed in issue 21)':22} " + " ".join(f"{from_issue[c]:>12}" for c in CLASSES))
    for name, result in results.items():
        shown = verbose or result["class"] not in ("clear", "correct")
        if shown:
            case = cases[name]
            issue = f" (issue 21: {case.from_issue})" if case.from_issue else ""
            text = " ".join(result["text"].split())[:300]
            print(f"\n[{result['class']}] {name}{issue}\n    {text}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("-k", default="", help="only the cases whose name contains this")
    parser.add_argument("-v", "--verbose", action="store_true", help="show every case")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per case")
    parser.add_argument("--json", help="write every result to this file")
    parser.add_argument("--log", help="write the workers' stderr to this file")
    parser.add_argument("--shuffle", type=int, metavar="SEED",
                        help="run the cases in a random order (a result that changes with the "
                             "order depends on what an earlier case left in the caches)")
    args = parser.parse_args()
    if args.worker:
        return worker()
    cases = all_cases()
    names = [name for name in cases if args.k.lower() in name.lower()]
    run_order = list(names)
    if args.shuffle is not None:
        random.Random(args.shuffle).shuffle(run_order)
    scratch = tempfile.mkdtemp(prefix="battery_")
    os.mkdir(os.path.join(scratch, "tmp"))
    env = {**os.environ, "PYTHONPATH": ROOT, "JAX_PLATFORMS": "cpu",
           "TMPDIR": os.path.join(scratch, "tmp"),
           "TRITON_CACHE_DIR": os.path.join(scratch, "triton-cache"),
           "TRITON_DEFAULT_FP_FUSION": "1"}
    start = time.monotonic()
    try:
        with open(args.log or os.path.join(scratch, "workers.log"), "w") as log:
            results = run_all(run_order, args.workers, args.timeout, env, log)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    ordered = {name: results[name] for name in names}
    report(cases, ordered, time.monotonic() - start, args.verbose)
    if args.json:
        with open(args.json, "w") as out:
            json.dump([{**r, "group": cases[n].group, "from_issue": cases[n].from_issue,
                        "expect": cases[n].expect} for n, r in ordered.items()], out, indent=1)


if __name__ == "__main__":
    main()
