"""Cache and dump folders Triton can use for the package's compiles, and Triton's key remembered
beside its cache. Why, threads and fork: docs/design.md, "Triton's cache"."""

from __future__ import annotations

import errno
import functools
import hashlib
import logging
import os
import re
import shutil
import sysconfig
import tempfile
from collections.abc import Callable
from typing import Any, TypeVar

from jax_triton_rocm.base import _env, _files, _state

logger = logging.getLogger("jax_triton_rocm")

# The folders of Triton's that a compile writes: knob name -> the variable that sets it, and
# what a message calls the folder.
FOLDER_VARIABLES = {"dir": _env.TRITON_CACHE_DIR, "dump_dir": _env.TRITON_DUMP_DIR}
_KINDS = {"dir": "cache", "dump_dir": "dump"}
_MISSING = object()

T = TypeVar("T")

_in_flight = 0
_saved: dict[str, Any] = {}  # the knobs' own `__dict__` entries before the override
# Knob name -> the folder compiles use while the user's is unwritable: the cache folder until the
# last compile in flight ends, the dump folder for the life of the process.
_private: dict[str, str] = {}
# Errors that name no path but come from writing the cache's files.
_FULL_DISK = (errno.ENOSPC, errno.EDQUOT)

FOLDER_NAME = "jax_triton_rocm_triton_key"
_MAX_BYTES = 1 << 16
# Triton's key: its version, then one sha256 per file it hashed, joined by "-".
_HASHES = re.compile(r"[0-9a-f]{64}(?:-[0-9a-f]{64})*")
_tried: list[int] = []  # the process ids that have looked for the key (a forked child looks again)


def needs_default_dir(cache_knobs: Any) -> bool:
    """Whether Triton's file cache has no folder to use (a custom cache manager may need none)."""
    return cache_knobs.manager_class is None and not cache_knobs.dir


def compile_in_usable_cache(triton: Any, compile_fn: Callable[[], T]) -> T:
    """`compile_fn()` (a `triton.compile`) with cache and dump folders Triton can use (where one
    cannot be written, again with it private, after one warning) and Triton's key remembered.
    Raises what `compile_fn` raises, other than the unwritable folders' OSError."""
    private: tuple[str, ...] = ()
    warning: tuple | None = None  # for the last failure: (knob, folder, error, reason)
    while True:
        cache_knobs = _override(triton, private)
        try:
            if warning is not None:  # here, where the private folder it names exists
                _warn_unwritable(*warning)
            remember_triton_key()
            if cache_knobs.manager_class is None and cache_knobs.dir:
                _files.warn_if_others_can_write(cache_knobs.dir, functools.partial(
                    setting, "dir"), _env.TRITON_CACHE_DIR)
            return compile_fn()
        except OSError as err:
            folders = {"dir": cache_knobs.dir}
            if getattr(getattr(triton.knobs, "compilation", None), "dump_ir", False):
                folders["dump_dir"] = cache_knobs.dump_dir
            failing = next(((name, reason) for name, directory in folders.items() if directory
                            and (reason := unwritable_reason(err, directory)) is not None), None)
            if failing is None or failing[0] in private:
                if warning is not None:
                    raise err from warning[2]
                raise
            name, reason = failing
            warning = (name, getattr(cache_knobs, name), err, reason)
            private = (*private, name)
        finally:
            _release(cache_knobs)


def _override(triton: Any, private: tuple[str, ...]) -> Any:
    """Triton's cache knobs, one more compile counted in flight, with Triton's default cache
    folder where it has none and private folders for the knobs `private` names ("dir",
    "dump_dir"), until the last compile in flight ends (`_release`)."""
    global _in_flight, _saved
    cache_knobs = triton.knobs.cache
    with _state.LOCKS.triton_cache_dir:
        default = needs_default_dir(cache_knobs)
        if (default or private) and not _saved:
            _saved = {name: vars(cache_knobs).get(name, _MISSING) for name in FOLDER_VARIABLES}
        if default:
            directory = cache_knobs.get_triton_dir("cache")
            vars(cache_knobs)["dir"] = directory  # bypasses Triton's write to os.environ
            if _state.first_warning("no Triton cache folder"):
                logger.warning(
                    "jax_triton_rocm: %s is set to %r (jax-triton 0.3 sets it to '' when "
                    "imported), which leaves Triton no cache directory. The package's Triton "
                    "compiles use Triton's default location %s instead; the environment is not "
                    "changed. Set %s to a writable folder to choose another.",
                    _env.TRITON_CACHE_DIR, _env.as_set(_env.TRITON_CACHE_DIR), directory,
                    _env.TRITON_CACHE_DIR)
        for name in private:
            if name not in _private:
                _private[name] = tempfile.mkdtemp(prefix=f"jax_triton_rocm_triton_{_KINDS[name]}_")
            vars(cache_knobs)[name] = _private[name]
        _in_flight += 1
    return cache_knobs


def _release(cache_knobs: Any) -> None:
    """One compile ends; the last gives the knobs back and removes the private cache folder."""
    global _in_flight
    with _state.LOCKS.triton_cache_dir:
        _in_flight -= 1
        if _in_flight == 0:
            if _saved:  # something was overridden
                _restore(cache_knobs)
            if "dir" in _private:
                shutil.rmtree(_private.pop("dir"), ignore_errors=True)


