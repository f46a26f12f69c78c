"""NVIDIA: Triton to CUBIN, in `module_image` where the plugin reads it (less its PTX text,
`without_ptx_text`), else PTX text ([How it works](design.md)). Importing this module imports
Triton's NVIDIA backend, so a broken one fails here, and not at the first lowering.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import struct
import subprocess
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.backends._backend import ArchAnswers, Backend, LoadedForm
from jax_triton_rocm.base import _elf, _env
from jax_triton_rocm.compile._compile import CompiledKernel
from jax_triton_rocm.kernel._spec import MAX_GRID_SIZE

if TYPE_CHECKING:
    from jax_triton_rocm.backends._vendors import GpuArch

_triton_nvidia = _vendors.triton_compiler("cuda")  # a broken backend fails here

from triton.backends.compiler import GPUTarget  # noqa: E402  (after the checked import)

logger = logging.getLogger("jax_triton_rocm")

# On a ptxas failure Triton's NVIDIA backend prints the whole PTX before raising PTXASError, which
# already carries the diagnostic: a `print` of that module alone (thread-safe, unlike redirecting
# stdout) sends the reproducer to the debug log.
_REPRODUCER_MARK = "please share the reproducer above with Triton project"


def _print_without_reproducer(*args: Any, **kwargs: Any) -> None:
    if any(_REPRODUCER_MARK in str(arg) for arg in args):
        logger.debug("jax_triton_rocm: ptxas failed; Triton's reproducer:%s", " ".join(
            map(str, args)))
        return
    print(*args, **kwargs)


_triton_nvidia.print = _print_without_reproducer

WARP_SIZE = 32
# CTAs per cluster: CUDA's portable limit. jaxlib's launch (cuLaunchKernelEx) does not opt in to
# larger, non-portable clusters.
MAX_CLUSTER_CTAS = 8

# Dynamic shared memory a block may opt in to, by compute capability (CUDA C++ Programming
# Guide, "Technical Specifications per Compute Capability"). jaxlib refuses more at launch.
MAX_SHARED_BYTES = {
    70: 96 * 1024, 72: 96 * 1024, 75: 64 * 1024,
    80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024,
    90: 227 * 1024, 100: 227 * 1024, 101: 227 * 1024, 103: 227 * 1024, 110: 227 * 1024,
    120: 99 * 1024, 121: 99 * 1024,
}


@functools.cache  # one entry per compute capability compiled for
def _ptxas_archs(capability: int) -> tuple[str, ...]:
    """The sm_NN names the ptxas Triton runs for `capability` accepts (its --help lists them)."""
    from triton.backends.nvidia.compiler import get_ptxas

    help_text = subprocess.run([get_ptxas(capability).path, "--help"], capture_output=True,
                               text=True, timeout=60).stdout
    return tuple(sorted(set(re.findall(r"'(sm_\d+)'", help_text)), key=lambda n: int(n[3:])))


def compute_capability(arch: str) -> int:
    """The compute capability of "sm_90" as Triton and jaxlib take it: 90."""
    return int(re.fullmatch(r"sm_(\d+)", arch).group(1))


PTX_TEXT_SECTION = b".nv_debug_ptx_txt"

_SEGMENT = struct.Struct("<IIQQQQQQ")  # type, flags, offset, vaddr, paddr, filesz, memsz, align
_SECTION_SIZE_AT = 32  # where sh_size sits in a section header
_PROGBITS, _RELA, _REL = 1, 4, 9
_ALLOC = 0x2


def without_ptx_text(cubin: bytes) -> bytes:
    """`cubin` with its section `.nv_debug_ptx_txt` (the PTX text ptxas embeds for debuggers)
    emptied, every other byte as ptxas wrote it ([How it works](design.md)); `cubin` itself where
    it has no such section or is not what ptxas writes (not a little-endian ELF64, a header or
    section out of bounds, the section loaded, relocated or linked to)."""
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


class CudaBackend(Backend):
    platform = "cuda"
    binary_key = "cubin"
    asm_key = "ptx"
    compile_options = _vendors.VENDORS["cuda"].compile_options
    arch_field = "cuda_arch"
    arch_keyword = "compute_capability="
    lowering_variables = (_env.ENV_KEEP_PTX_TEXT,)
    triton_backend = _triton_nvidia.CUDABackend
    option_names = frozenset([field.name
                              for field in dataclasses.fields(_triton_nvidia.CUDAOptions)])

    max_grid = (MAX_GRID_SIZE, 65535, 65535)

    def target(self, arch: GpuArch) -> tuple[GPUTarget, int, int | None]:
        capability = int(arch.arch[3:])  # "sm_90" (canonical): 90, as `compute_capability`
        return (GPUTarget("cuda", capability, WARP_SIZE), capability,
                MAX_SHARED_BYTES.get(capability))

    def loaded_form(self, compiled: CompiledKernel, answers: ArchAnswers,
                    features: _vendors.PluginFeatures,
                    devices: GpuArch | None = None, keep_ptx_text: bool = False) -> LoadedForm:
        # jaxlib launches num_warps * 32 threads, the block Triton built for.
        if devices is not None:
            ptx, capability = self.code_for_devices(compiled, answers.arch, devices)
            return LoadedForm(ptx, capability, None, compiled.num_warps)
        if not features.module_image:
            return LoadedForm(compiled.asm, answers.capability, None, compiled.num_warps)
        # `JAX_TRITON_ROCM_KEEP_PTX_TEXT=1` keeps the PTX text; dropped once per binary: the
        # lowering keeps the image it makes of it.
        binary = compiled.binary if keep_ptx_text else without_ptx_text(compiled.binary)
        return LoadedForm(None, answers.capability, binary, compiled.num_warps)

    def knows_arch(self, arch: str) -> bool:
        return arch in _ptxas_archs(compute_capability(arch))

    def known_archs(self) -> tuple[str, ...]:
        return _ptxas_archs(90)

    def code_for_devices(self, compiled: CompiledKernel, arch: GpuArch,
                         devices: GpuArch) -> tuple[str, int]:
        """The PTX text, which jaxlib's ptxas builds for the devices' compute capability at
        load: PTX runs on its own architecture and newer ones, unless it targets an
        architecture's own features (`sm_90a`)."""
        ptx_target = re.search(r"^\.target\s+(sm_\w+)", compiled.asm, re.M)
        wanted = compute_capability(devices.arch)
        name = ptx_target.group(1) if ptx_target else arch.arch
        if compute_capability(arch.arch) > wanted or not name[3:].isdigit():
            raise ValueError(
                f"Kernel {compiled.name} is compiled for {arch.arch} (from {arch.source}), "
                f"but the computation runs on {devices.arch} devices (from {devices.source}): "
                f"neither its CUBIN nor its PTX (.target {name}) can run there. Give "
                f"compute_capability={wanted}, or leave it out to compile for the devices.")
        return compiled.asm, wanted

    def check_launch(self, arch: GpuArch, num_ctas: int) -> None:
        if num_ctas == 1:
            return
        if compute_capability(arch.arch) < 90:
            raise ValueError(
                f"num_ctas={num_ctas} needs thread-block clusters (sm_90 or newer); the target "
                f"is {arch.arch} (from {arch.source}). Use num_ctas=1.")
        if num_ctas & (num_ctas - 1) or num_ctas > MAX_CLUSTER_CTAS:
            raise ValueError(
                f"num_ctas={num_ctas} on {arch.arch} (from {arch.source}) must be a power of "
                f"two up to {MAX_CLUSTER_CTAS} (1, 2, 4 or 8): Triton lays a cluster's CTAs out "
                f"in powers of two, and jaxlib launches portable clusters only. Use one of "
                f"those.")


BACKEND = CudaBackend()
