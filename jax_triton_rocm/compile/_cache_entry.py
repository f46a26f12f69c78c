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
"""

from __future__ import annotations

import hashlib
import json
import logging
import struct
from typing import Any

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


def _read_group(manager: Any, metadata_file: str) -> tuple[str | None, Any, str | None]:
    """(group file path, its child paths, what is wrong) for the entry of `manager`."""
    group_path = manager.get_file(f"__grp__{metadata_file}")
    if group_path is None:
        return None, {}, None
    try:
        with open(group_path, encoding="utf-8") as group_file:
            children = json.load(group_file)["child_paths"]
    except (OSError, ValueError, KeyError, TypeError) as err:
        return group_path, {}, f"unreadable group file ({type(err).__name__}: {err})"
    if not isinstance(children, dict):
        return group_path, {}, f"group file lists {type(children).__name__}, not a mapping"
    return group_path, children, None


def entry_problem(manager: Any, file_name: str, target: Any, binary_ext: str,
                  entry_hash: str) -> tuple[str, str] | None:
    """(damaged file, what is wrong) for the entry `manager` (a FileCacheManager) keeps, or None
    where it is whole or absent (Triton then compiles)."""
    metadata_file = f"{file_name}.json"
    group_path, children, problem = _read_group(manager, metadata_file)
    if problem is not None or not children:
        return (group_path, problem) if problem is not None else None
    for needed in (metadata_file, f"{file_name}.{binary_ext}"):
        if needed not in children:
            return group_path, f"the group file lists no {needed}"
    for child, path in children.items():
        try:
            with open(path, "rb") as child_file:
                data = child_file.read()
        except (OSError, TypeError) as err:
            return str(path), f"unreadable ({type(err).__name__}: {err})"
        problem = _file_problem(child, data, metadata_file, binary_ext, target, entry_hash)
        if problem is not None:
            return path, problem
    return None


def _file_problem(child: str, data: bytes, metadata_file: str, binary_ext: str, target: Any,
                  entry_hash: str) -> str | None:
    if child.endswith(f".{binary_ext}"):
        return elf_problem(data, target.backend)
    if not data:
        return "empty"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        return f"not text ({err})"
    if child != metadata_file:
        return None
    try:
        meta = json.loads(text)
    except ValueError as err:
        return f"metadata is not JSON ({err})"
    return metadata_problem(meta, target, entry_hash)


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


def replace_if_damaged(source: Any, target: Any, options: dict[str, Any],
                       binary_ext: str) -> None:
    """Checks the cache entry `triton.compile(source, ...)` will read; empties it if damaged.

    Raises:
      OSError: the cache folder cannot be read or written (the caller falls back).
    """
    from triton import knobs
    from triton.runtime.cache import get_cache_manager

    if knobs.cache.manager_class is not None:
        return  # a custom cache manager: its layout is its own
    entry_hash = triton_cache_hash(source, target, options)
    file_name = source.name[:150]  # as triton.compile names the files
    manager = get_cache_manager(entry_hash)
    damage = entry_problem(manager, file_name, target, binary_ext, entry_hash)
    if damage is not None:
        warn_damaged(damage[0], damage[1], source.name)
        discard(entry_hash, file_name)


def result_problem(compiled: Any, target: Any, binary_ext: str) -> tuple[str, str] | None:
    """(file, what is wrong) with what `triton.compile` returned, or None where it is whole."""
    group = getattr(compiled, "metadata_group", {}) or {}
    binary_file = next((p for c, p in group.items() if c.endswith(f".{binary_ext}")), "")
    problem = elf_problem(bytes(compiled.asm.get(binary_ext, b"")), target.backend)
    if problem is not None:
        return binary_file or f"the {binary_ext} of entry {compiled.hash}", problem
    metadata = compiled.metadata
    meta = metadata._asdict() if hasattr(metadata, "_asdict") else dict(vars(metadata))
    problem = metadata_problem(meta, target)
    if problem is not None:
        metadata_file = next((p for c, p in group.items() if c.endswith(".json")), "")
        return metadata_file or f"the metadata of entry {compiled.hash}", problem
    return None


def compile_checked(triton: Any, source: Any, target: Any, options: dict[str, Any],
                    binary_ext: str) -> Any:
    """`triton.compile(source, target=target, options=options)` from a checked cache entry.

    A damaged entry is replaced first; a result that is still damaged is replaced once more.

    Raises:
      DamagedEntry: the binary was damaged again after the entry was replaced (names the file).
      OSError: the cache folder cannot be read or written.
      Triton's own compile errors.
    """
    replace_if_damaged(source, target, options, binary_ext)
    for attempt in range(2):
        compiled = triton.compile(source, target=target, options=dict(options))
        damage = result_problem(compiled, target, binary_ext)
        if damage is None:
            return compiled
        if attempt == 0:
            warn_damaged(damage[0], damage[1], source.name)
            discard(compiled.hash, source.name[:150])
    raise DamagedEntry(
        f"Triton's cache gave a damaged binary for kernel {source.name} again after its entry "
        f"was replaced: {damage[0]}: {damage[1]}. Delete that folder, or set TRITON_CACHE_DIR "
        f"to another folder, and lower again.")
