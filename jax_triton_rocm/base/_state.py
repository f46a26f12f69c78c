"""All process-wide state of the package, with its thread, fork and memory rules.

Where it lives: the caches here (`CACHES`, one comment each), and every other piece, in the
module that keeps it, listed in `ELSEWHERE` (module, name, what it keeps).

Threads: every structure here is guarded by the lock of one registry (`LOCKS.guard`), held for
short critical sections only; work on one item (compiling a kernel, writing its file,
prewarming it) holds that item's lock (`LOCKS.item_lock`), which lives only while in use.

Memory: every cache is bounded (by `JAX_TRITON_ROCM_KERNEL_CACHE_SIZE` or
`JAX_TRITON_ROCM_CALL_CACHE_SIZE`: docs/routes.md, "Memory"); `clear_caches()` empties them all.

Fork: a child of `os.fork()` gets fresh locks, keeps finished kernels, forgets in-flight
compiles, lowered calls and plans (`on_fork`); a vendor module's state has its own fork rule
beside it (`hip._hip_files`). Why: docs/design.md, "Process-wide state".
"""

from __future__ import annotations

import collections
import os
import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from jax_triton_rocm.base import _env

T = TypeVar("T")

class LockRegistry:
    """Named locks, and per-item locks that live while in use; fresh after `os.fork()`.

    Attributes:
      guard: the registry's own lock, for short critical sections on shared containers; a
        fresh one after a fork, so read it at each use instead of keeping it.
      triton_language, triton_cache_dir, triton_key: the locks of Triton's front end (what
        `triton_language_lock` returns), cache folder knobs and remembered key, fresh after a
        fork; attributes, so that a compile takes them without calling back here.
    """

    def __init__(self) -> None:
        self.reset_after_fork()

    def lock_for(self, name: Hashable) -> threading.Lock:
        """The lock named `name` ("register", ...): one object per name until the next fork.

        For the package's few fixed names; work on one of many items takes `item_lock`.
        """
        with self.guard:
            return self._locks.setdefault(name, threading.Lock())

    def item_lock(self, key: Hashable) -> threading.Lock:
        """The lock of one item (a kernel, a file, a prewarm), to hold with `with`.

        Threads asking for the same key while one holds or awaits it share one lock, which lives
        only while a thread refers to it: a key no thread is working on costs nothing.
        """
        with self.guard:
            return self._items.setdefault(key, threading.Lock())

    def reset_after_fork(self) -> None:
        self.guard = threading.Lock()
        self.triton_language = threading.Lock()
        self.triton_cache_dir = threading.Lock()
        self.triton_key = threading.Lock()
        self._locks: dict[Hashable, threading.Lock] = {}
        self._items: weakref.WeakValueDictionary = weakref.WeakValueDictionary()

    def __len__(self) -> int:
        """How many locks exist: the named ones and the items' in use."""
        return len(self._locks) + len(self._items)


LOCKS = LockRegistry()


_MISSING = object()


