"""Triton's on-disk cache entry for one compile, checked before its binary is used.

Triton trusts what its cache holds: a truncated CUBIN or HSACO is handed out as it is, and a
garbled metadata file makes every later compile of the kernel fail with a bare JSONDecodeError.
So before `triton.compile` runs, the entry it will read is checked: the group file and every
file it lists can be read, the metadata parses, has the fields the package reads and names this
entry and target, and the binary is an ELF for the target that holds all of its headers and
sections. A damaged entry is emptied with Triton's own atomic `put_group` (an empty group is a
miss), so Triton compiles again and replaces each file atomically, and one warning names the
damaged file. What `triton.compile` returns is checked the same way (another process may damage
the entry in between); a binary still damaged after one replacement is an error.

Processes sharing the cache: each finds the damage itself and compiles again; files are only
ever replaced atomically (never deleted), so a reader sees either the old file or a whole new
one, and at worst a kernel compiles once more than needed.

Only Triton's default file cache is checked before the compile; a custom `TRITON_CACHE_MANAGER`
keeps its own layout, and only what `triton.compile` returns is checked.

A usable on-disk cache for the package's `triton.compile` calls, whatever the environment says.

jax-triton 0.3.1 sets `os.environ["TRITON_CACHE_DIR"] = ""` when it is imported (it compiles
without Triton's file cache). Triton 3.6-3.9 read that variable through `triton.knobs.cache.dir`
at every compile and, finding it empty, fail with "Could not create or locate cache dir". People
moving from jax-triton have both packages in one process, so the package's compiles use Triton's
default location (`triton.knobs.cache.get_triton_dir("cache")`, under `TRITON_HOME` or `~`)
while the variable is empty, and say so once.

How: while at least one of the package's compiles runs, the default goes in the knob object's
own `__dict__`, which Triton's knob descriptor reads before the environment. Writing the
attribute the ordinary way would also write `os.environ` (Triton propagates knobs to the
environment), and the user's environment must not change. When the last compile ends, the
knob is given back as it was.

Threads: compiles run in parallel threads; a count of compiles in flight, under one lock from
`_state.LOCKS`, makes the first one set the knob and the last one restore it. Another library's
compile that runs meanwhile also finds the default location instead of failing, which is the
only effect the override can have on it.

Unwritable: where Triton's cache folder cannot be made or written (read-only, under a file, too
long a path, a full disk; the folder given by `TRITON_CACHE_DIR` or Triton's default under
`TRITON_HOME` or `HOME`), `triton.compile` raises an OSError naming a path in it or above it.
`compile_in_usable_cache` then compiles once more with the knob pointing at a private temporary
folder, shared by the compiles in flight and removed when the last one ends, and logs one warning
naming the variable that chose the folder, the folder and the reason. Nothing of it is
remembered: the next compile tries the folder again, so a folder made writable in a running
process caches again from its next compile. Triton's dump folder (`TRITON_DUMP_DIR`, with
`TRITON_KERNEL_DUMP=1`) gets the same, with a private folder that is kept (it holds the dump
asked for) and named in the warning.

Fork: a child forked while compiles were in flight has none running; it restores the knob
itself and leaves a private folder to the parent (see `_restore_after_fork`).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from jax_triton_rocm.base import _state


logger = logging.getLogger("jax_triton_rocm")

# ELF e_machine of each Triton backend's binary.
ELF_MACHINES = {"cuda": (190, "EM_CUDA, a CUBIN"), "hip": (224, "EM_AMDGPU, an HSACO")}
_ELF_HEADER_BYTES = 64  # ELF64
_SECTION_HEADER_BYTES = 64  # ELF64
_SHT_NOBITS = 8  # a section that takes no bytes in the file (.bss)

# Metadata fields the package or Triton's loader read, with their types (None may stand for 0).
_REQUIRED_FIELDS = {"name": str, "num_warps": int, "shared": int, "target": dict, "hash": str}
_OPTIONAL_INT_FIELDS = ("num_ctas", "warp_size", "global_scratch_size", "global_scratch_align",
                        "profile_scratch_size")

_warned: set[str] = set()


class DamagedEntry(RuntimeError):
    """Triton's cache returned a damaged binary again after its entry was replaced."""


