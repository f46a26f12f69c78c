"""All process-wide state of the package, with its thread and fork rules.

Threads: lowering can run on many threads at once (JAX compiles in parallel, users call `jit`
from thread pools). Every structure here is guarded by a lock from one registry; per-key locks
are handed out under the registry's own lock, so two threads asking for the same key get the
same lock.

Fork: a child of `os.fork()` inherits memory but only the forking thread. A lock that another
thread of the parent held at the fork stays held forever in the child, and a compile that was in
flight there never finishes. Python's per-module import locks are such locks: a fork while
another thread is importing a module leaves the child waiting forever for that module. So:
  - the modules a lowering imports (the vendor module and the Triton modules Triton imports
    lazily at its first compile) are imported together, under one lock (`IMPORTS`), and a fork
    waits for that lock (up to `FORK_IMPORT_WAIT_S`): the child never sees them half-imported;
in the child:
  - every lock is replaced by a fresh one (the registry's and every per-key lock);
  - finished kernels stay cached (they are plain data and still valid); in-flight compiles are
    forgotten, and the child compiles what it needs itself; lowered calls and compiled plans
    are forgotten (they may name the parent's HSACO files);
  - state a vendor module keeps has its own fork rule beside it (`_hip_files`, `_hip_prewarm`).
"""

from __future__ import annotations

import collections
import importlib
import logging
import os
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

logger = logging.getLogger("jax_triton_rocm")


class LockRegistry:
    """Per-key locks, handed out under one registry lock; fresh after `os.fork()`."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[Hashable, threading.Lock] = {}

    def lock_for(self, key: Hashable) -> threading.Lock:
        """The lock for `key`: the same object for every caller until the next fork."""
        with self._guard:
            lock = self._locks.get(key)
            if lock is None:
                lock = self._locks[key] = threading.Lock()
            return lock

    @property
    def guard(self) -> threading.Lock:
        """The registry's own lock, for short critical sections on shared containers."""
        return self._guard

    def reset_after_fork(self) -> None:
        self._guard = threading.Lock()
        self._locks = {}

    def forget_item_locks(self) -> None:
        """Drops the per-item locks (keys that are tuples: one per kernel, file, prewarm), which
        otherwise grow with every kernel ever lowered; named locks ("register", ...) stay.

        A lock held now is kept: dropping it would let a second thread take a fresh lock for the
        same item and work on it at the same time.
        """
        with self._guard:
            for key, lock in list(self._locks.items()):
                if isinstance(key, tuple) and lock.acquire(blocking=False):
                    lock.release()
                    del self._locks[key]

    def __len__(self) -> int:
        return len(self._locks)


LOCKS = LockRegistry()


