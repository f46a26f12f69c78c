"""The autotune store's files: read without blocking, checked, written atomically, swept.

`routes._target` keeps one small JSON file per choice. A reader opens only regular files, never
waits on what it opens (a FIFO put at a choice's path is refused, not read), and reads a bounded
size; a record is checked field by field before it is used; a writer writes a temporary file
and renames it over the choice, so a reader never sees half a file; the temporary files of
writers killed mid-write are removed once they are old enough to belong to no live writer.
"""

from __future__ import annotations

import json
import math
import os
import stat
import tempfile
import time
from typing import Any


def sweep(folder: str, stale_seconds: float) -> None:
    """Removes the writers' temporary files (`*.tmp`) older than `stale_seconds` from the
    subfolders of `folder`; a folder that vanished or cannot be read is left as it is."""
    stale = time.time() - stale_seconds
    try:
        groups = [entry.path for entry in os.scandir(folder) if entry.is_dir(follow_symlinks=False)]
        for group in groups:
            for entry in os.scandir(group):
                if (entry.name.endswith(".tmp") and entry.is_file(follow_symlinks=False)
                        and entry.stat(follow_symlinks=False).st_mtime < stale):
                    os.remove(entry.path)
    except OSError:
        pass


def read_json(path: str, max_bytes: int) -> Any:
    """The JSON value in the regular file at `path`; None where nothing is there.

    Raises:
      ValueError: something that is not a regular file (never opened, or, if it was swapped in
        after the check, opened without waiting and refused), a file larger than `max_bytes`,
        or one that is no UTF-8 JSON.
      OSError: the file could not be read.
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ValueError("not a regular file")
    except FileNotFoundError:
        return None
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("not a regular file")
        data = os.read(fd, max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise ValueError(f"larger than {max_bytes} bytes")
    return json.loads(data)  # UnicodeDecodeError and JSONDecodeError are ValueErrors


def checked(record: Any, format_number: int) -> tuple[int, str, tuple[float, ...]]:
    """(index, description, times in ms) of a choice's `record`.

    Raises:
      ValueError: no record of this `format_number`, an index that is no int >= 0, no
        description, or a time that is no finite number.
    """
    def is_int(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    if not isinstance(record, dict) or not is_int(record.get("format")):
        raise ValueError("no format number")
    if record["format"] != format_number:
        raise ValueError(f"format {record['format']}, not {format_number}")
    index, times = record.get("index"), record.get("times_ms", [])
    if not is_int(index) or index < 0:
        raise ValueError(f"index {index!r} is not an int >= 0")
    if not isinstance(record.get("description"), str):
        raise ValueError("no description")
    if not isinstance(times, list) or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)
            for t in times):
        raise ValueError(f"times_ms {times!r} are not all finite numbers")
    return index, record["description"], tuple(float(t) for t in times)


def write_json(path: str, record: Any) -> None:
    """Writes `record` to `path` atomically (a temporary file beside it, then a rename).

    Raises:
      OSError: the folder cannot be made or written.
    """
    folder = os.path.dirname(path)
    os.makedirs(folder, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=os.path.basename(path), suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(record, file)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.remove(temporary)
        except OSError:
            pass
        raise
