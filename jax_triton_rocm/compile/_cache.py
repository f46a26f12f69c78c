"""Triton's on-disk cache for the package's compiles: each entry checked before its binary is
used (`compile_checked`; a cache folder Triton can use is `_folders.compile_in_usable_cache`'s).
What counts as damage, threads and fork: docs/design.md, "Triton's cache"."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import stat
import struct
from typing import Any

from jax_triton_rocm.base import _elf, _files, _state


logger = logging.getLogger("jax_triton_rocm")

# Bounds on an entry's files, far above any real kernel's: binaries and IR run to megabytes,
# metadata and the group file to kilobytes.
_FILE_LIMIT = 256 << 20
_JSON_LIMIT = 16 << 20

# Metadata fields the package or Triton's loader read, with their types (None may stand for 0).
_REQUIRED_FIELDS = {"name": str, "num_warps": int, "shared": int, "target": dict, "hash": str}
_OPTIONAL_INT_FIELDS = ("num_ctas", "warp_size", "global_scratch_size", "global_scratch_align",
                        "profile_scratch_size")
# ELF e_machine of each Triton backend's binary.
_MACHINES = {"cuda": (190, "EM_CUDA, a CUBIN"), "hip": (224, "EM_AMDGPU, an HSACO")}
_SYMBOL_BYTES = 24  # ELF64
_SHT_NOBITS = 8  # a section that takes no bytes in the file (.bss)
_SYMBOL_TABLES = (2, 11)  # SHT_SYMTAB, SHT_DYNSYM
_STT_FUNC = 2


class DamagedEntry(RuntimeError):
    """Triton's cache returned a damaged binary again after its entry was replaced."""


@dataclasses.dataclass(frozen=True)
class Request:
    """What one `triton.compile` is asked for, which the entry it reads must match: `kernel` the
    symbol, `options` as Triton's metadata stores them, `extensions` the files a compile writes
    (None where an inspection hook may add stages), `entry_hash` the key Triton files it under."""

    kernel: str
    file_name: str
    target: Any
    binary_ext: str
    asm_ext: str
    options: dict[str, Any]
    extensions: frozenset[str] | None
    entry_hash: str


def compile_request(source: Any, target: Any, options: dict[str, Any], binary_ext: str = "",
                    asm_ext: str = "", symbol: str = "") -> Request:
    """The `Request` of `triton.compile(source, target=target, options=options)`, its options and
    hash computed by Triton's own functions."""
    from triton import knobs
    from triton.compiler import compiler

    backend = compiler.make_backend(target)
    parsed = backend.parse_options(dict(options, **source.parse_options()))
    key = compiler.get_cache_key(source, backend, parsed,
                                 env_vars=compiler.get_cache_invalidating_env_vars())
    inspection_hook = getattr(knobs.runtime, "add_stages_inspection_hook", None)
    extensions = None
    if inspection_hook is not None:
        key += inspection_hook()[0]
    else:
        stages: dict[str, Any] = {}
        backend.add_stages(stages, parsed, source.language)
        extensions = frozenset((*stages, "source", source.ext, "json"))
    # Triton files the entry under the function's name, and names the symbol in the binary and
    # IR after the last dotted part of its qualified name (`add` for `pkg.add`). The options as
    # Triton's metadata file holds them (tuples as lists, objects as their fields).
    return Request(kernel=symbol, file_name=source.name[:150], target=target,
                   binary_ext=binary_ext, asm_ext=asm_ext, extensions=extensions,
                   options=json.loads(json.dumps(vars(parsed), default=vars)),
                   entry_hash=hashlib.sha256(key.encode("utf-8")).hexdigest())


