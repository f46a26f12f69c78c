"""All process-wide state of the package: its locks (`LOCKS`), caches (`CACHES`), fork and
clear hooks; every cache bounded, every structure guarded, fresh locks after a fork. Every other
piece, and why: docs/design.md, "Process-wide state".
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import functools
import importlib
import logging
import os
import threading
import weakref
from collections.abc import Callable, Hashable, Iterator
# Imported now (`concurrent.futures` imports it at first use), so that its exit hook, which waits
# for the queued work, is registered before `CompilePool`'s, which runs first and drops it.
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from jax_triton_rocm.base import _env

logger = logging.getLogger("jax_triton_rocm")
T = TypeVar("T")

class LockRegistry:
    """Per-item and named locks that live while in use; fresh after `os.fork()` (read `guard` at
    each use). Triton's locks are attributes, so a compile takes them without calling back here."""

    def __init__(self) -> None:
        self.reset_after_fork()

    def item_lock(self, key: Hashable) -> threading.Lock:
        """The lock of one item (a kernel, a file, a prewarm) or fixed name ("register"), shared by
        the threads asking for it while one holds or awaits it, and only while in use."""
        with self.guard:
            return self._items.setdefault(key, threading.Lock())

    lock_for = item_lock  # a lock nobody holds or awaits is made again at no cost

    def reset_after_fork(self) -> None:
        self.guard = threading.Lock()
        # Held while Triton's front end (not thread-safe, nor is CPython 3.11's `ast.parse`) or
        # its interpreter (it patches `triton.language` for the process) runs; compiles still
        # overlap in the backend passes and ptxas, where their time goes.
        self.triton_language = threading.Lock()
        self.triton_cache_dir = threading.Lock()
        self.triton_key = threading.Lock()
        self.imports = threading.RLock()  # `IMPORTS.lowering()`'s
        self._items: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def __len__(self) -> int:  # the locks in use
        return len(self._items)


LOCKS = LockRegistry()


class BoundedCache:
    """A dict behind the registry's lock that forgets its least recently used entries beyond the
    bound its variable `env` sets (read at each put, parsed when it changed); given `kernel=`
    (or its `record=`), the kernel's own dict in its record."""

    def __init__(self, env: str) -> None:
        self.env = env
        self._bound: tuple[str | None, int] = (None, _env.DEFAULT_CACHE_SIZE)  # unset: default
        self._entries: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()

    def get(self, key: Hashable, kernel: Any = None) -> Any:
        """The entry for `key` (now the most recently used), or None."""
        entries = (self._entries if kernel is None
                   else KERNEL_RECORDS.record(kernel).setdefault(self, collections.OrderedDict()))
        with LOCKS.guard:
            if (value := entries.get(key)) is not None:
                entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: T, kernel: Any = None, record: dict | None = None) -> T:
        """Stores `value` for `key`, forgetting the oldest entries beyond the bound; returns it."""
        seen, limit = self._bound  # the variable's value last read, and its bound
        if (raw := _env.as_set(self.env)) != seen:
            limit = _env.cache_size(self.env)
            self._bound = raw, limit
        if record is None and kernel is not None:
            record = KERNEL_RECORDS.record(kernel)
        entries = (self._entries if record is None
                   else record.setdefault(self, collections.OrderedDict()))
        with LOCKS.guard:
            entries[key] = value
            entries.move_to_end(key)
            while len(entries) > limit:
                entries.popitem(last=False)
        return value

    def pop(self, key: Hashable, record: dict) -> Any:
        """The entry for `key` in a kernel's `record`, forgotten; None if none (a key that does
        not hash has none)."""
        try:
            with LOCKS.guard:
                return record.get(self, {}).pop(key, None)
        except TypeError:
            return None

    def memo(self, key: Hashable, make: Callable[[], Any], kernel: Any = None) -> Any:
        """The value kept for `key`, else `make()`'s, kept; a key that does not hash keeps none."""
        try:
            found = self.get(key, kernel)
        except TypeError:
            return make()
        return self.put(key, make(), kernel) if found is None else found

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        """The entries kept, its own and in every live kernel's record."""
        return len(self._entries) + sum([len(values.get(self, ()))
                                         for values in KERNEL_RECORDS.live()])

    def clear(self) -> None:
        for values in KERNEL_RECORDS.live():
            values.pop(self, None)
        with LOCKS.guard:
            self._entries.clear()


