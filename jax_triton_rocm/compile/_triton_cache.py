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

Fork: a child forked while compiles were in flight has none running; it restores the knob
itself (see `_restore_after_fork`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from typing import Any

from jax_triton_rocm.base import _state

logger = logging.getLogger("jax_triton_rocm")

ENV_CACHE_DIR = "TRITON_CACHE_DIR"
_MISSING = object()

_in_flight = 0
_saved: Any = _MISSING  # the knob's own `__dict__` entry before the override
_warned = False


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
def usable_cache_dir(triton: Any) -> Iterator[None]:
    """Runs the body with a cache directory Triton can use, for `triton.compile`.

    Does nothing when Triton already has one (the usual case: no lock taken).
    """
    global _in_flight, _saved
    cache_knobs = triton.knobs.cache
    if _in_flight == 0 and not needs_default_dir(cache_knobs):
        yield
        return
    with _state.LOCKS.lock_for("triton-cache-dir"):
        overriding = _in_flight > 0 or needs_default_dir(cache_knobs)
        if overriding:
            if _in_flight == 0:
                directory = default_dir(cache_knobs)
                _saved = vars(cache_knobs).get("dir", _MISSING)
                vars(cache_knobs)["dir"] = directory  # bypasses Triton's write to os.environ
                _warn_once(directory)
            _in_flight += 1
    if not overriding:
        yield
        return
    try:
        yield
    finally:
        with _state.LOCKS.lock_for("triton-cache-dir"):
            _in_flight -= 1
            if _in_flight == 0:
                _restore(cache_knobs)


def _restore(cache_knobs: Any) -> None:
    global _saved
    if _saved is _MISSING:
        vars(cache_knobs).pop("dir", None)
    else:
        vars(cache_knobs)["dir"] = _saved
    _saved = _MISSING


def _restore_after_fork() -> None:
    """In a child forked mid-compile: no compile runs here, so the knob goes back as it was."""
    global _in_flight
    if _in_flight:
        import triton

        _restore(triton.knobs.cache)
        _in_flight = 0


os.register_at_fork(after_in_child=_restore_after_fork)
