"""Reading just enough of an ELF header to check a GPU binary's machine and architecture."""

import struct

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


def check_hsaco(binary: bytes, arch: str) -> None:
    machine, flags = elf_header(binary)
    assert machine == EM_AMDGPU
    assert flags & 0xFF == AMDGPU_MACH[arch], f"e_flags {flags:#x} is not {arch}"


def check_cubin(binary: bytes, capability: int) -> None:
    machine, flags = elf_header(binary)
    assert machine == EM_CUDA
    # CUDA 12+ cubins keep the SM number in e_flags (bits 8-15 in newer ABIs, 0-7 in older).
    assert capability in (flags & 0xFF, (flags >> 8) & 0xFF), f"e_flags {flags:#x}"
