"""`python -m jax_triton_rocm` when JAX itself does not import.

Python imports the package (whose `__init__` imports JAX) before it runs `__main__`, so this is
the one failure the command line's own handlers cannot catch. Each case runs the real
`python -m jax_triton_rocm` in a fresh process with a stand-in `jax` package first on the path,
whose import fails as a missing or mismatched JAX does. A program that imports the package still
gets the ImportError itself.
"""

import os
import subprocess
import sys

import pytest

from jax_triton_rocm.cli import _startup
from tests.support.subprocess_utils import ROOT

pytestmark = pytest.mark.process  # each test starts Python processes

NOT_INSTALLED = "raise ModuleNotFoundError(\"No module named 'jax'\", name='jax')"
MISMATCHED = ("raise RuntimeError('jaxlib version 0.10.2 is older than the minimum jaxlib version "
              "0.11.2 required by jax')")
COMMANDS = [pytest.param((), id="demo"), pytest.param(("info",), id="info")]


def run_with_broken_jax(tmp_path, jax_init: str, *command: str):
    """Runs `python *command` with a `jax` package whose `__init__` is `jax_init`."""
    (tmp_path / "jax").mkdir(exist_ok=True)
    (tmp_path / "jax" / "__init__.py").write_text(jax_init + "\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]))
    return subprocess.run([sys.executable, *command], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("jax_init,expected", [
    (NOT_INSTALLED, ("JAX could not be imported: ModuleNotFoundError: No module named 'jax'",
                     "likely cause: JAX is not installed in this Python", "fix: pip install -U "
                     "jax")),
    (MISMATCHED, ("JAX could not be imported: RuntimeError: jaxlib version 0.10.2 is older",
                  "likely cause: the installed jax and jaxlib versions do not match",
                  "fix: pip install -U jax jaxlib")),
], ids=["not-installed", "jaxlib-mismatch"])
def test_a_jax_that_does_not_import_is_explained_with_status_3(tmp_path, command, jax_init,
                                                               expected):
    result = run_with_broken_jax(tmp_path, jax_init, "-m", "jax_triton_rocm", *command)
    assert result.returncode == _startup.EXIT_JAX_DID_NOT_START, result.stderr[-3000:]
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    assert result.stderr.startswith("python -m jax_triton_rocm: error: "), result.stderr[-3000:]
    for text in expected:
        assert text in result.stderr, f"{text!r} not in:\n{result.stderr[-3000:]}"


def test_traceback_flag_shows_the_import_traceback(tmp_path):
    result = run_with_broken_jax(tmp_path, NOT_INSTALLED, "-m", "jax_triton_rocm", "--traceback")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "Traceback" in result.stderr and "No module named 'jax'" in result.stderr


def test_a_program_importing_the_package_still_gets_the_import_error(tmp_path):
    result = run_with_broken_jax(tmp_path, NOT_INSTALLED, "-c", "import jax_triton_rocm")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "ModuleNotFoundError: No module named 'jax'" in result.stderr, result.stderr[-3000:]


def test_another_command_line_importing_the_package_still_gets_the_import_error(tmp_path):
    # `python -m user_tool`: Python imports user_tool (and so the package) with sys.argv[0] set
    # to "-m", as for the package's own command line.
    (tmp_path / "user_tool").mkdir()
    (tmp_path / "user_tool" / "__init__.py").write_text("import jax_triton_rocm\n")
    (tmp_path / "user_tool" / "__main__.py").write_text("print('ran')\n")
    result = run_with_broken_jax(tmp_path, NOT_INSTALLED, "-m", "user_tool")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "ModuleNotFoundError: No module named 'jax'" in result.stderr, result.stderr[-3000:]
    assert "python -m jax_triton_rocm: error" not in result.stderr, result.stderr[-3000:]
