"""Running a snippet in a fresh Python process (for start-up, fork and import tests)."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DISTRIBUTION = "jax_triton_rocm"
BATTERY = os.path.join(ROOT, "tools", "battery")
# The benchmark scripts (benchmarks/) that need a GPU, and those for which the CPU is enough.
GPU_ONLY = ["overhead.py", "moe_permute.py", "autotune_launch.py", "launch_cost.py",
            "scalar_compile.py", "real_kernels.py", "first_result.py", "time_breakdown.py"]
CPU_IS_ENOUGH = ["autotune_compile.py", "memory.py", "relower.py"]


def child_env(env: dict[str, str] | None = None,
              unset: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment for a new interpreter: this process's, with the repository first on the
    path (so that it imports this checkout), TRITON_DEFAULT_FP_FUSION set unless it is, then
    `env` set and the variables `unset` removed."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    full_env.update(env or {})
    for name in unset:
        full_env.pop(name, None)
    return full_env


def run_python(*pieces: str, env: dict[str, str] | None = None, timeout: float = 240,
               unset: tuple[str, ...] = (), prefix: tuple[str, ...] = ()):
    """Runs the code `pieces` (each dedented on its own, then joined) in a new interpreter with
    the environment `child_env(env, unset)`, its command line after `prefix` (e.g. a shell that
    prepares the process).

    Returns the CompletedProcess; stdout and stderr are text.
    """
    code = "\n".join(textwrap.dedent(piece) for piece in pieces)
    return subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True,
                          text=True, env=child_env(env, unset), timeout=timeout, cwd=ROOT)


def run_script(path: str | os.PathLike, *args: str, env: dict[str, str] | None = None,
               timeout: float = 240, cwd: str | os.PathLike = ROOT):
    """Runs `python path *args` in a new interpreter, in the folder `cwd`, with the environment
    `child_env(env)`.

    Returns the CompletedProcess; stdout and stderr are text.
    """
    return subprocess.run([sys.executable, os.fspath(path), *args], capture_output=True,
                          text=True, env=child_env(env), timeout=timeout, cwd=cwd)


_RUN_MAIN = """
import sys
from jax_triton_rocm.__main__ import main
try:
    status = main({argv!r})
except SystemExit as exit:
    status = exit.code
sys.stdout.flush()
sys.exit(status)
"""


def run_cli(*argv: str, prelude: str | tuple[str, ...] = (), env: dict[str, str] | None = None):
    """Runs `python -m jax_triton_rocm *argv` in a new interpreter after the code `prelude`."""
    pieces = (prelude,) if isinstance(prelude, str) else prelude
    return run_python(*pieces, _RUN_MAIN.format(argv=list(argv)), env=env)


def distribution_installed() -> bool:
    """Whether the distribution `jax_triton_rocm` is installed (pip), not only on the path."""
    try:
        importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def advertised_entry_point(folder: str | os.PathLike) -> str:
    """A prelude for `run_python` under which JAX's plugin discovery finds the package's
    `jax_plugins` entry point, installed or not.

    Where the distribution is installed (CI, a pip install) it is the empty string. Where the
    checkout is only on PYTHONPATH, no entry point exists, so a stand-in distribution in `folder`
    declares the entry points pyproject.toml declares, and the prelude puts it on the path.
    """
    if distribution_installed():
        return ""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as pyproject:
        project = tomllib.load(pyproject)["project"]
    dist_info = pathlib.Path(folder) / f"{DISTRIBUTION}-0.0.0.dist-info"
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: 0.0.0\n")
    groups = [f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
              for group, points in project.get("entry-points", {}).items()]
    (dist_info / "entry_points.txt").write_text("\n".join(groups))
    return f"import sys; sys.path.append({str(folder)!r})\n"


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


# Pieces for `run_python` that make Triton look like a build without its NVIDIA backend, as an AMD
# build is: the backend is not listed, and importing it fails.
TRITON_WITHOUT_NVIDIA = (failing_import("triton.backends.nvidia", "ModuleNotFoundError",
                                        "No module named 'triton.backends.nvidia'"), """
    import importlib.metadata
    real_entry_points = importlib.metadata.entry_points

    class WithoutNvidia:
        def __init__(self, eps):
            self.eps = eps
        def select(self, **kwargs):
            return [ep for ep in self.eps.select(**kwargs) if "nvidia" not in ep.value]

    # Triton asks entry_points().select(group=...); others (JAX) pass the group directly.
    importlib.metadata.entry_points = (
        lambda **kw: real_entry_points(**kw) if kw else WithoutNvidia(real_entry_points()))