class _Failure:
    """A compile that raised, kept in place of the kernel."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class KernelCache:
    """Compiled kernels by kernel key; each key compiled once, however many threads ask.

    A miss takes the key's lock from the registry, checks again and compiles under it, so
    concurrent lowerings of one kernel compile it once, while different keys compile in
    parallel. A compile that raises is remembered as well, for the life of the process (or until
    `clear`): the kernel key covers every input of the compile, so a second try would fail the
    same way, only later; the threads that waited on the lock and every later lowering get the
    same error at once. Counters (`stats`) let tests and benchmarks see hits, compiles and
    failures.
    """

    def __init__(self, locks: LockRegistry) -> None:
        self._locks = locks
        self._entries: dict[str, Any] = {}
        self.stats: collections.Counter[str] = collections.Counter()

    def get_or_compile(self, key: str, compile_fn: Callable[[], T]) -> T:
        entry = self._entries.get(key)
        if entry is not None:
            return self._hit(entry)
        with self._locks.lock_for(("kernel", key)):
            entry = self._entries.get(key)
            if entry is not None:
                return self._hit(entry)
            try:
                entry = compile_fn()
            except Exception as err:
                self._entries[key] = _Failure(err)
                self._count("failures")
                raise
            self._entries[key] = entry
            self._count("compiles")
            return entry

    def _hit(self, entry: Any) -> Any:
        self._count("hits")
        if isinstance(entry, _Failure):
            raise entry.error
        return entry

    def __contains__(self, key: str) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._locks.guard:
            self._entries.clear()
            self.stats.clear()

    def _count(self, what: str) -> None:
        with self._locks.guard:
            self.stats[what] += 1


KERNELS = KernelCache(LOCKS)

# Lowered calls by everything that decides them (`_lowering.lower_call`), each with the kernel
# object its key names by id (so the id is not reused). A child of a fork starts without them: a
# path-delivered call names a file of the parent's, which jaxlib would read and delete.
LOWERED_CALLS: dict[tuple, tuple[Any, Any]] = {}
# Compiled plans of plain kernels by all but the shapes and runtime scalar values (`_plans`),
# each with its kernel object; a forked child starts without them, for the same reason.
PLANS: dict[tuple, tuple[Any, Any]] = {}

os.register_at_fork(after_in_child=LOCKS.reset_after_fork)
os.register_at_fork(after_in_child=LOWERED_CALLS.clear)
os.register_at_fork(after_in_child=PLANS.clear)

def triton_language_lock() -> threading.Lock:
    """The lock held while Triton's Python front end, or its interpreter, runs in this process.

    The front end (Python AST to Triton IR) is not safe across threads (CPython 3.11's `ast.parse`
    is not), and the interpreter patches `triton.language` for the whole process while a kernel
    runs: a front end running meanwhile would build IR from the patched language. Compiles still
    overlap in the backend passes and ptxas, where their time goes.
    """
    return LOCKS.lock_for("triton-language")


# Modules Triton imports lazily during its first compile (a cache miss), which a lowering
# therefore needs: missing ones (another Triton version) are skipped.
LOWERING_IMPORTS = (
    "triton.compiler.code_generator",
    "triton.language.semantic",
    "triton.language.extra.libdevice",
    "triton.experimental.gluon._runtime",
)
# How long a fork waits for another thread to finish the lowering imports; past it the fork
# goes on (a thread stuck importing must not stop the process from forking) with a warning.
FORK_IMPORT_WAIT_S = 60.0


class LoweringImports:
    """Imports the modules a lowering needs, all at once, so that no fork splits them.

    `import_for_lowering` runs the imports under one re-entrant lock; the `before` fork hook
    takes that lock, so a fork from any thread waits until no thread is inside them, and the
    child has every module whole (or, if the fork came first, none: it imports them itself).
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._held_for_fork = False
        self._done: set[str] = set()

    def import_for_lowering(self, module: str) -> Any:
        """Imports `module` (a vendor module) and `LOWERING_IMPORTS`; returns the module."""
        if module in self._done:
            return importlib.import_module(module)
        with self._lock:
            imported = importlib.import_module(module)
            for name in LOWERING_IMPORTS:
                try:
                    importlib.import_module(name)
                except ImportError:
                    pass
            self._done.add(module)
            return imported

    def before_fork(self) -> None:
        self._held_for_fork = self._lock.acquire(timeout=FORK_IMPORT_WAIT_S)
        if not self._held_for_fork:
            logger.warning("jax_triton_rocm: forking while another thread has been importing "
                           "Triton for %s s; the child may wait on that import forever.",
                           FORK_IMPORT_WAIT_S)

    def after_fork_in_parent(self) -> None:
        if self._held_for_fork:
            self._held_for_fork = False
            self._lock.release()

    def after_fork_in_child(self) -> None:
        self._held_for_fork = False
        self._lock = threading.RLock()


IMPORTS = LoweringImports()
os.register_at_fork(before=IMPORTS.before_fork, after_in_parent=IMPORTS.after_fork_in_parent,
                    after_in_child=IMPORTS.after_fork_in_child)



# Caches kept by modules loaded on demand (the HIP prewarm's), emptied by `clear_caches`.
_CLEAR_HOOKS: list[Callable[[], None]] = []


def on_clear(hook: Callable[[], None]) -> None:
    """Makes `clear_caches()` call `hook` too (for state a vendor module keeps)."""
    _CLEAR_HOOKS.append(hook)


def clear_caches() -> None:
    """Empties the kernel cache (compiled kernels and remembered compile failures), the vendors'
    caches (`on_clear`) and the per-kernel locks no thread holds, and clears JAX's caches.

    JAX keeps lowered computations, which embed compiled kernels; clearing them too means the
    next call really lowers and compiles again (after editing a kernel's dependencies in place,
    or changing JAX_TRITON_ROCM_HSACO_DELIVERY).
    """
    import jax

    KERNELS.clear()
    LOWERED_CALLS.clear()
    PLANS.clear()
    for hook in _CLEAR_HOOKS:
        hook()
    LOCKS.forget_item_locks()
    jax.clear_caches()