RECORD_ATTRIBUTE = "_jax_triton_rocm_record"  # where a kernel object holds its record


class _Record:
    """What was derived from one kernel object, and from what (`kept_for`: its id, as a copy
    carries the attribute, source object, noinline and debug)."""

    __slots__ = ("kept_for", "values", "__weakref__")

    def __reduce__(self) -> tuple:  # a deep copy or a pickle of the kernel carries no record
        return dict, ()


class KernelRecords:
    """One record per kernel object, kept on the object (`RECORD_ATTRIBUTE`), while it has the
    same source object, `noinline` and `debug` (docs/design.md, "Process-wide state")."""

    def __init__(self) -> None:
        self._live: weakref.WeakSet[_Record] = weakref.WeakSet()

    def record(self, kernel: Any) -> dict:
        kept_for = (id(kernel), getattr(kernel, "src", None),
                    getattr(kernel, "noinline", None), getattr(kernel, "debug", None))
        record = getattr(kernel, RECORD_ATTRIBUTE, None)
        if (type(record) is _Record and record.kept_for[0] == kept_for[0]
                and record.kept_for[1] is kept_for[1] and record.kept_for[2:] == kept_for[2:]):
            return record.values
        record = _Record()
        record.kept_for, record.values = kept_for, {}
        try:
            setattr(kernel, RECORD_ATTRIBUTE, record)
        except (AttributeError, TypeError):  # no attributes (slots, a builtin): nothing kept
            return record.values
        with LOCKS.guard:
            self._live.add(record)
        return record.values

    def derived(self, kernel: Any, what: Hashable, make: Callable[[], T]) -> T:
        """`what` derived from `kernel`: the kept value, else `make()`'s, kept."""
        record = self.record(kernel)
        if (found := record.get(what)) is None:
            found = record[what] = make()
        return found

    def live(self) -> list[dict]:
        with LOCKS.guard:
            return [record.values for record in self._live]

    def __len__(self) -> int:  # the live kernels' records that hold something
        return sum([bool(values) for values in self.live()])

    def clear(self) -> None:
        for values in self.live():
            values.clear()


class KernelCache(BoundedCache):
    """Compiled kernels by kernel key, each compiled once however many threads ask (`claim`); a
    kernel's own error is kept in its place (a retry would fail the same way)."""

    def __init__(self) -> None:
        super().__init__(_env.ENV_KERNEL_CACHE_SIZE)
        self.stats: collections.Counter[str] = collections.Counter()

    def claim(self, key: str, counted: bool = True) -> tuple[Any, threading.Lock | None]:
        """(the entry for `key`, None), a kept error raised, a hit `counted` in the stats or not;
        on a miss (None, the key's lock, held): the caller compiles, calls `finish` and releases
        the lock."""
        entry = self.get(key)
        if entry is None:  # a hit takes no lock; a miss waits for a thread compiling it
            lock = LOCKS.item_lock(("kernel", key))
            lock.acquire()
            entry = self.get(key)
            if entry is None:
                return None, lock
            lock.release()
            del lock  # a kept error raised below keeps this frame in its traceback, not the lock
        if counted:
            with LOCKS.guard:
                self.stats["hits"] += 1
        if isinstance(entry, Exception):
            raise entry
        return entry, None

    def finish(self, key: str, entry: T, keep: bool = True) -> T:
        """Counts `entry` (a result or an error), kept for `key` where `keep` says; returns it."""
        with LOCKS.guard:
            self.stats["failures" if isinstance(entry, Exception) else "compiles"] += 1
        return self.put(key, entry) if keep else entry

    def clear(self) -> None:
        super().clear()
        with LOCKS.guard:
            self.stats.clear()


