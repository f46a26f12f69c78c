"""jax-triton's own test suites through the package's drop-ins (docs/porting.md, "jax-triton's
own tests").

    python tools/jax_triton_suites.py [PYTEST OPTIONS, e.g. -n 2]

runs v0.3.1's suite (tests/support/jax_triton_suites/v0_3_1, `import jax_triton` giving the 0.3
drop-in) and v0.4.0's (v0_4_0, the 0.4 drop-in), each in its own pytest process (one process
serves one jax-triton version), on the GPU where JAX sees one and in Triton's interpreter
otherwise; then prints one line per suite and a total: passed, failed, skipped, xfailed (a
failure docs/limitations.md explains) and xpassed. Exit status 1 where a suite fails, errs,
or did not finish. Needs absl-py (the `test` extra).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SUITES = {"jax-triton 0.3.1": "tests/support/jax_triton_suites/v0_3_1",
          "jax-triton 0.4.0": "tests/support/jax_triton_suites/v0_4_0"}
OUTCOMES = ("passed", "failed", "skipped", "xfailed", "xpassed", "error")
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)\b")


def counts(summary: str) -> dict[str, int] | None:
    """The outcomes pytest's last summary line counts, or None where there is none."""
    lines = [line for line in summary.splitlines() if re.search(r" in [\d.]+s", line)]
    if not lines:
        return None
    found = {outcome: 0 for outcome in OUTCOMES}
    for number, outcome in _COUNT.findall(lines[-1]):
        found[outcome.rstrip("s") if outcome.startswith("error") else outcome] += int(number)
    return found


def line(name: str, found: dict[str, int]) -> str:
    return f"{name}: " + ", ".join(f"{found[outcome]} {outcome}" for outcome in OUTCOMES)


def main(argv: list[str]) -> int:
    total = {outcome: 0 for outcome in OUTCOMES}
    lines, status = [], 0
    for name, folder in SUITES.items():
        run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                              folder, *argv], cwd=ROOT, capture_output=True, text=True)
        sys.stdout.write(run.stdout[-20000:])
        sys.stderr.write(run.stderr[-5000:])
        found = counts(run.stdout)
        if found is None:
            lines.append(f"{name}: did not finish (pytest exit status {run.returncode})")
            status = 1
            continue
        lines.append(line(name, found))
        for outcome in OUTCOMES:
            total[outcome] += found[outcome]
        status |= run.returncode not in (0, 5)  # 5: nothing collected
    print("\n".join([*lines, line("total", total)]))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
