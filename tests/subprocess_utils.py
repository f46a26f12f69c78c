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


# A prelude for `run_python` that makes the process behave as if no jaxlib GPU plugin were
# installed (the dev and CI venvs have jax-cuda13-plugin): Python's path finder stops finding the
# plugins' packages, so `importlib.util.find_spec` returns None for them, jaxlib imports no
# GPU `_triton` module and JAX's plugin discovery finds no CUDA backend.
WITHOUT_GPU_PLUGINS = """
import importlib.machinery as _machinery
_HIDDEN = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_rocm10_plugin", "jax_rocm7_plugin",
           "jax_rocm60_plugin", "jax_plugins.xla_cuda", "jax_plugins.xla_rocm")
_find_spec = _machinery.PathFinder.find_spec

def _find_unless_hidden(cls, fullname, path=None, target=None):
    if fullname.startswith(_HIDDEN):
        return None
    return _find_spec(fullname, path, target)

_machinery.PathFinder.find_spec = classmethod(_find_unless_hidden)
"""
