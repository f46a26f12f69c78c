"""HSACO files handed to jaxlib's ROCm plugin by path: one folder per process (named for its
owner, removed by the next process once the owner no longer runs), one file per kernel key, and
the prewarm that launches a new call once before any real run ([ROCm](rocm.md)).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import logging
import multiprocessing.util
import os
import re
import shutil
import signal
import tempfile
import threading
import warnings
from collections.abc import Callable
from typing import Any

from jax._src import dispatch
from jax._src.core import Primitive
from jax.interpreters import mlir

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env, _state

logger = logging.getLogger("jax_triton_rocm")

FOLDER_PREFIX = "jax_triton_rocm_hsaco_"
_OWNED_FOLDER = re.compile(re.escape(FOLDER_PREFIX) + r"(\d+)_(\d+)_(\d+)_")
# File names hold at most 255 bytes; a kernel's name may be longer (and in UTF-8, up to 4 bytes a
# character): a long one is cut and told apart by a digest of the whole.
_STEM_CHARACTERS = 48


def _process_state(pid: int | str) -> tuple[str, str] | None:
    """(state, start time) of process `pid` from /proc/<pid>/stat; None where there is none."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            text = stat.read()
    except FileNotFoundError:
        return None
    # The command name (field 2) may hold spaces and parentheses: count from the last ")".
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], fields[19]  # fields 3 and 22


def _pid_namespace() -> str:
    """This process's PID namespace (the inode number /proc/self/ns/pid names)."""
    return re.sub(r"\D", "", os.readlink("/proc/self/ns/pid"))


def remove_orphaned_folders(parent: str) -> list[str]:
    """Removes (and returns) the HSACO folders under `parent` whose owner no longer runs. Never
    raises: one that cannot be listed, read or removed (another user's) is left."""
    try:
        names = os.listdir(parent)
    except OSError:
        return []
    removed = []
    for name in names:
        owner = _OWNED_FOLDER.match(name)
        try:  # another PID namespace's processes cannot be seen from here: its folders stay
            if owner is None or owner.group(1) != _pid_namespace():
                continue
            state = _process_state(owner.group(2))
        except (OSError, ValueError, IndexError):
            continue
        if state is not None and state[1] == owner.group(3) and state[0] not in ("Z", "X"):
            continue  # its owner still runs (the same start time, not a zombie)
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
        self._path: str | None = None
        self._files: dict[str, str] = {}

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
        if self._path is not None:
            shutil.rmtree(self._path, ignore_errors=True)
        self.detach_after_fork()

    def detach_after_fork(self) -> None:
        """Forgets the folder (in a forked child: the parent's, for the parent to remove)."""
        self._path = None
        self._files.clear()

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
# jaxlib deletes each file as it reads it: after `clear_caches()`, a call gets a new one.
_state.on_clear(HSACO_FOLDER._files.clear)


# Digests of the calls launched once in this process, as jaxlib's module cache keeps them (it
# does not cross a fork; after `clear_caches()` a call lowered again is prewarmed again).
LOADED_KERNELS: set[str] = set()
_state.on_fork(LOADED_KERNELS.clear)
_state.on_clear(LOADED_KERNELS.clear)

# A call a lowering encoded, emitted as is by its `emit` parameter (hashed by identity).
encoded_call_p = Primitive("triton_encoded_call")
encoded_call_p.multiple_results = True
encoded_call_p.def_impl(functools.partial(dispatch.apply_primitive, encoded_call_p))
encoded_call_p.def_abstract_eval(lambda *avals, emit, out_avals: list(out_avals))
for _platform in _vendors.GPU_PLATFORMS:
    mlir.register_lowering(encoded_call_p, lambda ctx, *operands, emit, out_avals:
                           emit(ctx, operands), platform=_platform)


def local_device_count() -> int:
    """How many ROCm devices this process drives (prewarm matters only for more than one)."""
    import jax

    try:
        return len(jax.local_devices(backend="rocm"))
    except RuntimeError:
        return 0


def prewarm_once(lowered: Any, in_avals: tuple, out_avals: tuple, emit: Callable[..., Any],
                 platform: str = "rocm") -> bool:
    """Launches a newly lowered path-delivered call once on one device; True if it launched. A
    second lowering of it waits on its lock; a failed launch warns once."""
    if not _env.prewarm() or local_device_count() < 2:
        return False
    key = hashlib.sha256(lowered.serialized).hexdigest()
    with _state.LOCKS.item_lock(("prewarm", key)):
        if key in LOADED_KERNELS:
            return False
        try:
            launch_for_prewarm(lowered, in_avals, out_avals, emit, platform=platform)
        except Exception as err:  # the real run will report the real error
            warnings.warn(
                f"jax_triton_rocm: prewarming kernel call {key[:12]} on one device failed "
                f"({type(err).__name__}: {err}); multi-device runs of it may race in the ROCm "
                f"plugin. Set {_env.ENV_HSACO_DELIVERY}=embedded on jax 0.11.1+ to avoid files "
                f"altogether.",
                RuntimeWarning, stacklevel=2)
        finally:
            LOADED_KERNELS.add(key)
        return True


def prewarm_program(lowered: Any, in_avals: tuple, out_avals: tuple,
                    emit: Callable[..., Any]):
    """A function launching `lowered` through the lowering's `emit` (same bytes, path, aliases)
    on zeros made inside it: an in-place kernel reads zeros, and its jit needs no host data."""
    import jax.numpy as jnp

    def launch_on_zeros():
        operands = [jnp.zeros(a.shape, a.dtype) for a in in_avals]
        return encoded_call_p.bind(*operands, out_avals=tuple(out_avals),
                                   emit=lambda ctx, operands: emit(ctx, operands, lowered))

    return launch_on_zeros


def launch_for_prewarm(lowered: Any, in_avals: tuple, out_avals: tuple,
                       emit: Callable[..., Any], platform: str = "rocm") -> list:
    """Runs `prewarm_program` on the first device of `platform`; returns its outputs."""
    import jax

    device = jax.local_devices(backend=platform)[0]
    with jax.default_device(device):
        program = prewarm_program(lowered, in_avals, out_avals, emit)
        return jax.block_until_ready(jax.jit(program)())
