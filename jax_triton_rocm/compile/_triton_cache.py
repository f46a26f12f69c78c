"""A usable on-disk cache for the package's `triton.compile` calls, whatever the environment says.

jax-triton 0.3.1 sets `os.environ["TRITON_CACHE_DIR"] = ""` when it is imported (it compiles
without Triton's file cache). Triton 3.6-3.9 read that variable through `triton.knobs.cache.dir`
at every compile and, finding it empty, fail with "Could not create or locate cache dir". People
moving from jax-triton have both packages in one process, so the package's compiles use Triton's
default location (`triton.knobs.cache.get_triton_dir("cache")`, under `TRITON_HOME` or `~`)
while the variable is empty, and say so once.

How: while at least one of the package's compiles runs, the default goes in the knob object's
own `__dict__`, which Triton's knob descriptor reads before the environment. Writing the
attribute the ordinary way would also write `os.environ` (Triton propagates knobs to the
environment), and the user's environment must not change. When the last compile ends, the
knob is given back as it was.

Threads: compiles run in parallel threads; a count of compiles in flight, under one lock from
`_state.LOCKS`, makes the first one set the knob and the last one restore it. Another library's
compile that runs meanwhile also finds the default location instead of failing, which is the
only effect the override can have on it.

Unwritable: where Triton's cache folder cannot be made or written (read-only, under a file, too
long a path, a full disk; the folder given by `TRITON_CACHE_DIR` or Triton's default under
`TRITON_HOME` or `HOME`), `triton.compile` raises an OSError naming a path in it or above it.
`compile_in_usable_cache` then compiles once more with the knob pointing at a private temporary
folder, shared by the compiles in flight and removed when the last one ends, and logs one warning
naming the variable that chose the folder, the folder and the reason. Nothing of it is
remembered: the next compile tries the folder again, so a folder made writable in a running
process caches again from its next compile. Triton's dump folder (`TRITON_DUMP_DIR`, with
`TRITON_KERNEL_DUMP=1`) gets the same, with a private folder that is kept (it holds the dump
asked for) and named in the warning.

Fork: a child forked while compiles were in flight has none running; it restores the knob
itself and leaves a private folder to the parent (see `_restore_after_fork`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from jax_triton_rocm.base import _state

logger = logging.getLogger("jax_triton_rocm")

ENV_CACHE_DIR = "TRITON_CACHE_DIR"
# The folders of Triton's that a compile writes: knob name -> the variable that sets it.
FOLDER_VARIABLES = {"dir": ENV_CACHE_DIR, "dump_dir": "TRITON_DUMP_DIR"}
_MISSING = object()

T = TypeVar("T")

_in_flight = 0
_saved: dict[str, Any] = {}  # the knobs' own `__dict__` entries before the override
_private: str | None = None  # the private folder compiles use while the cache is unwritable
_private_dump: str | None = None  # the private dump folder, kept for the life of the process
_warned = False
_warned_unwritable: set[tuple[str, int | None]] = set()
# Errors that name no path but come from writing the cache's files.
_FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def needs_default_dir(cache_knobs: Any) -> bool:
    """Whether Triton's file cache has no directory to use (e.g. `TRITON_CACHE_DIR=""`).

    A custom `TRITON_CACHE_MANAGER` may need no directory, so it is left alone.
    """
    return cache_knobs.manager_class is None and not cache_knobs.dir


def default_dir(cache_knobs: Any) -> str:
    """Triton's default cache location: `$TRITON_HOME/.triton/cache`, else `~/.triton/cache`."""
    return cache_knobs.get_triton_dir("cache")


def _warn_once(directory: str) -> None:
    global _warned
    if _warned:
        return
    _warned = True
    logger.warning(
        "jax_triton_rocm: %s is set to %r (jax-triton 0.3 sets it to '' when imported), which "
        "leaves Triton no cache directory. The package's Triton compiles use Triton's default "
        "location %s instead; the environment is not changed. Set %s to a writable folder to "
        "choose another.", ENV_CACHE_DIR, os.environ.get(ENV_CACHE_DIR), directory,
        ENV_CACHE_DIR)


@contextlib.contextmanager
def usable_cache_dir(triton: Any, *, private: tuple[str, ...] = ()) -> Iterator[None]:
    """Runs the body with a cache directory Triton can use, for `triton.compile`.

    Does nothing when Triton already has one (the usual case: no lock taken). `private` names
    the knobs ("dir", "dump_dir") that point at private folders for the body: the cache's is
    removed when the last compile using it ends, the dump's is kept.
    """
    cache_knobs = triton.knobs.cache
    if not private and _in_flight == 0 and not needs_default_dir(cache_knobs):
        yield
        return
    if not _enter(cache_knobs, private):
        yield
        return
    try:
        yield
    finally:
        _leave(cache_knobs)


def _enter(cache_knobs: Any, private: tuple[str, ...]) -> bool:
    """Points the knobs at the default or private folders, or joins the override in force;
    returns whether this compile counts as one in flight (False: no override needed)."""
    global _in_flight, _saved, _private, _private_dump
    with _state.LOCKS.lock_for("triton-cache-dir"):
        if not (private or _in_flight > 0 or needs_default_dir(cache_knobs)):
            return False
        if _in_flight == 0:
            _saved = {name: vars(cache_knobs).get(name, _MISSING) for name in FOLDER_VARIABLES}
            if needs_default_dir(cache_knobs):
                directory = default_dir(cache_knobs)
                vars(cache_knobs)["dir"] = directory  # bypasses Triton's write to os.environ
                _warn_once(directory)
        if "dir" in private:
            if _private is None:
                _private = tempfile.mkdtemp(prefix="jax_triton_rocm_triton_cache_")
            vars(cache_knobs)["dir"] = _private
        if "dump_dir" in private:
            if _private_dump is None:
                _private_dump = tempfile.mkdtemp(prefix="jax_triton_rocm_triton_dump_")
            vars(cache_knobs)["dump_dir"] = _private_dump
        _in_flight += 1
        return True