def binary_problem(data: bytes, backend: str, function: str | None = None) -> str | None:
    """What is wrong with `data` as the binary of Triton backend `backend` ("cuda", "hip"), read
    within bounds: None for a 64-bit little-endian ELF of the backend's machine that holds all
    its headers and sections (and defines the function `function`, where given)."""
    machine, what = _MACHINES[backend]
    if len(data) < _elf.HEADER.size:
        return f"{len(data)} bytes, too short for an ELF file ({what} was expected)"
    if data[:4] != b"\x7fELF":
        return f"not an ELF file: it starts with {data[:8]!r} ({what} was expected)"
    if data[4] != 2 or data[5] != 1:
        return "not a 64-bit little-endian ELF file"
    (_, _, found, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
     shstrndx) = _elf.HEADER.unpack_from(data)
    if found != machine:
        others = dict(_MACHINES.values())
        return (f"an ELF file for machine {found} ({others.get(found, 'another format')}), "
                f"not {machine} ({what})")
    if shnum == 0 or shentsize != _elf.SECTION.size:
        return f"a malformed ELF file ({shnum} sections of {shentsize} bytes)"
    end, headers = max(phoff + phnum * phentsize, shoff + shnum * shentsize), []
    if end <= len(data):
        # Each section's (kind, offset, size, link).
        headers = [_elf.SECTION.unpack_from(data, shoff + i * shentsize)[1:7]
                   for i in range(shnum)]
        for kind, _, _, offset, size, _ in headers:
            if kind != _SHT_NOBITS:
                end = max(end, offset + size)
    if end > len(data):
        return f"truncated: {len(data)} bytes, but its headers and sections reach byte {end}"
    if function is None:
        return None
    # A function symbol named `function`, where the section-name table lies inside the file.
    if shstrndx < shnum and sum(headers[shstrndx][3:5]) <= len(data):
        for kind, _, _, offset, size, link in headers:
            if kind not in _SYMBOL_TABLES or link >= shnum:
                continue
            strings_at = headers[link][3]
            for at in range(offset, offset + size - _SYMBOL_BYTES + 1, _SYMBOL_BYTES):
                name_at, info, index = struct.unpack_from("<IB1xH", data, at)
                if info & 0xF == _STT_FUNC and index != 0:
                    start = strings_at + name_at
                    if data[start:data.find(b"\0", start)].decode("utf-8", "replace") == function:
                        return None
    return f"a binary of another kernel: it defines no function {function}"


def _library_files(libraries: Any) -> Any:
    """Triton's `extern_libs` ([name, path] pairs) as each library's name and file name (Triton's
    key hashes their content, not their folder); anything else as it is, compared whole."""
    if not isinstance(libraries, list) or not all([
            isinstance(pair, list) and len(pair) == 2 and all([isinstance(s, str) for s in pair])
            for pair in libraries]):
        return libraries
    return [[name, os.path.basename(path)] for name, path in libraries]


def kernel_problem(files: dict[str, Any], meta: Any, request: Request,
                   entry_hash: str | None = None) -> tuple[str, str] | None:
    """(file extension, what is wrong) with a compile's result for `request`, or None: `files` maps
    each extension to its bytes (the binary) or text; `meta` is Triton's metadata (its `target`
    a JSON dict or a `GPUTarget`), of the entry `entry_hash` where given."""
    target, binary = request.target, bytes(files.get(request.binary_ext, b""))
    if (problem := binary_problem(binary, target.backend, request.kernel)) is not None:
        return request.binary_ext, problem
    problem = metadata_problem(meta, request, entry_hash, files.get("llir"))
    if problem is not None:
        return "json", problem
    return ir_problem(files, request)


def metadata_problem(meta: Any, request: Request, entry_hash: str | None,
                     llir: str | None) -> str | None:
    """What is wrong with Triton's metadata `meta` for `request`, or None: it must agree with what
    `request` compiled and with the LLVM IR's (`llir`, where kept) use of shared memory."""
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
            wanted = (request.target.backend, request.target.arch, request.target.warp_size)
            if found != wanted:
                return f"metadata is for target {found}, not {wanted}"
    for field in _OPTIONAL_INT_FIELDS:
        value = meta.get(field)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            return f"metadata field {field!r} is {value!r}, not an integer"
    if meta["shared"] < 0:
        return f"metadata field 'shared' is {meta['shared']}, below 0"
    if entry_hash is not None and meta["hash"] != entry_hash:
        return f"metadata belongs to another entry (hash {meta['hash']})"
    if meta["name"] != request.kernel:
        return f"metadata names kernel {meta['name']!r}, not {request.kernel!r}"
    # As the metadata file holds them, as `request.options` are.
    stored = json.loads(json.dumps({field: meta.get(field) for field in request.options},
                                   default=vars))
    for field, wanted in request.options.items():
        if stored[field] != wanted and not (
                field == "extern_libs" and _library_files(stored[field]) == _library_files(wanted)):
            return (f"metadata says {field}={stored[field]!r}, but the kernel compiles "
                    f"with {wanted!r}")
    shared, uses = meta["shared"], "@global_smem" in (llir or "")
    if uses and not shared:
        return "metadata says shared=0, but the kernel's LLVM IR uses shared memory"
    if llir and shared and not uses:
        return (f"metadata says shared={shared}, but the kernel's LLVM IR uses no "
                f"shared memory")
    return None


