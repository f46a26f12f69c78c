"""Files in cache and store folders, which anyone may have written: read only as regular files
directly inside the folder expected, bounded; written only into the user's own folders
(docs/design.md, "Triton's cache"; docs/troubleshooting.md).
"""
from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import stat
import time
import uuid
from collections.abc import Callable
from typing import Any

from jax_triton_rocm.base import _state

logger = logging.getLogger("jax_triton_rocm")

_READ_CHUNK = 1 << 20
# The folders Triton's `FileCacheManager.put` writes into an entry's folder, one per file; one
# may hold this many files to be swept (`put` writes one into each).
TEMPORARY_FOLDER_PREFIX = "tmp.pid_"
_MAX_FILES_SWEPT = 16
# Made for the owner to write and everyone to read, whatever the umask allows beyond that.
_FOLDER_MODE = 0o755
_FILE_MODE = 0o644


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
    """The bytes of the regular file `name` directly inside the folder `directory`, at most
    `limit`; a `RefusedFile` for more, a link or anything but a regular file (opened without
    waiting: a FIFO swapped in is refused, not read); FileNotFoundError, OSError."""
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


def read_entry_files(directory: str, names: list[str], limit: int) -> list[bytes | Exception]:
    """Each of `names` read as `read_entry_file` reads it, or the OSError or ValueError (a
    `RefusedFile` among them) that it raised."""
    found: list[bytes | Exception] = []
    for name in names:
        try:
            found.append(read_entry_file(directory, name, limit))
        except (OSError, ValueError) as err:
            found.append(err)
    return found


def parse_json(data: bytes) -> Any:
    """The JSON value `data` holds; a ValueError for no UTF-8 JSON or JSON nested too deeply for
    the parser (its RecursionError)."""
    try:
        return json.loads(data)  # UnicodeDecodeError and JSONDecodeError are ValueErrors
    except RecursionError as err:
        raise ValueError("JSON nested too deeply to parse") from err


def private_file(folder: str, name: str, limit: int) -> bytes | None:
    """`read_entry_file(folder, name, limit)` where no other user can change what `folder`
    holds (`others_can_write`), after removing the temporary files of writers killed mid-write
    (`remove_stale_temporaries`); None where others can write it."""
    if others_can_write(folder) is not None:
        return None
    with contextlib.suppress(OSError, ValueError):
        remove_stale_temporaries(folder)
    return read_entry_file(folder, name, limit)


def others_can_write(folder: str) -> str | None:
    """Why users other than this one (and root) can change what `folder` holds, or None, by
    ssh's rule (docs/troubleshooting.md); a folder not made yet is judged by those above it."""
    path, last = os.path.abspath(folder), True
    while True:
        try:
            info = os.stat(path)
        except OSError:  # not made yet
            info = None
        if info is not None and info.st_uid not in (os.geteuid(), 0):
            return f"{path} is owned by user id {info.st_uid}"
        if info is not None and info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and (
                last or not info.st_mode & stat.S_ISVTX):
            return f"{path} has mode {stat.S_IMODE(info.st_mode):o}"
        last, parent = False, os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def warn_if_others_can_write(folder: str, setting: Callable[[], str], variable: str) -> None:
    """Logs once per folder where others can write `folder`, which the setting `setting()` names
    chose (e.g. "TRITON_CACHE_DIR='/x'"; asked only to warn) and `variable` can move."""
    if (problem := others_can_write(folder)) is None or not _state.first_warning(
            ("others can write", folder)):
        return
    logger.warning(
        "jax_triton_rocm: the folder %s (%s) can be written by other users (%s): they could "
        "replace the kernels or autotune choices read back from it. Make it and the folders "
        "above it yours and writable by you alone (chmod go-w), or set %s to a folder of your "
        "own.", folder, setting(), problem, variable)


def write_file(folders: tuple[str, ...], name: str, data: bytes) -> None:
    """Writes `data` as `name` in the last of `folders` (each after the first a folder inside
    the one before), atomically: a temporary file there (`*.tmp`), then a rename over `name`.
    Each folder is made if missing and must be this user's and no link (else `RefusedFile`)."""
    fds: list[int] = []
    try:
        for path in folders:
            dir_fd = fds[-1] if fds else None
            if dir_fd is None:
                os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, _FOLDER_MODE, dir_fd=dir_fd)
            fds.append(_open_folder(path, dir_fd))
            owner = os.fstat(fds[-1]).st_uid
            if owner != os.geteuid():
                raise RefusedFile(f"{os.fsdecode(path)} is owned by user id {owner}, not by this "
                                  f"user ({os.geteuid()})")
        temporary = f"{name}.{uuid.uuid4().hex}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, _FILE_MODE, dir_fd=fds[-1])
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temporary, name, src_dir_fd=fds[-1], dst_dir_fd=fds[-1])
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=fds[-1])
            raise
    finally:
        for folder_fd in fds:
            os.close(folder_fd)


def remove_stale_temporaries(folder: str, stale_seconds: float = 60) -> None:
    """Removes from `folder` (a link or no folder is a `RefusedFile`) what writers killed
    mid-write, or whose write failed, left there, this user's and unchanged for `stale_seconds`:
    `write_file`'s `*.tmp` files and Triton's `TEMPORARY_FOLDER_PREFIX*` folders of a few regular
    files, never a link (docs/design.md, "Triton's cache"); nothing else."""
    stale = time.time() - stale_seconds
    folder_fd = _open_folder(folder)
    try:
        for entry in os.scandir(folder_fd):
            if entry.name.startswith(TEMPORARY_FOLDER_PREFIX):
                with contextlib.suppress(OSError, ValueError):
                    _remove_stale_folder(folder_fd, entry.name, stale)
            elif entry.name.endswith(".tmp"):
                with contextlib.suppress(FileNotFoundError):
                    info = entry.stat(follow_symlinks=False)
                    if (stat.S_ISREG(info.st_mode) and info.st_uid == os.geteuid()
                            and info.st_mtime < stale):
                        os.unlink(entry.name, dir_fd=folder_fd)
    finally:
        os.close(folder_fd)


def _remove_stale_folder(parent_fd: int, name: str, stale: float) -> None:
    """Removes the folder `name` of `parent_fd` and its files where all are this user's, regular
    and older than `stale` (a time); else leaves it whole."""
    folder_fd = _open_folder(name, parent_fd)
    try:
        info = os.fstat(folder_fd)
        if info.st_uid != os.geteuid() or info.st_mtime >= stale:
            return
        files = []
        with os.scandir(folder_fd) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                if (len(files) == _MAX_FILES_SWEPT or not stat.S_ISREG(info.st_mode)
                        or info.st_uid != os.geteuid() or info.st_mtime >= stale):
                    return
                files.append(entry.name)
        for file_name in files:
            os.unlink(file_name, dir_fd=folder_fd)
    finally:
        os.close(folder_fd)
    os.rmdir(name, dir_fd=parent_fd)
