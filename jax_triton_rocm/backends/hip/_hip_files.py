"""HSACO files handed to jaxlib's ROCm plugin by path, and when they are removed.

One temporary folder per process, made at the first path-delivered kernel. One file per kernel
(by kernel key): lowering the same kernel call again gives the same path, so the same opaque,
which jaxlib has already loaded (its module cache is keyed by the path).

Removal: the process that made the folder removes it at exit (`atexit`), at the end of a
`multiprocessing` child (which leaves through `os._exit`, past `atexit`), and on SIGTERM, whose
handler then hands the signal on to the one it replaced (or to the default action).

Fork: a child detaches from the parent's folder (it is the parent's to remove) and makes its own
if it needs files, which it then removes itself by the same rules.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing.util
import os
import shutil
import signal
import tempfile
import threading

from jax_triton_rocm.base import _state

logger = logging.getLogger("jax_triton_rocm")


class HsacoFolder:
    """This process's folder of HSACO files, made on first use and removed by its maker."""

    def __init__(self, locks: _state.LockRegistry) -> None:
        self._locks = locks
        self._path: str | None = None
        self._owner_pid: int | None = None
        self._files: dict[str, str] = {}

    def path(self) -> str:
        """The folder, made (and its removal arranged) the first time in this process."""
        if self._path is None or self._owner_pid != os.getpid():
            with self._locks.lock_for("hsaco-folder"):
                if self._path is None or self._owner_pid != os.getpid():
                    self._path = tempfile.mkdtemp(prefix="jax_triton_rocm_hsaco_")
                    self._owner_pid = os.getpid()
                    self._files = {}
                    _arrange_removal(self)
        return self._path

    def file_for(self, key: str, data: bytes, stem: str) -> str:
        """The path of this process's file for kernel `key`, written with `data` the first time."""
        with self._locks.item_lock(("hsaco-file", key)):
            path = self._files.get(key) if self._owner_pid == os.getpid() else None
            if path is None:
                fd, path = tempfile.mkstemp(prefix=f"{stem}_", suffix=".hsaco", dir=self.path())
                with os.fdopen(fd, "wb") as out:
                    out.write(data)
                self._files[key] = path
            return path

    def remove(self) -> None:
        """Deletes the folder if this process made it, and forgets its files."""
        if self._path is not None and self._owner_pid == os.getpid():
            shutil.rmtree(self._path, ignore_errors=True)
        if self._owner_pid == os.getpid():
            self._path = None
            self._files = {}

    def forget_files(self) -> None:
        """Forgets which kernels have files (one path per path-delivered kernel; jaxlib deletes
        the files as it reads them): the next lowering of each writes a new one."""
        with self._locks.guard:
            self._files = {}

    def detach_after_fork(self) -> None:
        self._path = None
        self._owner_pid = None
        self._files = {}


def _arrange_removal(folder: HsacoFolder) -> None:
    atexit.register(folder.remove)
    # Children of multiprocessing skip atexit; they run its finalizers before `os._exit`.
    multiprocessing.util.Finalize(folder, folder.remove, exitpriority=0)
    _chain_sigterm(folder)


def _chain_sigterm(folder: HsacoFolder) -> None:
    """Removes the folder on SIGTERM, then does what the replaced handler would have done."""
    if threading.current_thread() is not threading.main_thread():
        logger.debug("jax_triton_rocm: HSACO folder made off the main thread; it is removed at "
                     "exit, but not on SIGTERM (signal handlers belong to the main thread).")
        return
    previous = signal.getsignal(signal.SIGTERM)

    def remove_then_continue(signum, frame):
        folder.remove()
        if callable(previous):
            previous(signum, frame)
        elif previous != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, remove_then_continue)


HSACO_FOLDER = HsacoFolder(_state.LOCKS)
os.register_at_fork(after_in_child=HSACO_FOLDER.detach_after_fork)
_state.on_clear(HSACO_FOLDER.forget_files)