""")


def mount_namespaces() -> bool:
    """Whether `unshare -rm` may make a user and mount namespace here (for a read-only HOME that
    root cannot write: a read-only bind mount)."""
    try:
        return subprocess.run(["unshare", "-rm", "true"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def last_line(result) -> str:
    lines = result.stdout.strip().splitlines()
    assert lines, f"no output; stderr:\n{result.stderr[-3000:]}"
    return lines[-1]


def hide_gpu_plugins(keep_under: str | None = None) -> str:
    """A prelude for `run_python` that makes the process behave as if no jaxlib GPU plugin were
    installed (the dev and CI venvs have jax-cuda13-plugin), apart from stand-ins under
    `keep_under` (put first on the path).

    Python's path finder stops finding the plugins' packages, so `importlib.util.find_spec` returns
    None for them, jaxlib imports no GPU `_triton` module and JAX's plugin discovery finds no CUDA
    backend; their distributions (and so their `jax_plugins` entry points) and the modules a scan
    of the `jax_plugins` namespace lists are hidden too, as if never installed.
    """
    return f"""
import importlib.machinery as _machinery, importlib.metadata as _metadata, pkgutil as _pkgutil
import re as _re, sys as _sys
_KEEP = {keep_under!r}
if _KEEP is not None:
    _sys.path.insert(0, _KEEP)
_HIDDEN = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_rocm10_plugin", "jax_rocm7_plugin",
           "jax_rocm60_plugin", "jax_plugins.xla_cuda", "jax_plugins.xla_rocm")
_HIDDEN_DISTRIBUTIONS = _re.compile(r"jax[-_](cuda|rocm)[0-9]+[-_](plugin|pjrt)")
_find_spec = _machinery.PathFinder.find_spec


def _kept(path):
    return _KEEP is not None and str(path).startswith(_KEEP)


def _find_unless_hidden(cls, fullname, path=None, target=None):
    if fullname.startswith(_HIDDEN):
        kept = [entry for entry in (_sys.path if path is None else path) if _kept(entry)]
        return _find_spec(fullname, kept, target) if kept else None
    return _find_spec(fullname, path, target)


def _visible_distributions(_all=_metadata.distributions, **kwargs):
    for dist in _all(**kwargs):
        name = (dist.metadata["Name"] or "").lower()
        if not _HIDDEN_DISTRIBUTIONS.fullmatch(name) or _kept(getattr(dist, "_path", "")):
            yield dist


def _visible_modules(path=None, prefix="", _all=_pkgutil.iter_modules):
    for info in _all(path, prefix):
        if not info.name.startswith(_HIDDEN) or _kept(getattr(info.module_finder, "path", "")):
            yield info


_machinery.PathFinder.find_spec = classmethod(_find_unless_hidden)
_metadata.distributions = _visible_distributions
_pkgutil.iter_modules = _visible_modules
"""


WITHOUT_GPU_PLUGINS = hide_gpu_plugins()


def standin_plugin(root, platform: str, initialize_error: str | None,
                   import_error: str | None = None) -> str:
    """A stand-in jaxlib plugin for `platform` ("cuda" or "rocm") under folder `root`: the
    package that `jax_triton_rocm` looks for and a `jax_plugins` module whose `initialize()`
    raises RuntimeError(`initialize_error`) (or registers nothing, if None), as a plugin without
    its libraries does, or whose import raises ImportError(`import_error`) if given. Returns the
    prelude that hides the real plugins and shows this one."""
    package, module = {"cuda": ("jax_cuda13_plugin", "xla_cuda13"),
                       "rocm": ("jax_rocm7_plugin", "xla_rocm7")}[platform]
    (root / package).mkdir(parents=True, exist_ok=True)
    (root / package / "__init__.py").write_text("")
    (root / "jax_plugins" / module).mkdir(parents=True, exist_ok=True)
    body = ("    pass\n" if initialize_error is None else
            f"    raise RuntimeError({initialize_error!r})\n")
    failing_import = f"raise ImportError({import_error!r})\n" if import_error else ""
    (root / "jax_plugins" / module / "__init__.py").write_text(
        failing_import + "def initialize():\n" + body)
    return hide_gpu_plugins(str(root))


_SHARED_INTERPRETER = r"""
import contextlib, io, json, os, runpy, sys, traceback
results = os.fdopen(int(sys.argv[1]), "w")
for line in sys.stdin:
    request = json.loads(line)
    out, err = io.StringIO(), io.StringIO()
    cwd, argv = os.getcwd(), sys.argv
    os.chdir(request["cwd"])
    sys.argv = [request["path"], *request["args"]]
    sys.path.insert(0, os.path.dirname(request["path"]))  # as `python SCRIPT` puts it
    ok, error = True, ""
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            runpy.run_path(request["path"], run_name="__main__")
        except SystemExit as exit:
            ok = exit.code in (None, 0)
            error = "" if ok else f"SystemExit({exit.code!r})"
        except BaseException:
            ok, error = False, traceback.format_exc()
    os.chdir(cwd)
    sys.argv = argv
    sys.path.remove(os.path.dirname(request["path"]))
    results.write(json.dumps({"ok": ok, "stdout": out.getvalue(), "stderr": err.getvalue(),
                              "error": error}) + "\n")
    results.flush()