def _leave(cache_knobs: Any) -> None:
    global _in_flight, _private
    with _state.LOCKS.lock_for("triton-cache-dir"):
        _in_flight -= 1
        if _in_flight == 0:
            _restore(cache_knobs)
            if _private is not None:
                shutil.rmtree(_private, ignore_errors=True)
                _private = None


def _restore(cache_knobs: Any) -> None:
    global _saved
    for name, saved in _saved.items():
        if saved is _MISSING:
            vars(cache_knobs).pop(name, None)
        else:
            vars(cache_knobs)[name] = saved
    _saved = {}


def unwritable_reason(err: OSError, directory: str) -> str | None:
    """Why `err`, raised by a compile, means the folder `directory` cannot be made or written
    (the error names a path in it, the folder itself, or a folder above it that is a file, read
    only or too long); None where it is about something else."""
    if err.filename is None and err.errno in _FULL_DISK:
        return str(err)
    folder = os.path.abspath(directory)
    for path in (err.filename, err.filename2):
        if isinstance(path, (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(path))
            if (path == folder or path.startswith(folder + os.sep)
                    or folder.startswith(path.rstrip(os.sep) + os.sep)):
                return _shortened(str(err), path)
    return None


def _shortened(text: str, path: str) -> str:
    """`text` with `path` in it shortened to its ends where it is too long to read."""
    return text.replace(path, shown_path(path)) if len(path) > 200 else text


def shown_path(path: str) -> str:
    """`path` as a message shows it: whole, or its ends and its length where it is long."""
    if len(path) <= 200:
        return path
    return f"{path[:80]}...{path[-60:]} ({len(path)} characters)"


def _failing_folder(err: OSError, cache_knobs: Any) -> tuple[str, str] | None:
    """(knob name, reason) of the folder of Triton's that `err` says cannot be written; None
    where `err` is about no such folder (a full disk counts as the cache's)."""
    folders = {"dir": cache_knobs.dir}
    if _compilation_dumps():
        folders["dump_dir"] = cache_knobs.dump_dir
    for name, directory in folders.items():
        reason = unwritable_reason(err, directory) if directory else None
        if reason is not None:
            return name, reason
    return None


def _compilation_dumps() -> bool:
    import triton

    return bool(getattr(getattr(triton.knobs, "compilation", None), "dump_ir", False))


def _setting(name: str, directory: str) -> str:
    """Which variable chose Triton's folder `name`, as the warning names it."""
    variable = FOLDER_VARIABLES[name]
    if variable in os.environ:
        return f"{variable}={shown_path(os.environ[variable])!r}"
    for home in ("TRITON_HOME", "HOME"):
        if home in os.environ:
            return (f"{variable} unset: Triton's default under {home}="
                    f"{shown_path(os.environ[home])!r}")
    return f"{variable} unset: Triton's default"


def _warn_unwritable(name: str, directory: str, err: OSError, reason: str) -> None:
    """Logs once per folder and kind of failure that compiles go on without the folder."""
    with _state.LOCKS.guard:
        if (directory, err.errno) in _warned_unwritable:
            return
        _warned_unwritable.add((directory, err.errno))
    variable = FOLDER_VARIABLES[name]
    if name == "dir":
        instead = ("Kernels compile without it (in a private temporary folder, removed "
                   "afterwards), so nothing is cached on disk")
    else:
        instead = f"Triton's dumps go to {_private_dump} instead"
    logger.warning(
        "jax_triton_rocm: Triton's %s folder %s (%s) cannot be written: %s. %s; set %s to a "
        "writable folder.", "cache" if name == "dir" else "dump", shown_path(directory),
        _setting(name, directory), reason, instead, variable)


def compile_in_usable_cache(triton: Any, compile_fn: Callable[[], T]) -> T:
    """Runs `compile_fn` (which calls `triton.compile`) with cache and dump folders Triton can
    use.

    Where one cannot be made or written, runs it again with that folder private (see the
    module's docstring), after one warning; the cache and the dump folder may both need it.

    Raises:
      whatever `compile_fn` raises, other than the unwritable folders' OSError.
    """
    private: tuple[str, ...] = ()
    failure: OSError | None = None
    warning: tuple | None = None
    while True:
        with usable_cache_dir(triton, private=private):
            cache_knobs = triton.knobs.cache
            if warning is not None:  # here, where the private folder it names exists
                _warn_unwritable(*warning)
            try:
                return compile_fn()
            except OSError as err:
                failing = _failing_folder(err, cache_knobs)
                if failing is None or failing[0] in private:
                    if failure is not None:
                        raise err from failure
                    raise
                name, reason = failing
                warning = (name, getattr(cache_knobs, name), err, reason)
                private, failure = (*private, name), err


def _restore_after_fork() -> None:
    """In a child forked mid-compile: no compile runs here, so the knob goes back as it was; a
    private folder is the parent's to remove."""
    global _in_flight, _private
    if _in_flight:
        import triton

        _restore(triton.knobs.cache)
        _in_flight = 0
    _private = None


os.register_at_fork(after_in_child=_restore_after_fork)