def elf_problem(data: bytes, backend: str) -> str | None:
    """What is wrong with `data` as the binary of Triton backend `backend` ("cuda", "hip").

    Returns None for a 64-bit little-endian ELF of the backend's machine whose program headers,
    section headers and sections all lie within the data; else a sentence saying what is wrong.
    """
    machine, what = ELF_MACHINES[backend]
    if len(data) < _ELF_HEADER_BYTES:
        return f"{len(data)} bytes, too short for an ELF file ({what} was expected)"
    if data[:4] != b"\x7fELF":
        return f"not an ELF file: it starts with {data[:8]!r} ({what} was expected)"
    if data[4] != 2 or data[5] != 1:
        return "not a 64-bit little-endian ELF file"
    found = struct.unpack_from("<H", data, 18)[0]
    if found != machine:
        others = {m: w for m, w in ELF_MACHINES.values()}
        return (f"an ELF file for machine {found} ({others.get(found, 'another format')}), "
                f"not {machine} ({what})")
    phoff, shoff = struct.unpack_from("<QQ", data, 0x20)
    phentsize, phnum, shentsize, shnum = struct.unpack_from("<HHHH", data, 0x36)
    if shnum == 0 or shentsize != _SECTION_HEADER_BYTES:
        return f"a malformed ELF file ({shnum} sections of {shentsize} bytes)"
    end = max(phoff + phnum * phentsize, shoff + shnum * shentsize)
    if end <= len(data):
        for i in range(shnum):
            kind, = struct.unpack_from("<I", data, shoff + i * shentsize + 4)
            offset, size = struct.unpack_from("<QQ", data, shoff + i * shentsize + 24)
            if kind != _SHT_NOBITS:
                end = max(end, offset + size)
    if end > len(data):
        return f"truncated: {len(data)} bytes, but its headers and sections reach byte {end}"
    return None


def metadata_problem(meta: Any, target: Any, entry_hash: str | None = None) -> str | None:
    """What is wrong with Triton's metadata `meta` (a dict) for a compile for `target`.

    `meta["target"]` may be the JSON dict or Triton's `GPUTarget`. With `entry_hash`, the
    metadata must also name that entry (a file copied from another entry does not).
    """
    if not isinstance(meta, dict):
        return f"metadata is a {type(meta).__name__}, not a JSON object"
    for field, kind in _REQUIRED_FIELDS.items():
        value = meta.get(field)
        if field == "target" and value is not None and not isinstance(value, dict):
            value = {k: getattr(value, k, None) for k in ("backend", "arch", "warp_size")}
        if not isinstance(value, kind) or isinstance(value, bool):
            return f"metadata field {field!r} is {value!r}, not a {kind.__name__}"
        if field == "target":
            found = (value.get("backend"), value.get("arch"), value.get("warp_size"))
            wanted = (target.backend, target.arch, target.warp_size)
            if found != wanted:
                return f"metadata is for target {found}, not {wanted}"
    for field in _OPTIONAL_INT_FIELDS:
        value = meta.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            return f"metadata field {field!r} is {value!r}, not an integer"
    if entry_hash is not None and meta["hash"] != entry_hash:
        return f"metadata belongs to another entry (hash {meta['hash']})"
    return None