"""


def is_shared_interpreter(command) -> bool:
    """Whether `command` starts a `SharedInterpreter` (one process for many tests)."""
    return not isinstance(command, (str, bytes)) and list(command[1:3]) == ["-c",
                                                                            _SHARED_INTERPRETER]


class SharedInterpreter:
    """One Python interpreter, with the repository first on the path, that runs script after
    script (`run`), each in a namespace of its own as `python SCRIPT ARGS` would (run_name
    "__main__", `sys.argv` set, the working folder given), sharing only what is imported: for many
    checks that need a script's view of the package, but not a fresh process each.

    A script that ends the interpreter (a crash, `os._exit`) or outruns its timeout fails, and the
    next `run` starts a new interpreter. What the interpreter itself prints outside the scripts
    (JAX's start-up, C++ logs) goes to `log_path`.
    """

    def __init__(self, log_path: str | os.PathLike) -> None:
        self.log_path = os.fspath(log_path)
        self._process: subprocess.Popen | None = None
        self._results = None

    def _start(self) -> None:
        read_end, write_end = os.pipe()
        with open(self.log_path, "a") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-c", _SHARED_INTERPRETER, str(write_end)],
                stdin=subprocess.PIPE, stdout=log, stderr=log, pass_fds=(write_end,),
                env=child_env(), cwd=ROOT, text=True)
        os.close(write_end)
        self._results = os.fdopen(read_end)

    def run(self, path: str | os.PathLike, *args: str, cwd: str | os.PathLike | None = None,
            timeout: float = 300) -> dict:
        """Runs the script at `path`; returns {"ok", "stdout", "stderr", "error"}: whether it
        ended normally (or with exit status 0), what it printed through `sys.stdout` and
        `sys.stderr`, and the traceback (or the exit status, or why the interpreter ended)."""
        import json
        import select

        if self._process is None or self._process.poll() is not None:
            self._start()
        request = {"path": os.fspath(path), "args": list(args),
                   "cwd": os.fspath(cwd or os.path.dirname(os.fspath(path)))}
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        ready, _, _ = select.select([self._results], [], [], timeout)
        line = self._results.readline() if ready else ""
        if line:
            return json.loads(line)
        why = (f"timed out after {timeout} s" if not ready else
               f"the interpreter ended (status {self._process.wait()})")
        self._process.kill()  # stuck in the script, or already ended
        self.close()
        with open(self.log_path) as log:
            tail = log.read()[-3000:]
        return {"ok": False, "stdout": "", "stderr": "", "error": f"{why}; its log:\n{tail}"}

    def close(self) -> None:
        """Ends the interpreter as a script would end: its input closed, so that it exits and
        runs its exit handlers (the package removes its HSACO folder then); killed only if it
        does not end within a minute."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.stdin.close()
                try:
                    self._process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    self._process.kill()
            self._process.wait()
            if not self._process.stdin.closed:
                self._process.stdin.close()
            self._results.close()
            self._process = None


# The CPU fallback warning (tests/process and tests/gpu).
TWO_KERNELS_TWICE = """
    import jax, jax.numpy as jnp
    from tests.support import kernels
    cpu = jax.devices("cpu")[0]
    x = jax.device_put(jnp.arange(512, dtype=jnp.float32), cpu)
    for _ in range(2):
        assert jnp.allclose(jax.jit(kernels.add)(x, x), 2 * x)
        assert jnp.allclose(jax.jit(kernels.copy)(x), x)
    print("ran")
"""
INTERPRETER_WARNING = "runs in Triton's interpreter on the CPU"


def run_two_kernels_twice(prelude, env=None):
    """Runs two kernels twice each on the CPU in a fresh process after `prelude`; its stderr."""
    result = run_python(prelude, TWO_KERNELS_TWICE, env=env)
    assert result.returncode == 0 and "ran" in result.stdout, result.stderr[-3000:]
    return result.stderr


# examples/multi_process.py (tests/process and tests/gpu).
MULTI_PROCESS_EXAMPLE = os.path.join(ROOT, "examples", "multi_process.py")


def run_multi_process_example(*args: str) -> subprocess.CompletedProcess:
    return run_script(MULTI_PROCESS_EXAMPLE, *args, timeout=280)


def check_both_processes_matched(result: subprocess.CompletedProcess, platform: str) -> None:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for process_id in (0, 1):
        assert (f"process {process_id}/2: 2 devices ({platform}), 1 local shard(s) match, "
                f"global sum") in result.stdout, result.stdout[-3000:]
    assert "exit codes [0, 0]" in result.stdout
