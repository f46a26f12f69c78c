"""All process-wide state of the package, with its thread and fork rules.

Threads: lowering can run on many threads at once (JAX compiles in parallel, users call `jit`
from thread pools). Every structure here is guarded by a lock from one registry; per-key locks
are handed out under the registry's own lock, so two threads asking for the same key get the
same lock.

Fork: a child of `os.fork()` inherits memory but only the forking thread. A lock that another
thread of the parent held at the fork stays held forever in the child, and a compile that was in
flight there never finishes. So, in the child:
  - every lock is replaced by a fresh one (the registry's and every per-key lock);
  - finished kernels stay cached (they are plain data and still valid); in-flight compiles are
    forgotten, and the child compiles what it needs itself;
  - state a vendor module keeps has its own fork rule beside it (`_hip_files`, `_hip_prewarm`).
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


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


LOCKS = LockRegistry()


class KernelCache:
    """Compiled kernels by kernel key; each key compiled once, however many threads ask.

    A miss takes the key's lock from the registry, checks again and compiles under it, so
    concurrent lowerings of one kernel compile it once, while different keys compile in
    parallel. Counters (`stats`) let tests and benchmarks see hits and compiles.
    """

    def __init__(self, locks: LockRegistry) -> None:
        self._locks = locks
        self._entries: dict[str, Any] = {}
        self.stats: collections.Counter[str] = collections.Counter()

    def get_or_compile(self, key: str, compile_fn: Callable[[], T]) -> T:
        entry = self._entries.get(key)
        if entry is not None:
            self._count("hits")
            return entry
        with self._locks.lock_for(("kernel", key)):
            entry = self._entries.get(key)
            if entry is not None:
                self._count("hits")
                return entry
            entry = compile_fn()
            self._entries[key] = entry
            self._count("compiles")
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


os.register_at_fork(after_in_child=LOCKS.reset_after_fork)

def triton_language_lock() -> threading.Lock:
    """The lock held while Triton's Python front end, or its interpreter, runs in this process.

    The front end (Python AST to Triton IR) is not safe across threads (CPython 3.11's `ast.parse`
    is not), and the interpreter patches `triton.language` for the whole process while a kernel
    runs: a front end running meanwhile would build IR from the patched language. Compiles still
    overlap in the backend passes and ptxas, where their time goes.
    """
    return LOCKS.lock_for("triton-language")


# Caches kept by modules loaded on demand (the HIP prewarm's), emptied by `clear_caches`.
_CLEAR_HOOKS: list[Callable[[], None]] = []


def on_clear(hook: Callable[[], None]) -> None:
    """Makes `clear_caches()` call `hook` too (for state a vendor module keeps)."""
    _CLEAR_HOOKS.append(hook)


def clear_caches() -> None:
    """Empties the kernel cache and the vendors' caches (`on_clear`), and clears JAX's caches.

    JAX keeps lowered computations, which embed compiled kernels; clearing them too means the
    next call really lowers and compiles again (after editing a kernel's dependencies in place,
    or changing JAX_TRITON_ROCM_HSACO_DELIVERY).
    """
    import jax

    KERNELS.clear()
    for hook in _CLEAR_HOOKS:
        hook()
    jax.clear_caches()
