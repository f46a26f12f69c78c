"""A CUBIN as jaxlib's call carries it: without the copy of its PTX text that ptxas embeds.

Triton runs ptxas with `-lineinfo`, which embeds the kernel's whole PTX text in a section named
`.nv_debug_ptx_txt` (most of a real kernel's CUBIN) for debuggers and profilers to show beside
the machine code. The driver never reads it; jaxlib's typed-FFI call copies and hashes
its compressed opaque, the binary included, at every launch. `without_ptx_text` empties that one
section (its bytes zeroed, its size 0): every other byte of the file, the machine code, the line
tables and the section numbering included, stays as ptxas wrote it. A file it does not recognise
in every detail comes back unchanged. docs/BENCHMARKS.md has the launch cost it saves.
"""

from __future__ import annotations

import struct

PTX_TEXT_SECTION = b".nv_debug_ptx_txt"

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")  # ELF64 header, little-endian
_SECTION = struct.Struct("<IIQQQQIIQQ")  # name, type, flags, addr, offset, size, link, info, ...
_SEGMENT = struct.Struct("<IIQQQQQQ")  # type, flags, offset, vaddr, paddr, filesz, memsz, align
_SECTION_SIZE_AT = 32  # where sh_size sits in a section header
_PROGBITS, _RELA, _REL = 1, 4, 9
_ALLOC = 0x2


def without_ptx_text(cubin: bytes) -> bytes:
    """`cubin` with its `.nv_debug_ptx_txt` section emptied; `cubin` itself where it has none,
    or where anything in it is not what a CUBIN of ptxas holds (not a little-endian ELF64, a
    header or section out of bounds, the section loaded, relocated or linked to)."""
    found = _ptx_text_section(cubin)
    if found is None:
        return cubin
    header_at, offset, size = found
    edited = bytearray(cubin)
    edited[offset:offset + size] = bytes(size)
    struct.pack_into("<Q", edited, header_at + _SECTION_SIZE_AT, 0)
    return bytes(edited)


def _ptx_text_section(cubin: bytes) -> tuple[int, int, int] | None:
    """(where its section header sits, its offset, its size) for the PTX text section, or None
    where there is none that can be emptied safely."""
    if len(cubin) < _HEADER.size or cubin[:6] != b"\x7fELF\x02\x01":
        return None
    (_, _, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum,
     shstrndx) = _HEADER.unpack_from(cubin)
    if (shentsize != _SECTION.size or shoff + shnum * shentsize > len(cubin)
            or shstrndx >= shnum or (phnum and (phentsize != _SEGMENT.size
                                                or phoff + phnum * phentsize > len(cubin)))):
        return None
    sections = [_SECTION.unpack_from(cubin, shoff + i * shentsize) for i in range(shnum)]
    names_at, names_size = sections[shstrndx][4], sections[shstrndx][5]
    if names_at + names_size > len(cubin):
        return None
    names = cubin[names_at:names_at + names_size]
    matches = [i for i, section in enumerate(sections)
               if names[section[0]:section[0] + len(PTX_TEXT_SECTION) + 1]
               == PTX_TEXT_SECTION + b"\0"]
    if len(matches) != 1:
        return None
    index = matches[0]
    _, kind, flags, _, offset, size, _, _, _, _ = sections[index]
    if kind != _PROGBITS or flags & _ALLOC or offset + size > len(cubin):
        return None
    if any(section[6] == index or (section[1] in (_REL, _RELA) and section[7] == index)
           for section in sections):
        return None
    for i in range(phnum):
        _, _, at, _, _, filesz, _, _ = _SEGMENT.unpack_from(cubin, phoff + i * phentsize)
        if at < offset + size and offset < at + filesz:
            return None
    return shoff + index * shentsize, offset, size