class BoundedCache:
    """A dict behind the registry's lock that forgets its least recently used entries beyond the
    bound set by an environment variable (`_env.cache_size`).

    Attributes:
      env: the variable that bounds it.
    """

    def __init__(self, locks: LockRegistry, env: str) -> None:
        self._locks = locks
        self.env = env
        self._entries: collections.OrderedDict[Hashable, Any] = collections.OrderedDict()

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The entry for `key` (now the most recently used), or `default`."""
        with self._locks.guard:
            value = self._entries.get(key, _MISSING)
            if value is _MISSING:
                return default
            self._entries.move_to_end(key)
            return value

    def put(self, key: Hashable, value: Any) -> Any:
        """Stores `value` for `key`, forgetting the oldest entries beyond the bound; returns it."""
        limit = _env.cache_size(self.env)
        with self._locks.guard:
            self._entries[key] = value
            self._entries.move_to_end(key)
            while len(self._entries) > limit:
                self._entries.popitem(last=False)
        return value

    def memo(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """The value kept for `key`, else `make()`'s, kept. A key that does not hash (a value in
        it, such as a constexpr, that hashes badly) keeps nothing: `make()` every time, never
        an error: the one rule for a memo whose key may not hash."""
        try:
            found = self.get(key)
        except TypeError:
            return make()
        return self.put(key, make()) if found is None else found

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        with self._locks.guard:
            self._entries.clear()


class KernelRecords(BoundedCache):
    """One record per kernel object (a `@triton.jit` function, or the object a call passed),
    by its id: what the package derived from it, by what was derived (`derived`).

    The one staleness rule: a record holds while its kernel is the same object (kept in the
    record, so that its id is not reused) with the same source text (the same object: Triton
    replaces it on an edit) and the same `noinline` and `debug` settings; else everything
    derived from the kernel is derived again. What a derived value reads beyond the kernel (the
    objects its global names resolve to) is checked by its user (`compile._compile.graph_key`).
    """

    def _record(self, kernel: Any) -> dict:
        """What was derived from `kernel`, by what: the kept record, else a fresh one, kept."""
        src = getattr(kernel, "src", None)
        settings = getattr(kernel, "noinline", None), getattr(kernel, "debug", None)
        record = self.get(id(kernel))
        if (record is None or record[0] is not kernel or record[1] is not src
                or record[2] != settings):
            record = self.put(id(kernel), (kernel, src, settings, {}))
        return record[3]

    def find(self, kernel: Any, what: Hashable) -> Any:
        """What was derived as `what` from `kernel`, or None (none, or the record is stale)."""
        return self._record(kernel).get(what)

    def keep(self, kernel: Any, what: Hashable, value: T) -> T:
        """Keeps `value` as `what` derived from `kernel`; returns it."""
        self._record(kernel)[what] = value
        return value

    def derived(self, kernel: Any, what: Hashable, make: Callable[[], T]) -> T:
        """`what` derived from `kernel`: the kept value, else `make()`'s, kept."""
        record = self._record(kernel)
        if (found := record.get(what)) is None:
            found = record[what] = make()
        return found


class _Failure:
    """A compile that raised, kept in place of the kernel."""

    __slots__ = ("error",)

    def __init__(self, error: Exception) -> None:
        self.error = error


class KernelCache(BoundedCache):
    """Compiled kernels by kernel key; each key compiled once, however many threads ask, and the
    least recently used forgotten beyond `JAX_TRITON_ROCM_KERNEL_CACHE_SIZE` (compiled again,
    from Triton's on-disk cache, when next lowered).

    A miss takes the key's item lock, checks again and compiles under it, so concurrent
    lowerings of one kernel compile it once, while different keys compile in parallel. A compile
    that raises an error of the kernel's own (`remember` says which) is remembered as well, while
    its entry is kept (or until `clear`): the kernel key covers every input of the compile, so a
    second try would fail the same way, only later; the threads that waited on the lock and every
    later lowering get the same error at once. Other errors (the environment's: a cache folder
    that cannot be written, ...) are not remembered: the next lowering compiles again. Counters
    (`stats`) let tests and benchmarks see hits, compiles and failures.
    """

    def __init__(self, locks: LockRegistry) -> None:
        super().__init__(locks, _env.ENV_KERNEL_CACHE_SIZE)
        self.stats: collections.Counter[str] = collections.Counter()

    def get_or_compile(self, key: str, compile_fn: Callable[[], T],
                       remember: Callable[[Exception], bool] = lambda err: True) -> T:
        """The entry for `key`, made by `compile_fn` on a miss; an error `remember` accepts is
        kept in its place (and raised again on each later request)."""
        entry = self.get(key)
        if entry is None:
            with self._locks.item_lock(("kernel", key)):
                entry = self.get(key)  # another thread may have compiled it meanwhile
                if entry is None:
                    try:
                        entry = compile_fn()
                    except Exception as err:
                        with self._locks.guard:
                            self.stats["failures"] += 1
                        if remember(err):
                            self.put(key, _Failure(err))
                        raise
                    self.put(key, entry)
                    with self._locks.guard:
                        self.stats["compiles"] += 1
                    return entry
        with self._locks.guard:
            self.stats["hits"] += 1
        if isinstance(entry, _Failure):
            raise entry.error
        return entry

    def clear(self) -> None:
        super().clear()
        with self._locks.guard:
            self.stats.clear()


