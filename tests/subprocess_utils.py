"""Running a snippet in a fresh Python process (for start-up, fork and import tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code: str, *, env: dict[str, str] | None = None, timeout: float = 240):
    """Runs `code` in a new interpreter with the repository first on the path.

    Returns the CompletedProcess; stdout and stderr are text.
    """
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=full_env, timeout=timeout, cwd=ROOT)


def last_line(result) -> str:
    lines = result.stdout.strip().splitlines()
    assert lines, f"no output; stderr:\n{result.stderr[-3000:]}"
    return lines[-1]