def ir_problem(files: dict[str, Any], request: Request) -> tuple[str, str] | None:
    """(file extension, what is wrong) with an IR in `files`, or None: each must name the
    kernel, and PTX and AMDGCN be for its threads per block (PTX for its blocks per cluster)."""
    name = re.escape(request.kernel)
    threads = int(request.options.get("num_warps", 0)) * request.target.warp_size
    for ext, text in files.items():
        if ext in (request.binary_ext, "json"):
            continue
        if not text:
            return ext, "empty"
        if ext in ("ttir", "ttgir") and not re.search(rf'@(?:{name}|"{name}")\(', text):
            return ext, f"Triton IR of another kernel: it defines no function @{request.kernel}"
        if ext == "ptx":
            if not re.search(rf"\.entry\s+{name}\s*\(", text):
                return ext, f"PTX of another kernel: it has no .entry {request.kernel}"
            found = re.search(r"\.(?:reqntid|maxntid)\s+(\d+)", text)
            if found and int(found[1]) != threads:
                return ext, f"PTX for {found[1]} threads per block, not {threads}"
            found = re.search(r"\.reqnctapercluster\s+(\d+)", text)
            ctas = int(request.options.get("num_ctas") or 1)
            if int(found[1] if found else 1) != ctas:
                return ext, f"PTX for clusters of {found[1] if found else 1} blocks, not {ctas}"
        if ext == "amdgcn":
            if not re.search(rf"^\s*\.name:\s+{name}\s*$", text, re.M):
                return ext, f"AMDGCN of another kernel: it names no kernel {request.kernel}"
            found = re.search(r"\.max_flat_workgroup_size:\s+(\d+)", text)
            if found and int(found[1]) != threads:
                return ext, f"AMDGCN for {found[1]} threads per block, not {threads}"
    return None


def _listing_problem(folder: str, child: Any, path: Any, request: Request) -> tuple | None:
    """(path, what is wrong) with the group file's listing of `child` at `path`: Triton lists
    only files it wrote into the entry's own `folder`, each under its own name."""
    if not isinstance(child, str) or not isinstance(path, str):
        return str(path), f"the group file lists {child!r} at {path!r}"
    ext = child[len(request.file_name) + 1:]
    if not child.startswith(request.file_name + ".") or (
            request.extensions is not None and ext not in request.extensions):
        return path, (f"an unexpected file in the entry (a compile writes "
                      f"{', '.join(sorted(request.extensions or ()))})")
    try:
        inside = (os.path.basename(path) == child
                  and os.path.samestat(os.stat(os.path.dirname(path) or "."), os.stat(folder)))
    except OSError:
        inside = False
    if not inside:
        return path, f"listed as {child}, which is not this file in the entry's folder {folder}"
    return None


def entry_problem(manager: Any, request: Request) -> tuple[str, str] | None:
    """(damaged file or folder, what is wrong) for the entry `manager` (a FileCacheManager) keeps
    for `request`, or None where it is whole or absent; read as `_files.read_entry_files` reads
    (a link in place of the entry's folder is damage: Triton would read and write through it)."""
    folder = manager.cache_dir
    with contextlib.suppress(OSError):
        info = os.lstat(folder)
        if stat.S_ISLNK(info.st_mode):
            owner = "" if info.st_uid == os.geteuid() else f" owned by user id {info.st_uid}"
            return folder, f"a symbolic link{owner} in place of the entry's folder"
    group_name = f"__grp__{request.file_name}.json"
    group_path = os.path.join(folder, group_name)
    try:
        children = _files.parse_json(_files.read_entry_file(folder, group_name, _JSON_LIMIT))
        children = children["child_paths"]
    except FileNotFoundError:
        return None
    except _files.RefusedFile as err:
        return group_path, str(err)
    except (OSError, ValueError, KeyError, TypeError) as err:
        return group_path, f"unreadable group file ({type(err).__name__}: {err})"
    if not isinstance(children, dict):
        return group_path, f"group file lists {type(children).__name__}, not a mapping"
    if not children:
        return None
    for ext in ("json", request.binary_ext, request.asm_ext):
        if f"{request.file_name}.{ext}" not in children:
            return group_path, f"the group file lists no {request.file_name}.{ext}"
    listed, problem = [], None
    for child, path in children.items():
        problem = _listing_problem(folder, child, path, request)
        if problem is not None:
            break  # reported after the files listed before it, as they are read in order
        listed.append(child)
    files = {}  # by extension; each one's path is `children[f"{request.file_name}.{ext}"]`
    for child, data in zip(listed, _files.read_entry_files(folder, listed, _FILE_LIMIT)):
        ext, path = child[len(request.file_name) + 1:], children[child]
        if isinstance(data, _files.RefusedFile):
            return path, str(data)
        if isinstance(data, Exception):
            return path, f"unreadable ({type(data).__name__}: {data})"
        try:
            files[ext] = data if ext == request.binary_ext else data.decode("utf-8")
        except UnicodeDecodeError as err:
            return path, f"not text ({err})"
    if problem is not None:
        return problem
    try:
        meta = _files.parse_json(files["json"].encode("utf-8"))
    except ValueError as err:
        return children[f"{request.file_name}.json"], f"metadata is not JSON ({err})"
    damage = kernel_problem(files, meta, request, request.entry_hash)
    return None if damage is None else (children[f"{request.file_name}.{damage[0]}"], damage[1])


