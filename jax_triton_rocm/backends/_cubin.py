"""A CUBIN as jaxlib's call carries it: without the copy of its PTX text that ptxas embeds.

Triton runs ptxas with `-lineinfo`, which embeds the kernel's whole PTX text (most of a real
kernel's CUBIN) in a section `.nv_debug_ptx_txt`, for debuggers and profilers. The driver never
reads it; jaxlib's typed-FFI call copies and hashes its compressed opaque, the binary included,
at every launch. Only that section is emptied (its bytes zeroed, its size 0): every other byte,
the section numbering included, stays as ptxas wrote it. docs/BENCHMARKS.md has the launch cost
it saves.
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
    if len(cubin) < _elf.HEADER.size or cubin[:6] != b"\x7fELF\x02\x01":
        return cubin
    _, _, _, _, _, phoff, shoff, _, _, phentsize, phnum, shentsize, shnum, shstrndx = (
        _elf.HEADER.unpack_from(cubin))
    if shentsize != _elf.SECTION.size or shoff + shnum * shentsize > len(cubin) or (
            shstrndx >= shnum):
        return cubin
    # Each header: where it sits, then (name, kind, flags, address, offset, size, link, info).
    sections = [(shoff + i * shentsize, _elf.SECTION.unpack_from(cubin, shoff + i * shentsize))
                for i in range(shnum)]
    names_at, names_size = sections[shstrndx][1][4:6]
    if names_at + names_size > len(cubin):
        return cubin
    names = cubin[names_at:names_at + names_size]
    # Each name NUL-terminated in the name table (to its end if unterminated).
    matches = [i for i, (_, (name, *_)) in enumerate(sections)
               if names[name:].partition(b"\0")[0] == PTX_TEXT_SECTION]
    if len(matches) != 1:
        return cubin
    index = matches[0]
    at, (_, kind, flags, _, offset, size, _, _, _, _) = sections[index]
    if kind != _PROGBITS or flags & _ALLOC or offset + size > len(cubin):
        return cubin
    if any([link == index or (other in (_REL, _RELA) and info == index)
            for _, (_, other, _, _, _, _, link, info, _, _) in sections]):
        return cubin
    if phnum and (phentsize != _SEGMENT.size or phoff + phnum * phentsize > len(cubin)):
        return cubin
    for i in range(phnum):
        _, _, segment_at, _, _, filesz, _, _ = _SEGMENT.unpack_from(cubin, phoff + i * phentsize)
        if segment_at < offset + size and offset < segment_at + filesz:
            return cubin
    edited = bytearray(cubin)
    edited[offset:offset + size] = bytes(size)
    struct.pack_into("<Q", edited, at + _SECTION_SIZE_AT, 0)
    return bytes(edited)