def _restore(cache_knobs: Any) -> None:
    global _saved
    for name, saved in _saved.items():
        if saved is _MISSING:
            vars(cache_knobs).pop(name, None)
        else:
            vars(cache_knobs)[name] = saved
    _saved = {}


def unwritable_reason(err: OSError, directory: str) -> str | None:
    """Why `err`, raised by a compile, means `directory` cannot be made or written; None where it
    is about something else."""
    if err.filename is None and err.errno in _FULL_DISK:
        return str(err)
    folder = os.path.abspath(directory)
    for path in (err.filename, err.filename2):
        if isinstance(path, (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(path))
            if (path == folder or path.startswith(folder + os.sep)
                    or folder.startswith(path.rstrip(os.sep) + os.sep)):
                return str(err).replace(path, shown_path(path))
    return None


def shown_path(path: str) -> str:
    """`path` as a message shows it: whole, or its ends and its length where it is long."""
    if len(path) <= 200:
        return path
    return f"{path[:80]}...{path[-60:]} ({len(path)} characters)"


def setting(name: str) -> str:
    """Which variable chose Triton's folder `name` ("dir", "dump_dir"), as a warning names it."""
    variable = FOLDER_VARIABLES[name]
    if (value := _env.as_set(variable)) is not None:
        return f"{variable}={shown_path(value)!r}"
    for home in (_env.TRITON_HOME, _env.HOME):
        if (value := _env.as_set(home)) is not None:
            return f"{variable} unset: Triton's default under {home}={shown_path(value)!r}"
    return f"{variable} unset: Triton's default"


def _warn_unwritable(name: str, directory: str, err: OSError, reason: str) -> None:
    """Logs once per folder and kind of failure that compiles go on without the folder."""
    if not _state.first_warning(("unwritable", directory, err.errno)):
        return
    instead = ("Kernels compile without it (in a private temporary folder, removed afterwards), "
               "so nothing is cached on disk" if name == "dir"
               else f"Triton's dumps go to {_private[name]} instead")
    logger.warning(
        "jax_triton_rocm: Triton's %s folder %s (%s) cannot be written: %s. %s; set %s to a "
        "writable folder.", _KINDS[name], shown_path(directory),
        setting(name), reason, instead, FOLDER_VARIABLES[name])


def installation_stamp(root: str) -> str:
    """A hash of the `stat` of every file under `root` (byte-code caches left out, which Triton
    does not hash), in a fixed order."""
    digest = hashlib.sha256(f"{sysconfig.get_config_var('EXT_SUFFIX')}\n".encode())
    for folder, folders, files in os.walk(root):
        folders[:] = sorted([name for name in folders if name != "__pycache__"])
        for name in sorted(files):
            path = os.path.join(folder, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            digest.update(f"{os.path.relpath(path, root)}\0{info.st_size}\0{info.st_ino}\0"
                          f"{info.st_dev}\0{info.st_mtime_ns}\0{info.st_ctime_ns}\n".encode())
    return digest.hexdigest()


def remember_triton_key() -> None:
    """Before a process's first compile: hands Triton its key remembered for this installation
    beside Triton's cache, or remembers the key Triton hashed (on any failure, Triton hashes)."""
    with _state.LOCKS.triton_key:
        if os.getpid() in _tried:
            return
        _tried.append(os.getpid())
        if not _env.remember_triton_key():
            return
        import triton
        from triton.runtime import cache

        original = cache.triton_key
        info = getattr(original, "cache_info", None)
        if info is None or info().currsize:
            return  # already computed in this process, or replaced by someone else
        try:
            knobs = triton.knobs.cache
            folder = os.path.join(knobs.dir or knobs.get_triton_dir("cache"), FOLDER_NAME)
            root = os.path.dirname(os.path.dirname(os.path.abspath(cache.__file__)))
            name, version = f"{installation_stamp(root)}.key", triton.__version__
            try:
                data = _files.private_file(folder, name, _MAX_BYTES)
                if data is None:
                    return  # other users can write the folder: neither read nor written
                key = data.decode("ascii")
                if not (key.startswith(version) and _HASHES.fullmatch(key[len(version):])):
                    raise ValueError(f"not a key of Triton {version}")
            except (OSError, ValueError) as err:
                if not isinstance(err, FileNotFoundError):
                    logger.debug("jax_triton_rocm: not using the remembered Triton key %s: %s",
                                 os.path.join(folder, name), err)
                computed = original()
                try:
                    _files.write_file((folder,), name, computed.encode("ascii"))
                except (OSError, ValueError) as err:
                    logger.debug("jax_triton_rocm: could not remember the Triton key in %s: %s",
                                 folder, err)
                return
        except Exception as err:  # noqa: BLE001 - Triton hashes its key itself, as without this
            logger.debug("jax_triton_rocm: remembering the Triton key failed: %s", err)
            return

        def triton_key() -> str:
            return key

        triton_key.cache_clear = original.cache_clear  # type: ignore[attr-defined]
        triton_key.__wrapped__ = original  # type: ignore[attr-defined]
        cache.triton_key = triton_key


def _restore_after_fork() -> None:
    """In a child forked mid-compile: the knob goes back; a private folder is the parent's."""
    global _in_flight
    if _in_flight:
        import triton

        _restore(triton.knobs.cache)
        _in_flight = 0
    _private.pop("dir", None)


_state.on_fork(_restore_after_fork)