def replace_damaged(path: str, problem: str, kernel: str, entry_hash: str,
                    file_name: str) -> None:
    """Logs, once per damaged file (`path`, what is wrong: `problem`), that kernel `kernel` is
    compiled again, and empties its entry's group with Triton's atomic `put_group`, so that the
    compile misses and replaces every file; a link in place of the entry's folder is removed
    first (an OSError where it cannot be: another user's, in a folder with the sticky bit)."""
    from triton.runtime.cache import get_cache_manager

    if _state.first_warning(("damaged", path)):
        logger.warning("jax_triton_rocm: Triton's cache entry for kernel %s is damaged: %s: %s. "
                       "Compiling the kernel again and replacing the entry.", kernel, path,
                       problem)
    manager = get_cache_manager(entry_hash)
    folder = getattr(manager, "cache_dir", None)
    if folder and os.path.islink(folder):
        os.unlink(folder)
        manager = get_cache_manager(entry_hash)
    manager.put_group(f"{file_name}.json", {})


def compile_checked(triton: Any, source: Any, target: Any, options: dict[str, Any],
                    binary_ext: str, asm_ext: str, symbol: str) -> tuple[Any, dict[str, Any]]:
    """`triton.compile(source, target=target, options=options)` and its metadata (a dict), the
    entry checked before (Triton's default file cache only, its stale temporary folders removed)
    and after the compile; a damaged entry is emptied and compiled once more.

    Raises:
      DamagedEntry: the binary was damaged again after the entry was replaced (names the file).
      OSError: the cache folder cannot be read or written (the caller falls back).
      Triton's own compile errors."""
    from triton import knobs
    from triton.runtime.cache import get_cache_manager

    request = compile_request(source, target, options, binary_ext, asm_ext, symbol)
    if knobs.cache.manager_class is None:
        manager = get_cache_manager(request.entry_hash)
        if (damage := entry_problem(manager, request)) is not None:
            replace_damaged(*damage, source.name, request.entry_hash, request.file_name)
        # Where a write failed, Triton's `put` left its folder (docs/design.md); rarely one.
        with contextlib.suppress(OSError, ValueError):
            if [name for name in os.listdir(manager.cache_dir)
                    if name.startswith(_files.TEMPORARY_FOLDER_PREFIX)]:
                _files.remove_stale_temporaries(manager.cache_dir)
    for attempt in range(2):
        compiled = triton.compile(source, target=target, options=dict(options))
        meta = compiled.metadata._asdict()  # a namedtuple in every Triton supported
        damage = kernel_problem(compiled.asm, meta, request)
        if damage is None:
            return compiled, meta
        # The file it names, from what the compile returned.
        path = compiled.metadata_group.get(f"{request.file_name}.{damage[0]}",
                                           f"the {damage[0]} of entry {compiled.hash}")
        if attempt == 0:
            replace_damaged(path, damage[1], source.name, compiled.hash, request.file_name)
    raise DamagedEntry(
        f"Triton's cache gave a damaged binary for kernel {source.name} again after its entry "
        f"was replaced: {path}: {damage[1]}. Delete that folder, or set TRITON_CACHE_DIR "
        f"to another folder, and lower again.")
