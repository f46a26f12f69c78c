"""Triton's installation key, remembered across processes instead of hashed at each one's start.

`triton.runtime.cache.triton_key()` hashes Triton's own files (its `libtriton` is about 500 MB)
at a process's first compile: 0.2 to 0.3 s of every fresh process's first result. The key is
remembered in a file beside Triton's cache, named after the `stat` of every file in Triton's
folder (path, size, inode, modification and change times). Writing a file changes its change
time, which no user can set back, so any change to the installation gives another name, and
the key is hashed by Triton again. A remembered key is handed to Triton the way Triton's own
compile workers are given theirs: as `triton.runtime.cache.triton_key`. The file is read as
every cache file is (`_files`); a folder other users can write is neither read nor written. The
temporary files of writers killed mid-write are removed once stale.
`JAX_TRITON_ROCM_REMEMBER_TRITON_KEY=0` turns it off (docs/environment.md).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sysconfig
from typing import Any

from jax_triton_rocm.base import _env, _files, _state

logger = logging.getLogger("jax_triton_rocm")

FOLDER_NAME = "jax_triton_rocm_triton_key"
_MAX_BYTES = 1 << 16
# Triton's key: its version, then one sha256 per file it hashed, joined by "-".
_HASHES = re.compile(r"[0-9a-f]{64}(?:-[0-9a-f]{64})*")
_tried: list[int] = []  # the process ids that have looked for the key (a forked child looks again)


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


def _write(folder: str, name: str, key: str) -> None:
    try:
        with _files.own_folder(folder) as folder_fd:
            _files.replace_file(folder_fd, name, key.encode("ascii"))
    except (OSError, ValueError) as err:
        logger.debug("jax_triton_rocm: could not remember the Triton key in %s: %s", folder, err)


def remember() -> None:
    """Before a process's first compile: hands Triton its key from the file remembered for this
    installation, or lets Triton hash it and remembers it. Once per process; any failure leaves
    Triton to hash its key itself."""
    with _state.LOCKS.triton_key:
        if os.getpid() in _tried:
            return
        _tried.append(os.getpid())
        if not _env.remember_triton_key():
            return
        from triton.runtime import cache

        original = cache.triton_key
        info = getattr(original, "cache_info", None)
        if info is None or info().currsize:
            return  # already computed in this process, or replaced by someone else
        try:
            _hand_over(cache, original)
        except Exception as err:  # noqa: BLE001 - Triton hashes its key itself, as without this
            logger.debug("jax_triton_rocm: remembering the Triton key failed: %s", err)


def _hand_over(cache: Any, original: Any) -> None:
    """Hands Triton the key remembered in the folder beside its cache, or remembers Triton's."""
    import triton

    folder = os.path.join(triton.knobs.cache.dir or triton.knobs.cache.get_triton_dir("cache"),
                          FOLDER_NAME)
    if _files.others_can_write(folder) is not None:
        return
    with contextlib.suppress(OSError, ValueError):
        _files.remove_stale_temporaries(folder)  # left by writers killed mid-write
    root = os.path.dirname(os.path.dirname(os.path.abspath(cache.__file__)))
    name, version = f"{installation_stamp(root)}.key", triton.__version__
    path = os.path.join(folder, name)
    try:
        key = _files.read_entry_file(folder, name, _MAX_BYTES).decode("ascii")
    except FileNotFoundError:
        key = None
    except (OSError, ValueError) as err:
        logger.debug("jax_triton_rocm: not using the remembered Triton key %s: %s", path, err)
        key = None
    if key is not None and not (key.startswith(version)
                                and _HASHES.fullmatch(key[len(version):])):
        logger.debug("jax_triton_rocm: not using the remembered Triton key %s: not a key of "
                     "Triton %s", path, version)
        key = None
    if key is None:
        _write(folder, name, original())
        return

    def triton_key() -> str:
        return key

    triton_key.cache_clear = original.cache_clear  # type: ignore[attr-defined]
    triton_key.__wrapped__ = original  # type: ignore[attr-defined]
    cache.triton_key = triton_key
