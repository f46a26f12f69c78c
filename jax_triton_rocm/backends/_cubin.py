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

from jax_triton_rocm.base import _elf

PTX_TEXT_SECTION = b".nv_debug_ptx_txt"

_SEGMENT = struct.Struct("<IIQQQQQQ")  # type, flags, offset, vaddr, paddr, filesz, memsz, align
_SECTION_SIZE_AT = 32  # where sh_size sits in a section header
_PROGBITS, _RELA, _REL = 1, 4, 9
_ALLOC = 0x2


def without_ptx_text(cubin: bytes) -> bytes:
    """`cubin` with its `.nv_debug_ptx_txt` section emptied; `cubin` itself where it has none,
    or where anything in it is not what a CUBIN of ptxas holds (not a little-endian ELF64, a
    header or section out of bounds, the section loaded, relocated or linked to)."""
    sections = _elf.sections(cubin)
    if sections is None:
        return cubin
    matches = [i for i, section in enumerate(sections) if section.name == PTX_TEXT_SECTION]
    if len(matches) != 1:
        return cubin
    index = matches[0]
    found = sections[index]
    if (found.kind != _PROGBITS or found.flags & _ALLOC
            or found.offset + found.size > len(cubin)):
        return cubin
    if any([section.link == index or (section.kind in (_REL, _RELA) and section.info == index)
            for section in sections]):
        return cubin
    phoff, phentsize, phnum = [_elf.HEADER.unpack_from(cubin)[i] for i in (5, 9, 10)]
    if phnum and (phentsize != _SEGMENT.size or phoff + phnum * phentsize > len(cubin)):
        return cubin
    for i in range(phnum):
        _, _, at, _, _, filesz, _, _ = _SEGMENT.unpack_from(cubin, phoff + i * phentsize)
        if at < found.offset + found.size and found.offset < at + filesz:
            return cubin
    edited = bytearray(cubin)
    edited[found.offset:found.offset + found.size] = bytes(found.size)
    struct.pack_into("<Q", edited, found.at + _SECTION_SIZE_AT, 0)
    return bytes(edited)
