"""Files in cache and store folders, read and written as a careful system does.

Any file in Triton's cache or the autotune store may have been put there by someone else, so
only a regular file directly inside the folder expected is read: never through a link, never a
FIFO or a device (each is refused before it is opened; a read never waits), and never more than
a bound. Folders are written only where they are the user's own and no link; new folders are
made for the owner to write. A folder the package reads back from that other users can write is
named in one warning (ssh's rule for its key folders: owned by the user or root, and writable
by no one else). See docs/troubleshooting.md.

Triton's own cache and dump folders, for the package's compiles (`compile_in_usable_cache`):
Triton's default where the environment leaves it none, a private one where it cannot be
written. Threads and fork: docs/design.md, "Triton's cache".
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import shutil
import stat
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from jax_triton_rocm.base import _env, _state

logger = logging.getLogger("jax_triton_rocm")

_READ_CHUNK = 1 << 20
# Made for the owner to write and everyone to read, whatever the umask allows beyond that.
_FOLDER_MODE = 0o755
_FILE_MODE = 0o644
_warned_unsafe: set[str] = set()


class RefusedFile(ValueError):
    """A path in a cache or store folder that is not read or written (not a regular file, a
    link, another user's folder, larger than its bound)."""


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "no regular file"


def _open_folder(path: str, dir_fd: int | None = None) -> int:
    """A descriptor of the folder `path` (its last part no link)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                       dir_fd=dir_fd)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            try:
                mode = os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode
            except OSError:
                raise err from None
            raise RefusedFile(f"{os.fsdecode(path)} is {_kind(mode)}, not a folder") from err
        raise


def read_entry_file(directory: str, name: str, limit: int) -> bytes:
    """The bytes of the regular file `name` directly inside the folder `directory`.

    Neither `directory`'s last part nor `name` may be a link; anything but a regular file is
    refused before it is opened, and the file is opened without waiting (a FIFO swapped in
    after the check is refused, not read).

    Raises:
      FileNotFoundError: nothing is there.
      RefusedFile: `name` is no plain file name, or the path is not a regular file, or the file
        holds more than `limit` bytes.
      OSError: the file cannot be read.
    """
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise RefusedFile(f"{name!r} is not the name of a file directly inside {directory}")
    folder_fd = _open_folder(directory)
    try:
        before = os.stat(name, dir_fd=folder_fd, follow_symlinks=False)
        if not stat.S_ISREG(before.st_mode):
            raise RefusedFile(f"{_kind(before.st_mode)}, not a regular file")
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     dir_fd=folder_fd)
    finally:
        os.close(folder_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RefusedFile(f"{_kind(info.st_mode)}, not a regular file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(_READ_CHUNK, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:
        raise RefusedFile(f"larger than {limit} bytes")
    return b"".join(chunks)


def parse_json(data: bytes) -> Any:
    """The JSON value `data` holds.

    Raises:
      ValueError: no UTF-8 JSON, or nested too deeply for the parser (its RecursionError).
    """
    try:
        return json.loads(data)  # UnicodeDecodeError and JSONDecodeError are ValueErrors
    except RecursionError as err:
        raise ValueError("JSON nested too deeply to parse") from err


def others_can_write(folder: str) -> str | None:
    """Why users other than this one (and root) can change what `folder` holds, or None.

    ssh's rule: the folder and every folder above it are owned by this user or root; the folder
    is writable by neither its group nor others, and a folder above it only where its sticky
    bit keeps others from renaming what they do not own (as /tmp's does). A folder not made
    yet is judged by the folders above it.
    """
    me = os.geteuid()
    path = os.path.abspath(folder)
    last = True
    while True:
        try:
            info = os.stat(path)
        except OSError:
            info = None
        if info is not None:
            if info.st_uid not in (me, 0):
                return f"{path} is owned by user id {info.st_uid}"
            writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
            if writable and (last or not info.st_mode & stat.S_ISVTX):
                return f"{path} has mode {stat.S_IMODE(info.st_mode):o}"
        last = False
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def warn_if_others_can_write(folder: str, setting: Callable[[], str], variable: str) -> None:
    """Logs once per folder where others can write `folder`, which the setting `setting()` names
    chose (e.g. "TRITON_CACHE_DIR='/x'"; asked only to warn) and `variable` can move."""
    if folder in _warned_unsafe:
        return
    problem = others_can_write(folder)
    if problem is None:
        return
    _warned_unsafe.add(folder)
    logger.warning(
        "jax_triton_rocm: the folder %s (%s) can be written by other users (%s): they could "
        "replace the kernels or autotune choices read back from it. Make it and the folders "
        "above it yours and writable by you alone (chmod go-w), or set %s to a folder of your "
        "own.", folder, setting(), problem, variable)


@contextlib.contextmanager
def own_folder(path: str, dir_fd: int | None = None) -> Iterator[int]:
    """A descriptor of the folder `path` (inside `dir_fd` where given), made if missing, for
    writing into.

    Raises:
      RefusedFile: `path` is a link, no folder, or owned by another user.
      OSError: it cannot be made or opened.
    """
    if dir_fd is None:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, _FOLDER_MODE, dir_fd=dir_fd)
    fd = _open_folder(path, dir_fd)
    try:
        owner = os.fstat(fd).st_uid
        if owner != os.geteuid():
            raise RefusedFile(f"{os.fsdecode(path)} is owned by user id {owner}, not by this "
                              f"user ({os.geteuid()})")
        yield fd
    finally:
        os.close(fd)


def replace_file(folder_fd: int, name: str, data: bytes) -> None:
    """Writes `data` as `name` in the folder `folder_fd`, atomically: a temporary file there
    (`*.tmp`), then a rename over `name`.

    Raises:
      OSError: the folder cannot be written.
    """
    temporary = f"{name}.{uuid.uuid4().hex}.tmp"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 _FILE_MODE, dir_fd=folder_fd)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(data)
        os.replace(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder_fd)
        raise


def remove_stale_temporaries(folder: str, stale_seconds: float = 60) -> None:
    """Removes from `folder` (its last part no link) the temporary files `replace_file` leaves
    when its writer is killed mid-write: regular files (no links) named `*.tmp`, this user's,
    unchanged for `stale_seconds` (far longer than any writer of a small file takes).

    Raises:
      RefusedFile: `folder` is a link or no folder.
      OSError: it cannot be listed (a file that vanished meanwhile is no error).
    """
    stale = time.time() - stale_seconds
    folder_fd = _open_folder(folder)
    try:
        for entry in os.scandir(folder_fd):
            if not entry.name.endswith(".tmp"):
                continue
            with contextlib.suppress(FileNotFoundError):
                info = entry.stat(follow_symlinks=False)
                if (stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
                        and info.st_mtime < stale):
                    os.unlink(entry.name, dir_fd=folder_fd)
    finally:
        os.close(folder_fd)


# The folders of Triton's that a compile writes: knob name -> the variable that sets it.
FOLDER_VARIABLES = {"dir": _env.TRITON_CACHE_DIR, "dump_dir": _env.TRITON_DUMP_DIR}
_MISSING = object()

T = TypeVar("T")

_in_flight = 0
_saved: dict[str, Any] = {}  # the knobs' own `__dict__` entries before the override
_private: str | None = None  # the private folder compiles use while the cache is unwritable
_private_dump: str | None = None  # the private dump folder, kept for the life of the process
_warned_cache_dir = False
_warned_unwritable: set[tuple[str, int | None]] = set()
# Errors that name no path but come from writing the cache's files.
_FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def needs_default_dir(cache_knobs: Any) -> bool:
    """Whether Triton's file cache has no folder to use (a custom cache manager may need none)."""
    return cache_knobs.manager_class is None and not cache_knobs.dir


@contextlib.contextmanager
def usable_cache_dir(triton: Any, *, private: tuple[str, ...] = ()) -> Iterator[None]:
    """Runs the body with the folders Triton uses as they are, or Triton's default cache folder
    (`$TRITON_HOME/.triton/cache`, else `~/.triton/cache`) where it has none
    (`needs_default_dir`), or private folders for the knobs `private` names ("dir",
    "dump_dir"); the knobs go back as they were when the last compile in flight ends."""
    global _in_flight, _saved, _private, _private_dump, _warned_cache_dir
    cache_knobs = triton.knobs.cache
    with (lock := _state.LOCKS.triton_cache_dir):
        default = needs_default_dir(cache_knobs)
        if (default or private) and not _saved:
            _saved = {name: vars(cache_knobs).get(name, _MISSING) for name in FOLDER_VARIABLES}
        if default:
            directory = cache_knobs.get_triton_dir("cache")
            vars(cache_knobs)["dir"] = directory  # bypasses Triton's write to os.environ
            if not _warned_cache_dir:
                _warned_cache_dir = True
                logger.warning(
                    "jax_triton_rocm: %s is set to %r (jax-triton 0.3 sets it to '' when "
                    "imported), which leaves Triton no cache directory. The package's Triton "
                    "compiles use Triton's default location %s instead; the environment is not "
                    "changed. Set %s to a writable folder to choose another.",
                    _env.TRITON_CACHE_DIR, _env.as_set(_env.TRITON_CACHE_DIR), directory,
                    _env.TRITON_CACHE_DIR)
        if "dir" in private:
            _private = _private or tempfile.mkdtemp(prefix="jax_triton_rocm_triton_cache_")
            vars(cache_knobs)["dir"] = _private
        if "dump_dir" in private:
            _private_dump = _private_dump or tempfile.mkdtemp(prefix="jax_triton_rocm_triton_dump_")
            vars(cache_knobs)["dump_dir"] = _private_dump
        _in_flight += 1
    try:
        yield
    finally:
        with lock:
            _in_flight -= 1
            if _in_flight == 0:
                if _saved:  # something was overridden
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
    """Why `err`, raised by a compile, means the folder `directory` cannot be made or written;
    None where it is about something else."""
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


def _failing_folder(err: OSError, cache_knobs: Any) -> tuple[str, str] | None:
    """(knob name, reason) of the folder of Triton's that `err` says cannot be written; None
    where `err` is about no such folder (a full disk counts as the cache's)."""
    import triton

    folders = {"dir": cache_knobs.dir}
    if getattr(getattr(triton.knobs, "compilation", None), "dump_ir", False):
        folders["dump_dir"] = cache_knobs.dump_dir
    for name, directory in folders.items():
        reason = unwritable_reason(err, directory) if directory else None
        if reason is not None:
            return name, reason
    return None


def setting(name: str) -> str:
    """Which variable chose Triton's folder `name` ("dir", "dump_dir"), as a warning names it."""
    variable = FOLDER_VARIABLES[name]
    value = _env.as_set(variable)
    if value is not None:
        return f"{variable}={shown_path(value)!r}"
    for home in (_env.TRITON_HOME, _env.HOME):
        value = _env.as_set(home)
        if value is not None:
            return (f"{variable} unset: Triton's default under {home}="
                    f"{shown_path(value)!r}")
    return f"{variable} unset: Triton's default"


def _warn_unwritable(name: str, directory: str, err: OSError, reason: str) -> None:
    """Logs once per folder and kind of failure that compiles go on without the folder."""
    with _state.LOCKS.guard:
        if (directory, err.errno) in _warned_unwritable:
            return
        _warned_unwritable.add((directory, err.errno))
    if name == "dir":
        instead = ("Kernels compile without it (in a private temporary folder, removed "
                   "afterwards), so nothing is cached on disk")
    else:
        instead = f"Triton's dumps go to {_private_dump} instead"
    logger.warning(
        "jax_triton_rocm: Triton's %s folder %s (%s) cannot be written: %s. %s; set %s to a "
        "writable folder.", "cache" if name == "dir" else "dump", shown_path(directory),
        setting(name), reason, instead, FOLDER_VARIABLES[name])


def compile_in_usable_cache(triton: Any, compile_fn: Callable[[], T]) -> T:
    """Runs `compile_fn` (which calls `triton.compile`) with cache and dump folders Triton can
    use; where one cannot be made or written, again with that folder private, after one warning.

    Raises:
      whatever `compile_fn` raises, other than the unwritable folders' OSError."""
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
    """In a child forked mid-compile: the knob goes back as it was; a private folder is the
    parent's to remove."""
    global _in_flight, _private
    if _in_flight:
        import triton

        _restore(triton.knobs.cache)
        _in_flight = 0
    _private = None


_state.on_fork(_restore_after_fork)