class CompilePool:
    """The threads that compile kernels for every lowering, and the compiles started when a call
    is traced (`start`); each compile holds a `slot()` while it runs, whichever thread compiles.
    `clear()` and the interpreter's exit drop the compiles queued, not those running."""

    def __init__(self) -> None:
        self._process = os.getpid()  # a forked child starts no compile threads: see `start`
        self.reset_after_fork()

    def reset_after_fork(self) -> None:
        self._slots: tuple[int, threading.Semaphore] | None = None
        self._executor: tuple[int, ThreadPoolExecutor] | None = None
        self._queued: dict[Hashable, concurrent.futures.Future] = {}

    @property
    def forked(self) -> bool:
        """Whether this is a child of `os.fork()`, which compiles in the thread that lowers (a
        thread it starts could wait forever on state the parent's threads held at the fork)."""
        return os.getpid() != self._process

    def slot(self, threads: int) -> threading.Semaphore:
        """What a compile holds while it runs: one of `threads` (the variable's value now)."""
        with LOCKS.guard:
            if self._slots is None or self._slots[0] != threads:
                self._slots = threads, threading.Semaphore(threads)
            return self._slots[1]

    def start(self, key: Hashable, run: Callable[[], Any], *, threads: int, limit: int) -> bool:
        """Queues `run()` for one of `threads` threads (its result and errors are dropped: it
        fills a cache) unless `key` is queued or running, or `limit` are; whether it was queued."""
        with LOCKS.guard:
            if key in self._queued or len(self._queued) >= limit or self.forked:
                return False
            try:
                if self._executor is None:  # runs before `ThreadPoolExecutor`'s exit hook
                    threading._register_atexit(self.clear)  # type: ignore[attr-defined]
                elif self._executor[0] != threads:  # its queue drains, then its threads end
                    self._executor[1].shutdown(wait=False)
                    self._executor = None
                if self._executor is None:
                    self._executor = threads, ThreadPoolExecutor(
                        threads, thread_name_prefix="jax_triton_rocm_compile")
                future = self._executor[1].submit(run)
            except RuntimeError:  # the interpreter is exiting: nothing new starts
                return False
            self._queued[key] = future
        future.add_done_callback(lambda done: self._forget(key, done))
        return True

    def _forget(self, key: Hashable, future: concurrent.futures.Future) -> None:
        with LOCKS.guard:
            if self._queued.get(key) is future:
                del self._queued[key]

    def wait(self, drop: bool = False) -> None:
        """Returns once every compile queued now has ended, those not yet running dropped where
        `drop` says (`clear`: none ends later)."""
        with LOCKS.guard:
            futures = list(self._queued.values())
        for future in futures if drop else ():  # a cancelled one's callback takes the guard
            future.cancel()
        concurrent.futures.wait(futures)

    clear = functools.partialmethod(wait, drop=True)

    def __len__(self) -> int:  # the compiles queued or running
        return len(self._queued)


COMPILED_KERNELS = KernelCache()
KERNEL_RECORDS = KernelRecords()
# Kept per kernel: lowered calls; the interpreter's checked calls (`routes.cpu._interpret`); by
# all but shapes and runtime scalar values, plain kernels' plans and `triton_call`'s layouts.
LOWERED_CALLS = BoundedCache(_env.ENV_CALL_CACHE_SIZE)
CHECKED_CALLS = BoundedCache(_env.ENV_CALL_CACHE_SIZE)
PLANS = BoundedCache(_env.ENV_CALL_CACHE_SIZE)
CALL_LAYOUTS = BoundedCache(_env.ENV_CALL_CACHE_SIZE)
# Kept per kernel, by binary and loader: each image as jaxlib's call carries it, so an autotuned
# call's lowerings, whose plans are not kept, meet the same bytes objects.
KERNEL_IMAGES = BoundedCache(_env.ENV_KERNEL_CACHE_SIZE)
# Queued compiles, at most as many as the kernel cache keeps (`compile._compile.start_compiles`);
# kept per kernel, the launches a trace planned for them, until the lowering that follows takes
# them (`routes._lowering`): the kernel's functions run once for both.
COMPILE_POOL = CompilePool()
TRACED_LAUNCHES = BoundedCache(_env.ENV_CALL_CACHE_SIZE)
CACHES = (COMPILE_POOL, COMPILED_KERNELS, LOWERED_CALLS, CHECKED_CALLS, PLANS, KERNEL_IMAGES,
          KERNEL_RECORDS, CALL_LAYOUTS, TRACED_LAUNCHES)

