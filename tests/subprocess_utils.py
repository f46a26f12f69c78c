"""Running a snippet in a fresh Python process (for start-up, fork and import tests)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(*pieces: str, env: dict[str, str] | None = None, timeout: float = 240):
    """Runs the code `pieces` (each dedented on its own, then joined) in a new interpreter with
    the repository first on the path.

    Returns the CompletedProcess; stdout and stderr are text.
    """
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    full_env.update(env or {})
    code = "\n".join(textwrap.dedent(piece) for piece in pieces)
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, env=full_env, timeout=timeout, cwd=ROOT)


def failing_import(module: str, error: str, message: str) -> str:
    """Code that makes importing `module`, or any module under it, raise `error(message)`.

    `error` names a built-in exception class ("RuntimeError", "ModuleNotFoundError", ...).
    """
    extra = ", name=name" if error == "ModuleNotFoundError" else ""
    return f"""
import importlib.abc, sys

class FailingImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == {module!r} or name.startswith({module + "."!r}):
            raise {error}({message!r}{extra})

sys.meta_path.insert(0, FailingImport())
"""


def last_line(result) -> str:
    lines = result.stdout.strip().splitlines()
    assert lines, f"no output; stderr:\n{result.stderr[-3000:]}"
    return lines[-1]
