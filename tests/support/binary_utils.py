"""Reading just enough of an ELF header to check a GPU binary's machine and architecture."""

import struct

from jax_triton_rocm.backends import _cubin

EM_CUDA = 190
EM_AMDGPU = 224
# EF_AMDGPU_MACH values (LLVM's ELF.h) for the architectures the tests compile for.
AMDGPU_MACH = {"gfx90a": 0x03F, "gfx942": 0x04C, "gfx950": 0x04F, "gfx1100": 0x041}


def elf_header(binary: bytes) -> tuple[int, int]:
    """(e_machine, e_flags) of a 64-bit little-endian ELF file."""
    assert binary[:4] == b"\x7fELF", "not an ELF file"
    assert binary[4] == 2 and binary[5] == 1, "not a 64-bit little-endian ELF"
    e_machine = struct.unpack_from("<H", binary, 18)[0]
    e_flags = struct.unpack_from("<I", binary, 48)[0]
    return e_machine, e_flags


def elf_machine(binary: bytes) -> int:
    """An ELF's e_machine (190: CUDA, 224: AMDGPU); fails if `binary` is not an ELF."""
    return elf_header(binary)[0]


def hsaco_mach(binary: bytes) -> int:
    """An HSACO's EF_AMDGPU_MACH (the low byte of e_flags: 0x4c gfx942, 0x4f gfx950)."""
    return elf_header(binary)[1] & 0xFF


def cubin_sm(binary: bytes) -> int:
    """A CUBIN's SM version (90 for sm_90), from e_flags in either CUDA ELF ABI."""
    flags = elf_header(binary)[1]
    return (flags >> 8) & 0xFF if binary[8] >= 8 else flags & 0xFF


def check_hsaco(binary: bytes, arch: str) -> None:
    assert elf_machine(binary) == EM_AMDGPU
    assert hsaco_mach(binary) == AMDGPU_MACH[arch], f"EF_AMDGPU_MACH is not {arch}"


def check_cubin(binary: bytes, capability: int) -> None:
    assert elf_machine(binary) == EM_CUDA
    assert cubin_sm(binary) == capability


def elf_sections(binary: bytes) -> dict[str, tuple[int, int, int]]:
    """Each section of a 64-bit little-endian ELF by name: (its header's offset in the file, its
    data's offset, its size)."""
    elf_header(binary)
    shoff = struct.unpack_from("<Q", binary, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", binary, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", binary, shoff + i * shentsize)
               for i in range(shnum)]
    names_at = headers[shstrndx][4]
    sections = {}
    for i, header in enumerate(headers):
        start = names_at + header[0]
        name = binary[start:binary.index(b"\0", start)].decode()
        sections[name] = (shoff + i * shentsize, header[4], header[5])
    return sections


def carried_form(binary: bytes, platform: str) -> bytes:
    """What jaxlib's call carries in `module_image` for Triton's `binary`: on CUDA the CUBIN
    without its PTX text (`_cubin`, checked in tests/cpu/test_cubin.py), on ROCm the HSACO."""
    return _cubin.without_ptx_text(binary) if platform == "cuda" else binary
