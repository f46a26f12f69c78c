"""A 64-bit little-endian ELF file (a CUBIN, an HSACO), read within bounds: the compile cache's
binary check (`problem`) and the section table the CUBIN the call carries
(`backends._cubin`) is edited in."""

from __future__ import annotations

import struct
from typing import NamedTuple

HEADER = struct.Struct("<16sHHIQQQIHHHHHH")  # the ELF64 header
SECTION = struct.Struct("<IIQQQQIIQQ")  # one ELF64 section header
# ELF e_machine of each Triton backend's binary.
MACHINES = {"cuda": (190, "EM_CUDA, a CUBIN"), "hip": (224, "EM_AMDGPU, an HSACO")}
_SYMBOL_BYTES = 24  # ELF64
_SHT_NOBITS = 8  # a section that takes no bytes in the file (.bss)
_SYMBOL_TABLES = (2, 11)  # SHT_SYMTAB, SHT_DYNSYM
_STT_FUNC = 2


class Section(NamedTuple):
    """One section header: where it sits in the file (`at`) and its fields."""

    at: int
    name: bytes
    kind: int
    flags: int
    offset: int
    size: int
    link: int
    info: int


def sections(data: bytes) -> list[Section] | None:
    """`data`'s section headers, each with its name from the section-name table; None where
    `data` is no little-endian ELF64 or its section table or name table lies outside it."""
    if len(data) < HEADER.size or data[:6] != b"\x7fELF\x02\x01":
        return None
    *_, shoff, _, _, _, _, shentsize, shnum, shstrndx = HEADER.unpack_from(data)
    if shentsize != SECTION.size or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        return None
    headers = [(shoff + i * shentsize, SECTION.unpack_from(data, shoff + i * shentsize))
               for i in range(shnum)]
    names_at, names_size = headers[shstrndx][1][4], headers[shstrndx][1][5]
    if names_at + names_size > len(data):
        return None
    names = data[names_at:names_at + names_size]
    # Each name NUL-terminated in the name table (to its end if unterminated).
    return [Section(at, names[name:].partition(b"\0")[0], kind, flags, offset, size, link, info)
            for at, (name, kind, flags, _, offset, size, link, info, _, _) in headers]


def problem(data: bytes, backend: str, function: str | None = None) -> str | None:
    """What is wrong with `data` as the binary of Triton backend `backend` ("cuda", "hip"): None
    for a 64-bit little-endian ELF of the backend's machine that holds all of its headers and
    sections (and defines `function`, where given), else a sentence."""
    machine, what = MACHINES[backend]
    if len(data) < HEADER.size:
        return f"{len(data)} bytes, too short for an ELF file ({what} was expected)"
    if data[:4] != b"\x7fELF":
        return f"not an ELF file: it starts with {data[:8]!r} ({what} was expected)"
    if data[4] != 2 or data[5] != 1:
        return "not a 64-bit little-endian ELF file"
    (_, _, found, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
     _) = HEADER.unpack_from(data)
    if found != machine:
        others = dict(MACHINES.values())
        return (f"an ELF file for machine {found} ({others.get(found, 'another format')}), "
                f"not {machine} ({what})")
    if shnum == 0 or shentsize != SECTION.size:
        return f"a malformed ELF file ({shnum} sections of {shentsize} bytes)"
    end = max(phoff + phnum * phentsize, shoff + shnum * shentsize)
    if end <= len(data):
        for i in range(shnum):
            _, kind, _, _, offset, size, *_ = SECTION.unpack_from(data, shoff + i * shentsize)
            if kind != _SHT_NOBITS:
                end = max(end, offset + size)
    if end > len(data):
        return f"truncated: {len(data)} bytes, but its headers and sections reach byte {end}"
    if function is None:
        return None
    # The functions the symbol tables define, until `function` is found.
    found = sections(data) or []
    for section in found:
        if section.kind not in _SYMBOL_TABLES or section.link >= len(found):
            continue
        strings_at = found[section.link].offset
        end = section.offset + section.size - _SYMBOL_BYTES + 1
        for at in range(section.offset, end, _SYMBOL_BYTES):
            name_at, info, index = struct.unpack_from("<IB1xH", data, at)
            if info & 0xF == _STT_FUNC and index != 0:
                start = strings_at + name_at
                if data[start:data.find(b"\0", start)].decode("utf-8", "replace") == function:
                    return None
    return f"a binary of another kernel: it defines no function {function}"