COMPILED_KERNELS = KernelCache(LOCKS)
# Lowered calls by everything that decides them (`routes._lowering`), each with
# the kernel object its key names (kept alive, so its id is not reused).
LOWERED_CALLS = BoundedCache(LOCKS, _env.ENV_CALL_CACHE_SIZE)
# Calls whose arguments were laid out without error (`spec._layout.check_kernel_arguments`).
CHECKED_CALLS = BoundedCache(LOCKS, _env.ENV_CALL_CACHE_SIZE)
# Plain kernels' launches, compiled kernels and images (or XLA's call) by all but the shapes and
# runtime scalar values (`routes._lowering._lower_uncached`), each with its kernel object (its
# id is in the key).
PLANS = BoundedCache(LOCKS, _env.ENV_CALL_CACHE_SIZE)
# Each kernel image's encoding and its deflated bytes (`routes.jaxlib._proto`).
KERNEL_BYTES = BoundedCache(LOCKS, _env.ENV_KERNEL_CACHE_SIZE)
DEFLATED_KERNELS = BoundedCache(LOCKS, _env.ENV_KERNEL_CACHE_SIZE)
# Each compiled CUBIN as jaxlib's call carries it, without its PTX text (`backends._cuda`): one
# copy per binary, the same bytes object at every lowering of a plan the memo does not keep.
CARRIED_BINARIES = BoundedCache(LOCKS, _env.ENV_KERNEL_CACHE_SIZE)
# Per kernel object, one record (`KernelRecords`): the globals its source reads
# ("references", `compile._compile`), its interpreter twin ("interpreted",
# `routes.cpu._interpret_host`), the @triton.jit function of Triton's InterpretedFunction ("jit
# twin", `spec._spec.unwrap`), its parameters' roles ("roles", `spec._kinds`), its trampolines
# (("trampoline", source), `plan._trampoline`), a trampoline's IR as the installed jaxlib reads
# it, or why not (("checked IR", ...), `routes.xla._xla_native`) and the kernel taken apart
# ("unwrapped", `api._call`).
KERNEL_RECORDS = KernelRecords(LOCKS, _env.ENV_CALL_CACHE_SIZE)
# `triton_call`'s layouts by all but shapes and scalar values (`checks._bound`; the kernel in the
# key, so its id stays unique).
CALL_LAYOUTS = BoundedCache(LOCKS, _env.ENV_CALL_CACHE_SIZE)
CACHES = (COMPILED_KERNELS, LOWERED_CALLS, CHECKED_CALLS, PLANS, KERNEL_BYTES, DEFLATED_KERNELS,
          CARRIED_BINARIES, KERNEL_RECORDS, CALL_LAYOUTS)
