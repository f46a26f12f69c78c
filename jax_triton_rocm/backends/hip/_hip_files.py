"""HSACO files handed to jaxlib's ROCm plugin by path, and when they are removed (docs/rocm.md).

One temporary folder per process, made at the first path-delivered kernel, with one file per
kernel key: lowering the same kernel call again gives the same path, so the same opaque, which
jaxlib has already loaded (its module cache is keyed by the path).

The process that made the folder removes it at exit (`atexit`), at the end of a
`multiprocessing` child (which leaves through `os._exit`, past `atexit`), and on SIGTERM. A
process that ends otherwise (SIGKILL, `os._exit`, a crash) leaves its folder to the next process
that makes one. A folder's name records its owner (PID namespace, PID and start time, so a
reused PID is told apart); it is removed only when that owner, in this PID namespace, surely no
longer runs. A forked child detaches from the parent's folder and makes its own.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import multiprocessing.util
import os
import re
import shutil
import signal
import tempfile
import threading

from jax_triton_rocm.base import _state

logger = logging.getLogger("jax_triton_rocm")

FOLDER_PREFIX = "jax_triton_rocm_hsaco_"
_OWNED_FOLDER = re.compile(re.escape(FOLDER_PREFIX) + r"(\d+)_(\d+)_(\d+)_")
# File names hold at most 255 bytes; a kernel's name may be longer (and in UTF-8, up to 4 bytes a
# character): a long one is cut and told apart by a digest of the whole.
_STEM_CHARACTERS = 48


def _process_state(pid: int | str) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of process `pid`, from /proc/<pid>/stat;
    None where there is no such process.

    Raises:
      OSError: /proc cannot be read here (not Linux, or hidden by its mount options).
    """
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except FileNotFoundError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ")".
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], fields[19]  # fields 3 and 22


def _pid_namespace() -> str:
    """This process's PID namespace, as the inode number /proc/self/ns/pid names (OSError where
    it cannot be read)."""
    return re.sub(r"\D", "", os.readlink("/proc/self/ns/pid"))


def _owner_gone(namespace: str, pid: str, start: str) -> bool:
    """Whether the owner a folder's name records surely no longer runs (no such process, another
    start time, or a zombie); False where that cannot be read or seen from here."""
    try:
        if namespace != _pid_namespace():
            return False  # another PID namespace: its processes cannot be seen from here
        state = _process_state(pid)
    except (OSError, ValueError, IndexError):
        return False
    return state is None or state[1] != start or state[0] in ("Z", "X")


def remove_orphaned_folders(parent: str) -> list[str]:
    """Removes the HSACO folders under `parent` whose owning process no longer runs.

    Returns the folders removed. Never raises: a folder that cannot be listed, read or removed
    (another user's, another cleaner's) is left.
    """
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in names:
        owner = _OWNED_FOLDER.match(name)
        if owner is None or not _owner_gone(*owner.groups()):
            continue
        path = os.path.join(parent, name)
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            removed.append(path)
    if removed:
        logger.debug("jax_triton_rocm: removed HSACO folders of processes that no longer run: "
                     "%s", ", ".join(removed))
    return removed


class HsacoFolder:
    """This process's folder of HSACO files, made on first use and removed by its maker."""

    def __init__(self) -> None:
        self.detach_after_fork()

    def path(self) -> str:
        """The folder, made (and its removal arranged) the first time in this process."""
        with _state.LOCKS.lock_for("hsaco-folder"):
            if self._path is None:
                remove_orphaned_folders(tempfile.gettempdir())
                try:  # a plain prefix where /proc cannot tell the owner: never removed by others
                    prefix = (f"{FOLDER_PREFIX}{_pid_namespace()}_{os.getpid()}_"
                              f"{_process_state('self')[1]}_")
                except (OSError, TypeError, ValueError, IndexError):
                    prefix = FOLDER_PREFIX
                self._path = tempfile.mkdtemp(prefix=prefix)
                self._arrange_removal()
        return self._path

    def file_for(self, key: str, data: bytes, name: str) -> str:
        """The path of this process's file for kernel `key`, written with `data` the first time."""
        with _state.LOCKS.item_lock(("hsaco-file", key)):
            path = self._files.get(key)
            if path is None:
                if len(name) > _STEM_CHARACTERS:
                    name = (f"{name[:_STEM_CHARACTERS - 17]}_"
                            f"{hashlib.sha256(name.encode()).hexdigest()[:16]}")
                fd, path = tempfile.mkstemp(prefix=f"{name}_", suffix=".hsaco", dir=self.path())
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                self._files[key] = path
            return path

    def remove(self) -> None:
        """Deletes the folder, and forgets its files."""
        if self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
        self.detach_after_fork()

    def forget_files(self) -> None:
        """Forgets which kernels have files (jaxlib deletes the files as it reads them): the next
        lowering of each writes a new one."""
        self._files = {}

    def detach_after_fork(self) -> None:
        """Forgets the folder (in a forked child: the parent's, for the parent to remove)."""
        self._path: str | None = None
        self._files: dict[str, str] = {}

    def _arrange_removal(self) -> None:
        atexit.register(self.remove)
        # Children of multiprocessing skip atexit; they run its finalizers before `os._exit`.
        multiprocessing.util.Finalize(self, self.remove, exitpriority=0)
        if threading.current_thread() is not threading.main_thread():
            logger.debug("jax_triton_rocm: HSACO folder made off the main thread; it is removed "
                         "at exit, but not on SIGTERM (signal handlers belong to the main "
                         "thread).")
            return
        previous = signal.getsignal(signal.SIGTERM)

        def remove_then_continue(signum, frame):  # then what the replaced handler would do
            self.remove()
            if callable(previous):
                previous(signum, frame)
            elif previous != signal.SIG_IGN:
                signal.signal(signum, signal.SIG_DFL)
                os.kill(os.getpid(), signum)

        signal.signal(signal.SIGTERM, remove_then_continue)


HSACO_FOLDER = HsacoFolder()
_state.on_fork(HSACO_FOLDER.detach_after_fork)
_state.on_clear(HSACO_FOLDER.forget_files)
