"""Reading just enough of an ELF header to check a GPU binary's machine and architecture; the
module keys jaxlib gives the binaries of one kernel's variants; a stand-in for a process's folder
of HIP binaries."""

import os
import struct

import jax.numpy as jnp

import jax_triton_rocm as jtr
from jax_triton_rocm.backends.hip import _hip_files
from tests.support import autotune_utils, kernels
from tests.support.lowering_utils import lower_for, spec

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
    without its PTX text (`_cuda.without_ptx_text`, checked in tests/cpu/test_cubin.py), on ROCm
    the HSACO."""
    if platform != "cuda":
        return binary
    from jax_triton_rocm.backends import _cuda  # imports Triton's NVIDIA backend

    return _cuda.without_ptx_text(binary)


X32 = spec((4096,), jnp.float32)
X16 = spec((4096,), jnp.float16)

# One kernel (add_kernel), four ways: the same name, four binaries.
VARIANTS = {
    "block 256": (lambda x, y: kernels.add(x, y, block=256), X32),
    "block 512": (lambda x, y: kernels.add(x, y, block=512), X32),
    "float16": (lambda x, y: kernels.add(x, y, block=256), X16),
    "8 warps": (lambda x, y: kernels.add(x, y, block=256, num_warps=8), X32),
}

CASES = [("cuda", "embedded"), ("rocm", "embedded"), ("rocm", "path")]
CASE_IDS = ["cuda", "rocm-embedded", "rocm-path"]


def loader_keys(platform: str) -> dict[str, list]:
    """jaxlib's module key for every kernel that the variants and an autotuned call lower to."""
    keys = {}
    lowerings = {name: lower_for(fn, x, x, platform=platform)
                 for name, (fn, x) in VARIANTS.items()}
    lowerings["autotuned"] = lower_for(autotune_utils.tuned_add, X32, X32, platform=platform)
    for name, lowered in lowerings.items():
        for call in jtr.kernel_calls(lowered):
            message = call.message
            if message.HasField("autotuned_kernel_call"):
                launches = [(f"{name}: {c.description}", c.kernel_call)
                            for c in message.autotuned_kernel_call.configs]
            else:
                launches = [(name, message.kernel_call)]
            for label, launch in launches:
                kernel = launch.kernel
                keys[label] = [kernel.kernel_name, kernel.shared_mem_bytes, kernel.ptx,
                               kernel.compute_capability]
    return keys


def hip_folder(parent, namespace, pid, start) -> str:
    """A folder of HIP binaries, as the process `pid` started at `start` makes it."""
    path = os.path.join(str(parent), f"{_hip_files.FOLDER_PREFIX}{namespace}_{pid}_{start}_x1")
    os.makedirs(path)
    with open(os.path.join(path, "kernel.hsaco"), "wb") as f:
        f.write(b"\x7fELF")
    return path