# Every other piece of process-wide state, where it lives (package module, name, what it
# keeps); a new one is added here too (tests/test_module_layout.py checks that each exists).
ELSEWHERE = (
    ("base._env", "_CHECKED_VALUES", "the variables' values last found valid"),
    ("base._files", "_warned_unsafe", "folders already warned about as unsafe"),
    ("base._compat", "triton_info", "the installed Triton's version and features (cached)"),
    ("base._compat", "_warn_ffi_autotune", "one warning per process (cached)"),
    ("spec._spec", "_POINTER_TYPES", "Triton pointer type per dtype object"),
    ("spec._hooks", "_descriptor_class", "the hook descriptor class over Triton's (cached)"),
    ("compile._cache", "_warned", "cache problems already warned about"),
    ("compile._folders", "_warned_cache_dir", "one warning about Triton's cache folder"),
    ("compile._folders", "_warned_unwritable", "unwritable cache folders already warned about"),
    ("compile._folders", "_in_flight", "compiles running under the folder override"),
    ("compile._folders", "_saved", "Triton's knobs before the folder override"),
    ("compile._folders", "_private", "the private cache folder while Triton's is unwritable"),
    ("compile._folders", "_private_dump", "the private dump folder"),
    ("compile._folders", "_tried", "the processes that looked for Triton's remembered key"),
    ("compile._gluon", "_checked_source_class", "Gluon's checked source class (cached)"),
    ("backends", "backend", "one backend object per platform (cached)"),
    ("backends._backend", "Backend.fp8_types", "fp8 types per backend and target (cached)"),
    ("backends._cuda", "_ptxas_archs", "ptxas architectures per capability (cached)"),
    ("backends._vendors", "plugin_features", "what each jaxlib plugin reads (cached)"),
    ("backends._vendors", "plugin_triton_module", "each plugin's Triton module (cached)"),
    ("backends._vendors", "assumed_features", "what a plugin of this jaxlib reads (cached)"),
    ("backends.hip._hip_files", "HSACO_FOLDER", "this process's HSACO files (path delivery)"),
    ("backends.hip._hip_files", "LOADED_KERNELS", "kernels the prewarm has launched"),
    ("routes._arch", "_ARCH_STATE", "the named architectures (a JAX config state)"),
    ("routes._arch", "arch_problem", "why an architecture cannot compile (cached)"),
    ("routes._choices", "STORE", "remembered autotune choices"),
    ("routes._choices", "_SESSION", "the tuning session of this context"),
    ("routes._choices", "_swept", "choice folders swept of dead writers' files"),
    ("routes._choices", "_warned", "choice files already warned about"),
    ("routes._primitive", "_registered", "platforms with the lowering rule registered"),
    ("routes._primitive", "ensure_registered", "whether the installed ones are (cached)"),
    ("routes._primitive", "_routes", "each platform's routes (cached)"),
    ("routes.cpu._interpret", "_explained", "one CPU fallback warning per process"),
    ("routes.cpu._shard_callbacks", "_ROUTE", "the shard callback route of this context"),
    ("routes.xla._xla_native", "xla_triton_dialect", "whether jaxlib has Triton's dialect"),
    ("cli._kernels", "kernels", "the CLI's example kernels (cached)"),
)

# What a child of `os.fork()` runs, in order, the locks first (`on_fork`): the package's one
# hook, so that every module's state is reset the same way and in a known order.
_FORK_HOOKS: list[Callable[[], None]] = [LOCKS.reset_after_fork]


def on_fork(hook: Callable[[], None]) -> None:
    """Makes a child of `os.fork()` call `hook` (after the locks are fresh), for state that
    must not outlive the fork: the child's threads, files and caches are its own."""
    _FORK_HOOKS.append(hook)


def _after_fork_in_child() -> None:
    for hook in _FORK_HOOKS:
        hook()


os.register_at_fork(after_in_child=_after_fork_in_child)
# A child starts without the parent's lowered calls and plans: a path-delivered kernel names a
# file of the parent's, which jaxlib would read and delete.
on_fork(LOWERED_CALLS.clear)
on_fork(PLANS.clear)


def triton_language_lock() -> threading.Lock:
    """The lock held while Triton's Python front end, or its interpreter, runs in this process.

    The front end (Python AST to Triton IR) is not safe across threads (CPython 3.11's `ast.parse`
    is not), and the interpreter patches `triton.language` for the whole process while a kernel
    runs: a front end running meanwhile would build IR from the patched language. Compiles still
    overlap in the backend passes and ptxas, where their time goes.
    """
    return LOCKS.triton_language


# Caches kept by modules loaded on demand (the HIP prewarm's), emptied by `clear_caches`.
_CLEAR_HOOKS: list[Callable[[], None]] = []


def on_clear(hook: Callable[[], None]) -> None:
    """Makes `clear_caches()` call `hook` too (for state a vendor module keeps)."""
    _CLEAR_HOOKS.append(hook)


def clear_caches() -> None:
    """Empties every cache of the package (compiled kernels, remembered compile failures,
    lowered calls) and what its GPU backends keep, and clears JAX's caches, whose lowered
    computations embed compiled kernels: what they held can then be freed, and the next call
    really lowers and compiles again (after editing a kernel's dependencies in place, or
    changing JAX_TRITON_ROCM_HSACO_DELIVERY).
    """
    import jax

    for cache in CACHES:
        cache.clear()
    for hook in _CLEAR_HOOKS:
        hook()
    jax.clear_caches()