def on_fork(hook: Callable[[], None]) -> None:
    """Makes a child of `os.fork()` call `hook` (the hooks in the order given, the locks' first):
    its threads, files and caches are its own."""
    os.register_at_fork(after_in_child=hook)


on_fork(LOCKS.reset_after_fork)
on_fork(COMPILE_POOL.reset_after_fork)
# A child starts without the parent's lowered calls and plans: a path-delivered kernel names a
# file of the parent's, which jaxlib would read and delete.
on_fork(LOWERED_CALLS.clear)
on_fork(PLANS.clear)


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
    """The imports a lowering needs, taken under one re-entrant lock (`lowering()`) that a fork
    waits for: a per-module import lock another thread held at the fork would be held forever
    in the child, which gets every module whole, or none (it then imports them itself)."""

    def __init__(self) -> None:
        self._held_for_fork = self._triton_done = False

    @contextlib.contextmanager
    def lowering(self) -> Iterator[None]:
        """Holds the import lock for the body's imports, then imports `LOWERING_IMPORTS`."""
        with LOCKS.imports:
            yield
            if not self._triton_done:
                for name in LOWERING_IMPORTS:  # by name: which of them exist depends on Triton
                    with contextlib.suppress(ImportError):
                        importlib.import_module(name)
                self._triton_done = True

    def before_fork(self) -> None:
        self._held_for_fork = LOCKS.imports.acquire(timeout=FORK_IMPORT_WAIT_S)
        if not self._held_for_fork:
            logger.warning("jax_triton_rocm: forking while another thread has been importing "
                           "Triton for %s s; the child may wait on that import forever.",
                           FORK_IMPORT_WAIT_S)

    def after_fork_in_parent(self) -> None:
        if self._held_for_fork:
            self._held_for_fork = False
            LOCKS.imports.release()


IMPORTS = LoweringImports()
# A child gets a fresh lock (`LOCKS.reset_after_fork`); `before_fork` sets `_held_for_fork` again.
os.register_at_fork(before=IMPORTS.before_fork, after_in_parent=IMPORTS.after_fork_in_parent)


_WARNED: set[Hashable] = set()  # what a warning named, once per process (`first_warning`)


def first_warning(subject: Hashable) -> bool:
    """Whether no warning has named `subject` (a damaged file, a folder) yet: now one has."""
    with LOCKS.guard:
        first = subject not in _WARNED
        _WARNED.add(subject)
    return first


_CLEAR_HOOKS: list[Callable[[], None]] = []


def on_clear(hook: Callable[[], None]) -> None:
    """Makes `clear_caches()` call `hook` too (for modules loaded on demand)."""
    _CLEAR_HOOKS.append(hook)


def clear_caches() -> None:
    """Empties every cache of the package (compiled kernels, remembered compile failures, every
    kernel's record) and what its GPU backends keep, and JAX's caches, whose lowered
    computations embed compiled kernels: what they held can be freed, and the next call lowers
    and compiles again (after editing a kernel's dependencies in place, or changing
    JAX_TRITON_ROCM_HSACO_DELIVERY)."""
    import jax

    for cache in CACHES:
        cache.clear()
    for hook in _CLEAR_HOOKS:
        hook()
    jax.clear_caches()
