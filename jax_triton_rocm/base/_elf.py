"""A 64-bit little-endian ELF file (a CUBIN, an HSACO), read within bounds: its layout, for the
compile cache's binary check (`compile._cache.binary_problem`), and its section table, which the
CUBIN the call carries (`backends._cubin`) is edited in."""

from __future__ import annotations

import struct
from typing import NamedTuple

HEADER = struct.Struct("<16sHHIQQQIHHHHHH")  # the ELF64 header
SECTION = struct.Struct("<IIQQQQIIQQ")  # one ELF64 section header


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
