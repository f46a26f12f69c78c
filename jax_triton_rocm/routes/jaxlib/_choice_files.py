"""The autotune store's files: read as a careful system reads them, checked, written atomically,
swept.

`routes._choices` keeps one small JSON file per choice, in a group folder of the store. A reader
opens only regular files directly inside the group folder, never through a link, never waits on
what it opens (a FIFO is refused, not read), and reads a bounded size (`_files.read_entry_file`);
a record is checked field by field before it is used. A writer writes only into folders that are
the user's own and no link, a temporary file renamed over the choice, so a reader never sees
half a file; the temporary files of writers killed mid-write are removed once they are old enough
to belong to no live writer.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from typing import Any

from jax_triton_rocm.base import _files


def sweep(folder: str, stale_seconds: float) -> None:
    """Removes the writers' temporary files (`*.tmp`) older than `stale_seconds` from the
    group folders of `folder` (never through a link); a folder that vanished or cannot be read
    is left as it is."""
    with contextlib.suppress(OSError, ValueError):
        groups = [entry.name for entry in os.scandir(folder)
                  if entry.is_dir(follow_symlinks=False)]
        for group in groups:
            _files.remove_stale_temporaries(os.path.join(folder, group), stale_seconds)


def read_json(folder: str, name: str, max_bytes: int) -> Any:
    """The JSON value in the regular file `name` directly inside `folder`; None where nothing
    is there.

    Raises:
      ValueError: something that is not a regular file or is a link (never opened; if swapped
        in after the check, opened without waiting and refused), a file larger than
        `max_bytes`, or one that is no UTF-8 JSON (nested too deeply included).
      OSError: the file could not be read.
    """
    try:
        return _files.parse_json(_files.read_entry_file(folder, name, max_bytes))
    except FileNotFoundError:
        return None


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


def write_json(store: str, group: str, name: str, record: Any) -> None:
    """Writes `record` as `name` in the folder `group` of the folder `store`, atomically (a
    temporary file beside it, then a rename); each folder is made if missing.

    Raises:
      ValueError (`_files.RefusedFile`): `store` or `group` is a link or another user's folder.
      OSError: a folder cannot be made or written.
    """
    data = json.dumps(record).encode("utf-8")
    with _files.own_folder(store) as store_fd, _files.own_folder(group, store_fd) as group_fd:
        _files.replace_file(group_fd, name, data)
