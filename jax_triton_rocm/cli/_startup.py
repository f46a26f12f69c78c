"""JAX's start-up, as the command line explains it: `start()` starts JAX's backends, each failure
logged turned into a `Problem` (what failed, the likely cause, the fix). The package's
`__init__` imports it before JAX: nothing heavy is imported here.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
from typing import Any

from jax_triton_rocm.backends import _no_gpu, _vendors
from jax_triton_rocm.backends._no_gpu import Problem

PROG = "python -m jax_triton_rocm"
# The command line's exit statuses; docs/cli.md's table lists them.
EXIT_OK = 0
EXIT_DEMO_FAILED = 1
EXIT_USAGE = 2
EXIT_JAX_DID_NOT_START = 3
EXIT_NO_TRITON = 4


@dataclasses.dataclass(frozen=True)
class Startup:
    """How JAX's start-up went: the backends started, why none could start (`failure`, and the
    exception, `error`), the plugins that failed, and JAX's other warnings, one line each."""

    platforms: tuple[str, ...]
    failure: Problem | None
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]
    error: BaseException | None = None


def first_line(err: BaseException) -> str:
    """"Type: first line" of `err`."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def error_summary(err: BaseException) -> str:
    """"Type: first line" of `err`, and of its root cause where that is another exception."""
    def line(e: BaseException) -> str:
        return first_line(e) if str(e).strip() else type(e).__name__

    root = err
    while (root.__cause__ or root.__context__) is not None:
        root = root.__cause__ or root.__context__
    summary, cause = line(err), line(root).split(": ", 1)[-1]
    return summary if root is err or cause in summary else f"{summary} (from {line(root)})"


def _plugin_problem(module: str, err: BaseException | None, imported: bool) -> Problem:
    """A jaxlib plugin (or this package's hook) that failed to import or to initialize."""
    summary = error_summary(err) if err is not None else "no error given"
    if module.startswith("jax_triton_rocm"):
        return Problem(f"jax_triton_rocm's plugin hook failed: {summary}",
                       "a broken or partial install of jax_triton_rocm or of jax",
                       "reinstall it with a supported jax (pip install --force-reinstall "
                       "jax_triton_rocm); `python -m jax_triton_rocm info` shows the versions.")
    platform = next((p for p in sorted(_vendors.GPU_PLATFORMS, key=lambda p: p != "rocm")
                     if re.search(_vendors.VENDORS[p].error_words, f"{module} {summary}", re.I)),
                    None)  # the platform whose stack the message names, ROCm's words first
    what = (f"JAX's plugin {module} failed to start: {summary}" if imported else
            f"JAX's plugin {module} could not be imported: {summary}")
    if not imported:
        cause = "the plugin does not match the installed jaxlib or Python, or lacks a library"
    elif platform == "cuda" and not _no_gpu.nvidia_gpu_visible():
        cause = ("no NVIDIA GPU or driver is visible here (nothing at /dev/nvidia*), and the CUDA "
                 "plugin's start-up checks (cuDNN, cuPTI) fail without one")
    elif platform == "cuda" and re.search(r"unable to load|not found|version", summary, re.I):
        cause = ("the CUDA plugin is installed without NVIDIA's CUDA libraries (cuDNN, cuPTI, ...)"
                 ", e.g. `pip install jax-cuda13-plugin` alone, or with versions it does not take")
    elif platform == "rocm":
        cause = "the ROCm plugin cannot load the ROCm runtime (libamdhip64, ...) it was built for"
    else:
        cause = "a plugin that does not match this jaxlib, or a broken install"
    fix = (f"On a machine with the GPU, install JAX with its plugin in one command so that the "
           f"versions match: {_vendors.VENDORS[platform or 'cuda'].install_hint}. "
           + _no_gpu.without_plugin(platform or "cuda"))
    return Problem(what, cause, fix, platform)


def _plugin_module_of(err: BaseException | None) -> str:
    """The `jax_plugins` module an import error came from (JAX's message may omit it)."""
    import traceback

    frames = traceback.extract_tb(err.__traceback__) if err is not None else []
    for frame in reversed(frames):
        match = re.search(r"/jax_plugins/(\w+)/", frame.filename)
        if match:
            return f"jax_plugins.{match.group(1)}"
    return getattr(err, "name", None) or "a jax_plugins module"


def _problem_from(record: logging.LogRecord) -> Problem | None:
    err = record.exc_info[1] if record.exc_info else None
    message = record.getMessage()
    if record.name.startswith("jax_triton_rocm"):
        return _plugin_problem("jax_triton_rocm._plugin", err, imported=True)
    if "Jax plugin configuration error" in message:
        module = str(record.args[0]) if record.args else _plugin_module_of(err)
        return _plugin_problem(module, err, imported="initialize()" in message)
    if "CUDA-enabled jaxlib is not installed" in message:
        return Problem("JAX sees an NVIDIA GPU but has no CUDA plugin, so it runs on the CPU",
                       "JAX was installed without its CUDA plugin (`pip install jax`)",
                       _vendors.VENDORS["cuda"].install_hint, "cuda")
    if "backend failed to initialize" in message:
        return Problem(message.split(".(")[0], "the GPU, its driver or its memory is not usable",
                       "check the GPU and its driver (nvidia-smi).", "cuda")
    return None


def one_line(record: logging.LogRecord) -> str:
    """`record`'s message's first line, and the summary of the error it carries."""
    err = record.exc_info[1] if record.exc_info else None
    text = (record.getMessage().strip().splitlines() or [""])[0]
    return text + (f" ({error_summary(err)})" if err is not None else "")


def start() -> Startup:
    """Starts JAX's backends (once per process), catching its messages; never raises."""
    from jax._src import xla_bridge

    records: list[logging.LogRecord] = []

    def keep(record: logging.LogRecord) -> bool:  # WARNING and above: kept, not printed
        if record.levelno >= logging.WARNING:
            records.append(record)
        return record.levelno < logging.WARNING

    loggers = [logging.getLogger(name) for name in ("jax._src.xla_bridge", "jax_triton_rocm")]
    for logger in loggers:
        logger.addFilter(keep)
    try:
        started: Any = xla_bridge.backends()
        error = None
    except Exception as err:  # noqa: BLE001  (AssertionError too: reported, not raised)
        started, error = {}, err
    finally:
        for logger in loggers:
            logger.removeFilter(keep)
    found = [(_problem_from(record), record) for record in records]
    problems = tuple(dict.fromkeys(problem for problem, _ in found if problem is not None))
    notes = tuple(one_line(record) for problem, record in found if problem is None)
    failure = None if error is None else _failure(error, problems)
    return Startup(tuple(sorted(started)), failure, problems, notes, error)


def _failure(err: BaseException, problems: tuple[Problem, ...]) -> Problem:
    """Why JAX could not start any backend."""
    setting = _no_gpu.jax_platforms()
    match = re.search(r"Unable to initialize backend '(\w+)'", str(err))
    if match:
        platform = match.group(1)
    elif isinstance(err, AssertionError):
        # JAX skips "cuda" without a visible NVIDIA GPU, and then has no backend to default to.
        named = _no_gpu.named_platforms()
        platform = "cuda" if "cuda" in named else next(iter(named), "?")
    else:
        return Problem(f"JAX could not start: {error_summary(err)}",
                       "an error inside JAX or one of its plugins",
                       "run `python -c 'import jax; jax.devices()'` to see JAX's own error, and "
                       "reinstall JAX with the plugin for your GPU.")
    cause, fix = _no_gpu.why_not_started(platform, problems)
    what = (f"JAX could not start: JAX_PLATFORMS={setting!r} asks for {platform}, which did "
            f"not start ({error_summary(err)})." if setting else
            f"JAX could not start its {platform} backend ({error_summary(err)}).")
    if "JAX_PLATFORMS=cpu" not in fix:
        fix += (" Or set JAX_PLATFORMS=cpu (or unset it) to run on the CPU and cross-compile here."
                if setting else " " + _no_gpu.without_plugin(platform))
    return Problem(what, cause, fix, platform)


def _jax_import_problem(err: BaseException) -> Problem:
    """What to tell about `import jax` failing with `err`."""
    what = f"JAX could not be imported: {error_summary(err)}"
    missing = getattr(err, "name", None) if isinstance(err, ModuleNotFoundError) else None
    if missing == "jax":
        return Problem(what, f"JAX is not installed in this Python ({sys.executable})",
                       "pip install -U jax (with its GPU plugin on a GPU machine: "
                       "docs/installation.md says which).")
    if missing:
        return Problem(what, f"{missing}, which JAX needs, is missing",
                       f"pip install -U jax jaxlib (it installs {missing} too).")
    if re.search(r"jaxlib", str(err)) and re.search(r"version", str(err), re.I):
        return Problem(what, "the installed jax and jaxlib versions do not match",
                       "pip install -U jax jaxlib, so that both are of one release.")
    return Problem(what, "a broken install of JAX or of a package it needs (jaxlib, NumPy, "
                         "ml_dtypes), or one built for another Python or CPU",
                   "reinstall them: pip install --force-reinstall jax jaxlib.")


def exit_unless_jax_imports() -> None:
    """Under `python -m jax_triton_rocm` (without --traceback), where JAX does not import:
    prints what failed, the likely cause and the fix, and exits with status 3."""
    argv, module = sys.orig_argv, ""
    for index, arg in enumerate(argv[1:], 1):
        if arg.startswith("-m"):
            module = arg[2:] or (argv[index + 1] if index + 1 < len(argv) else "")
            break
    if module.split(".")[0] != __name__.split(".")[0] or "--traceback" in sys.argv[1:]:
        return
    try:
        import jax  # noqa: F401
    except Exception as err:  # noqa: BLE001  (a JAX that fails to import, however it fails)
        print(f"{PROG}: error: {_jax_import_problem(err).text()}", file=sys.stderr)
        sys.exit(EXIT_JAX_DID_NOT_START)
