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

Unwritable: where Triton's cache folder cannot be written (read-only, a parent that is a file, a
full disk), `triton.compile` raises an OSError naming a path in it. `compile_in_usable_cache` then
compiles once more with the knob pointing at a private temporary folder, shared by the compiles
in flight and removed when the last one ends, and logs one warning naming `TRITON_CACHE_DIR` and
the reason. Nothing of it is remembered: the next compile tries the folder again, so a folder
made writable in a running process caches again from its next compile.

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
_MISSING = object()

T = TypeVar("T")

_in_flight = 0
_saved: Any = _MISSING  # the knob's own `__dict__` entry before the override
_private: str | None = None  # the private folder compiles use while the cache is unwritable
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
def usable_cache_dir(triton: Any, *, private: bool = False) -> Iterator[None]:
    """Runs the body with a cache directory Triton can use, for `triton.compile`.

    Does nothing when Triton already has one (the usual case: no lock taken). With `private`,
    the cache is a private temporary folder, removed when the last compile using it ends.
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


def _enter(cache_knobs: Any, private: bool) -> bool:
    """Points the knob at the default or a private folder, or joins the override in force;
    returns whether this compile counts as one in flight (False: no override needed)."""
    global _in_flight, _saved, _private
    with _state.LOCKS.lock_for("triton-cache-dir"):
        if not (private or _in_flight > 0 or needs_default_dir(cache_knobs)):
            return False
        if _in_flight == 0:
            _saved = vars(cache_knobs).get("dir", _MISSING)
            if not private:
                directory = default_dir(cache_knobs)
                vars(cache_knobs)["dir"] = directory  # bypasses Triton's write to os.environ
                _warn_once(directory)
        if private and _private is None:
            _private = tempfile.mkdtemp(prefix="jax_triton_rocm_triton_cache_")
            vars(cache_knobs)["dir"] = _private
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
    if _saved is _MISSING:
        vars(cache_knobs).pop("dir", None)
    else:
        vars(cache_knobs)["dir"] = _saved
    _saved = _MISSING


def unwritable_reason(err: OSError, directory: str) -> str | None:
    """Why `err`, raised by a compile, means the cache folder `directory` cannot be written;
    None where it is about something else."""
    if err.filename is None and err.errno in _FULL_DISK:
        return str(err)
    folder = os.path.abspath(directory)
    for path in (err.filename, err.filename2):
        if isinstance(path, (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(path))
            if path == folder or path.startswith(folder + os.sep):
                return str(err)
    return None


def _warn_unwritable(directory: str, err: OSError, reason: str) -> None:
    """Logs once per folder and kind of failure that compiles go on without the cache."""
    with _state.LOCKS.guard:
        if (directory, err.errno) in _warned_unwritable:
            return
        _warned_unwritable.add((directory, err.errno))
    setting = (f"{ENV_CACHE_DIR}={os.environ[ENV_CACHE_DIR]!r}" if ENV_CACHE_DIR in os.environ
               else f"{ENV_CACHE_DIR} unset, Triton's default")
    logger.warning(
        "jax_triton_rocm: Triton's cache folder %s (%s) cannot be written: %s. Kernels compile "
        "without it (in a private temporary folder, removed afterwards), so nothing is cached on "
        "disk; set %s to a writable folder to cache again.", directory, setting, reason,
        ENV_CACHE_DIR)


def compile_in_usable_cache(triton: Any, compile_fn: Callable[[], T]) -> T:
    """Runs `compile_fn` (which calls `triton.compile`) with a cache directory Triton can use.

    Where the cache folder cannot be written, runs it once more with the cache in a private
    temporary folder (see the module's docstring), after one warning.

    Raises:
      whatever `compile_fn` raises, other than the unwritable cache's OSError.
    """
    with usable_cache_dir(triton):
        directory = triton.knobs.cache.dir
        try:
            return compile_fn()
        except OSError as err:
            reason = unwritable_reason(err, directory)
            if reason is None:
                raise
            failure = err
    _warn_unwritable(directory, failure, reason)
    with usable_cache_dir(triton, private=True):
        try:
            return compile_fn()
        except OSError as err:
            raise err from failure


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