def triton_cache_hash(source: Any, target: Any, options: dict[str, Any]) -> str:
    """The hash `triton.compile(source, target=target, options=options)` files its result under.

    Computed as `triton.compile` does, with Triton's own functions; tests compare it with the
    `hash` of what `triton.compile` returns.
    """
    from triton import knobs
    from triton.compiler import compiler

    backend = compiler.make_backend(target)
    parsed = backend.parse_options(dict(options, **source.parse_options()))
    key = compiler.get_cache_key(source, backend, parsed,
                                 env_vars=compiler.get_cache_invalidating_env_vars())
    inspection_hook = getattr(knobs.runtime, "add_stages_inspection_hook", None)
    if inspection_hook is not None:
        key += inspection_hook()[0]
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def entry_problem(manager: Any, file_name: str, target: Any, binary_ext: str,
                  entry_hash: str) -> tuple[str, str] | None:
    """(damaged file, what is wrong) for the entry `manager` (a FileCacheManager) keeps, or None
    where it is whole or absent (Triton then compiles).

    The group file must be readable JSON whose "child_paths" is a mapping that lists the
    metadata and the binary; then every file it lists must be readable: the binary an ELF for
    the target (`elf_problem`), every other file non-empty UTF-8 text, and the metadata JSON
    that names this entry and target (`metadata_problem`).
    """
    metadata_file = f"{file_name}.json"
    group_path = manager.get_file(f"__grp__{metadata_file}")
    if group_path is None:
        return None
    try:
        with open(group_path, encoding="utf-8") as group_file:
            children = json.load(group_file)["child_paths"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return group_path, f"unreadable group file ({type(err).__name__}: {err})"
    if not isinstance(children, dict):
        return group_path, f"group file lists {type(children).__name__}, not a mapping"
    if not children:
        return None
    for needed in (metadata_file, f"{file_name}.{binary_ext}"):
        if needed not in children:
            return group_path, f"the group file lists no {needed}"
    for child, path in children.items():
        try:
            with open(path, "rb") as child_file:
                data = child_file.read()
        except (OSError, TypeError) as err:
            return str(path), f"unreadable ({type(err).__name__}: {err})"
        if child.endswith(f".{binary_ext}"):
            problem = elf_problem(data, target.backend)
        elif not data:
            problem = "empty"
        else:
            try:
                text = data.decode("utf-8")
                meta = json.loads(text) if child == metadata_file else None
            except UnicodeDecodeError as err:
                problem = f"not text ({err})"
            except ValueError as err:  # after UnicodeDecodeError, a ValueError itself
                problem = f"metadata is not JSON ({err})"
            else:
                problem = (metadata_problem(meta, target, entry_hash) if child == metadata_file
                           else None)
        if problem is not None:
            return path, problem
    return None


def discard(entry_hash: str, file_name: str) -> None:
    """Empties the entry's group (atomically, through Triton's cache manager): Triton's next
    compile misses it and replaces every file."""
    from triton.runtime.cache import get_cache_manager

    get_cache_manager(entry_hash).put_group(f"{file_name}.json", {})


def warn_damaged(path: str, problem: str, kernel: str) -> None:
    """Logs, once per damaged file, that the entry is compiled again."""
    with _state.LOCKS.guard:
        if path in _warned:
            return
        _warned.add(path)
    logger.warning("jax_triton_rocm: Triton's cache entry for kernel %s is damaged: %s: %s. "
                   "Compiling the kernel again and replacing the entry.", kernel, path, problem)


def compile_checked(triton: Any, source: Any, target: Any, options: dict[str, Any],
                    binary_ext: str) -> Any:
    """`triton.compile(source, target=target, options=options)` from a checked cache entry.

    Before the compile, the entry it will read is checked (`entry_problem`; only in Triton's
    default file cache: a custom cache manager's layout is its own) and emptied if damaged.
    What the compile returns is checked too, its binary (`elf_problem`) and its metadata
    (`metadata_problem`); where it is damaged, the entry is emptied and compiled once more.

    Raises:
      DamagedEntry: the binary was damaged again after the entry was replaced (names the file).
      OSError: the cache folder cannot be read or written (the caller falls back).
      Triton's own compile errors.
    """
    from triton import knobs
    from triton.runtime.cache import get_cache_manager

    file_name = source.name[:150]  # as triton.compile names the files
    if knobs.cache.manager_class is None:
        entry_hash = triton_cache_hash(source, target, options)
        damage = entry_problem(get_cache_manager(entry_hash), file_name, target, binary_ext,
                               entry_hash)
        if damage is not None:
            warn_damaged(damage[0], damage[1], source.name)
            discard(entry_hash, file_name)
    for attempt in range(2):
        compiled = triton.compile(source, target=target, options=dict(options))
        # (file, what is wrong) with what it returned, or None where it is whole.
        group = getattr(compiled, "metadata_group", {}) or {}
        damage = None
        problem = elf_problem(bytes(compiled.asm.get(binary_ext, b"")), target.backend)
        if problem is not None:
            binary_file = next((p for c, p in group.items() if c.endswith(f".{binary_ext}")), "")
            damage = binary_file or f"the {binary_ext} of entry {compiled.hash}", problem
        else:
            metadata = compiled.metadata
            meta = metadata._asdict() if hasattr(metadata, "_asdict") else dict(vars(metadata))
            problem = metadata_problem(meta, target)
            if problem is not None:
                metadata_file = next((p for c, p in group.items() if c.endswith(".json")), "")
                damage = metadata_file or f"the metadata of entry {compiled.hash}", problem
        if damage is None:
            return compiled
        if attempt == 0:
            warn_damaged(damage[0], damage[1], source.name)
            discard(compiled.hash, file_name)
    raise DamagedEntry(
        f"Triton's cache gave a damaged binary for kernel {source.name} again after its entry "
        f"was replaced: {damage[0]}: {damage[1]}. Delete that folder, or set TRITON_CACHE_DIR "
        f"to another folder, and lower again.")



ENV_CACHE_DIR = "TRITON_CACHE_DIR"
# The folders of Triton's that a compile writes: knob name -> the variable that sets it.
FOLDER_VARIABLES = {"dir": ENV_CACHE_DIR, "dump_dir": "TRITON_DUMP_DIR"}
_MISSING = object()

T = TypeVar("T")

_in_flight = 0
_saved: dict[str, Any] = {}  # the knobs' own `__dict__` entries before the override
_private: str | None = None  # the private folder compiles use while the cache is unwritable
_private_dump: str | None = None  # the private dump folder, kept for the life of the process
_warned_cache_dir = False
_warned_unwritable: set[tuple[str, int | None]] = set()
# Errors that name no path but come from writing the cache's files.
_FULL_DISK = (errno.ENOSPC, errno.EDQUOT)


def needs_default_dir(cache_knobs: Any) -> bool:
    """Whether Triton's file cache has no directory to use (e.g. `TRITON_CACHE_DIR=""`).

    A custom `TRITON_CACHE_MANAGER` may need no directory, so it is left alone.
    """
    return cache_knobs.manager_class is None and not cache_knobs.dir


def default_dir(cache_knobs: Any) -> str:
    """Triton's default cache location: `$TRITON_HOME/.triton/cache`, else `~/.triton/cache`."""
    return cache_knobs.get_triton_dir("cache")


def _warn_once(directory: str) -> None:
    global _warned_cache_dir
    if _warned_cache_dir:
        return
    _warned_cache_dir = True
    logger.warning(
        "jax_triton_rocm: %s is set to %r (jax-triton 0.3 sets it to '' when imported), which "
        "leaves Triton no cache directory. The package's Triton compiles use Triton's default "
        "location %s instead; the environment is not changed. Set %s to a writable folder to "
        "choose another.", ENV_CACHE_DIR, os.environ.get(ENV_CACHE_DIR), directory,
        ENV_CACHE_DIR)


@contextlib.contextmanager
def usable_cache_dir(triton: Any, *, private: tuple[str, ...] = ()) -> Iterator[None]:
    """Runs the body with a cache directory Triton can use, for `triton.compile`.

    Triton's own folders are used as they are where they name one (the usual case). Where its
    cache has none (`needs_default_dir`), the knobs point at Triton's default location while the
    body runs; `private` names the knobs ("dir", "dump_dir") that point at private folders for
    the body instead (the cache's is removed when the last compile ends, the dump's is kept).
    Every compile counts as in flight while it runs, overridden or not, so the knobs go back as
    they were only when the last one ends: no compile sees another's override undone under it.
    """
    global _in_flight, _saved, _private, _private_dump
    cache_knobs = triton.knobs.cache
    lock = _state.LOCKS.lock_for("triton-cache-dir")
    with lock:
        default = needs_default_dir(cache_knobs)
        if (default or private) and not _saved:
            _saved = {name: vars(cache_knobs).get(name, _MISSING) for name in FOLDER_VARIABLES}
        if default:
            directory = default_dir(cache_knobs)
            vars(cache_knobs)["dir"] = directory  # bypasses Triton's write to os.environ
            _warn_once(directory)
        if "dir" in private:
            if _private is None:
                _private = tempfile.mkdtemp(prefix="jax_triton_rocm_triton_cache_")
            vars(cache_knobs)["dir"] = _private
        if "dump_dir" in private:
            if _private_dump is None:
                _private_dump = tempfile.mkdtemp(prefix="jax_triton_rocm_triton_dump_")
            vars(cache_knobs)["dump_dir"] = _private_dump
        _in_flight += 1
    try:
        yield
    finally:
        with lock:
            _in_flight -= 1
            if _in_flight == 0:
                if _saved:  # something was overridden
                    _restore(cache_knobs)
                if _private is not None:
                    shutil.rmtree(_private, ignore_errors=True)
                    _private = None


def _restore(cache_knobs: Any) -> None:
    global _saved
    for name, saved in _saved.items():
        if saved is _MISSING:
            vars(cache_knobs).pop(name, None)
        else:
            vars(cache_knobs)[name] = saved
    _saved = {}


def unwritable_reason(err: OSError, directory: str) -> str | None:
    """Why `err`, raised by a compile, means the folder `directory` cannot be made or written
    (the error names a path in it, the folder itself, or a folder above it that is a file, read
    only or too long); None where it is about something else."""
    if err.filename is None and err.errno in _FULL_DISK:
        return str(err)
    folder = os.path.abspath(directory)
    for path in (err.filename, err.filename2):
        if isinstance(path, (str, bytes, os.PathLike)):
            path = os.path.abspath(os.fsdecode(path))
            if (path == folder or path.startswith(folder + os.sep)
                    or folder.startswith(path.rstrip(os.sep) + os.sep)):
                return _shortened(str(err), path)
    return None


def _shortened(text: str, path: str) -> str:
    """`text` with `path` in it shortened to its ends where it is too long to read."""
    return text.replace(path, shown_path(path)) if len(path) > 200 else text


def shown_path(path: str) -> str:
    """`path` as a message shows it: whole, or its ends and its length where it is long."""
    if len(path) <= 200:
        return path
    return f"{path[:80]}...{path[-60:]} ({len(path)} characters)"


def _failing_folder(err: OSError, cache_knobs: Any) -> tuple[str, str] | None:
    """(knob name, reason) of the folder of Triton's that `err` says cannot be written; None
    where `err` is about no such folder (a full disk counts as the cache's)."""
    folders = {"dir": cache_knobs.dir}
    if _compilation_dumps():
        folders["dump_dir"] = cache_knobs.dump_dir
    for name, directory in folders.items():
        reason = unwritable_reason(err, directory) if directory else None
        if reason is not None:
            return name, reason
    return None


def _compilation_dumps() -> bool:
    import triton

    return bool(getattr(getattr(triton.knobs, "compilation", None), "dump_ir", False))


def _setting(name: str, directory: str) -> str:
    """Which variable chose Triton's folder `name`, as the warning names it."""
    variable = FOLDER_VARIABLES[name]
    if variable in os.environ:
        return f"{variable}={shown_path(os.environ[variable])!r}"
    for home in ("TRITON_HOME", "HOME"):
        if home in os.environ:
            return (f"{variable} unset: Triton's default under {home}="
                    f"{shown_path(os.environ[home])!r}")
    return f"{variable} unset: Triton's default"


def _warn_unwritable(name: str, directory: str, err: OSError, reason: str) -> None:
    """Logs once per folder and kind of failure that compiles go on without the folder."""
    with _state.LOCKS.guard:
        if (directory, err.errno) in _warned_unwritable:
            return
        _warned_unwritable.add((directory, err.errno))
    variable = FOLDER_VARIABLES[name]
    if name == "dir":
        instead = ("Kernels compile without it (in a private temporary folder, removed "
                   "afterwards), so nothing is cached on disk")
    else:
        instead = f"Triton's dumps go to {_private_dump} instead"
    logger.warning(
        "jax_triton_rocm: Triton's %s folder %s (%s) cannot be written: %s. %s; set %s to a "
        "writable folder.", "cache" if name == "dir" else "dump", shown_path(directory),
        _setting(name, directory), reason, instead, variable)


def compile_in_usable_cache(triton: Any, compile_fn: Callable[[], T]) -> T:
    """Runs `compile_fn` (which calls `triton.compile`) with cache and dump folders Triton can
    use.

    Where one cannot be made or written, runs it again with that folder private (see the
    module's docstring), after one warning; the cache and the dump folder may both need it.

    Raises:
      whatever `compile_fn` raises, other than the unwritable folders' OSError.
    """
    private: tuple[str, ...] = ()
    failure: OSError | None = None
    warning: tuple | None = None
    while True:
        with usable_cache_dir(triton, private=private):
            cache_knobs = triton.knobs.cache
            if warning is not None:  # here, where the private folder it names exists
                _warn_unwritable(*warning)
            try:
                return compile_fn()
            except OSError as err:
                failing = _failing_folder(err, cache_knobs)
                if failing is None or failing[0] in private:
                    if failure is not None:
                        raise err from failure
                    raise
                name, reason = failing
                warning = (name, getattr(cache_knobs, name), err, reason)
                private, failure = (*private, name), err


def _restore_after_fork() -> None:
    """In a child forked mid-compile: no compile runs here, so the knob goes back as it was; a
    private folder is the parent's to remove."""
    global _in_flight, _private
    if _in_flight:
        import triton

        _restore(triton.knobs.cache)
        _in_flight = 0
    _private = None


_state.on_fork(_restore_after_fork)
