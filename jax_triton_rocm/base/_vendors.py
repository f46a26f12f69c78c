"""The GPU vendors the package lowers for, as plain facts (nothing here imports Triton).

One entry per JAX platform: which jaxlib plugins carry its Triton custom calls, which Triton
compiler backend builds for it, its compile options, and how its architectures are named.
Everything else asks this table or the platform's backend (`backends.backend`); adding a vendor
means one entry here and one backend module (imported by `backends.backend`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any


# Above any CUDA compute capability's major version: "90.0" is no "major.minor" (sm_900).
_MAX_CUDA_MAJOR = 19


def _cuda_arch(text: str) -> str | None:
    """"sm_90" from 90, "90", "9.0", "sm_90", "sm90", "sm_90a"; None for anything else."""
    dotted = re.fullmatch(r"(\d{1,2})\.(\d)", text)
    if dotted:
        if int(dotted.group(1)) > _MAX_CUDA_MAJOR:
            return None
        return f"sm_{int(dotted.group(1)) * 10 + int(dotted.group(2))}"
    match = re.fullmatch(r"(?:sm_?)?(\d{2,3})a?", text)
    return f"sm_{match.group(1)}" if match else None


def _rocm_arch(text: str) -> str | None:
    """"gfx942" from "gfx942" or "gfx942:sramecc+:xnack-" (target features dropped); else None."""
    match = re.fullmatch(r"(gfx[0-9]{2,3}[0-9a-f])(?::.*)?", text)
    return match.group(1) if match else None


@dataclasses.dataclass(frozen=True)
class Vendor:
    """One GPU vendor as the package knows it.

    Attributes:
      platform: JAX's platform name.
      arch_noun: what its architecture names are called in messages.
      plugin_packages: the jaxlib plugins carrying a `_triton` module, newest first.
      install_hint: how to install JAX for these GPUs.
      triton_backend: Triton's compiler backend (`triton.backends.<name>`).
      compile_options: `triton_call` keywords that are this vendor's compile options.
      example_arch: an architecture name for examples in messages.
      arch_help: the accepted forms of an architecture name, for messages.
      parse_arch: the canonical architecture for a lower-cased name, or None.
      encoded_descriptor: Triton's launcher type for a tensor descriptor that the compiled
        kernel takes encoded (a TMA descriptor on NVIDIA sm_90+, a TDM one on AMD gfx1250).
      jaxlib_encodes_descriptors: whether jaxlib's plugin can encode those at launch.
      probe_target: a Triton `GPUTarget` (backend, arch, warp size) of this vendor's, for running
        Triton's front end alone (its type errors do not depend on the target).
      error_words: a regular expression for the words that tie an error message (JAX's, a
        plugin's) to this vendor's stack.
    """

    platform: str
    arch_noun: str
    plugin_packages: tuple[str, ...]
    install_hint: str
    triton_backend: str
    compile_options: tuple[str, ...]
    example_arch: str
    arch_help: str
    parse_arch: Callable[[str], str | None]
    encoded_descriptor: str
    jaxlib_encodes_descriptors: bool
    probe_target: tuple[str, Any, int]
    error_words: str


VENDORS: dict[str, Vendor] = {
    "cuda": Vendor(
        platform="cuda",
        arch_noun="a CUDA architecture",
        plugin_packages=("jax_cuda13_plugin", "jax_cuda12_plugin"),
        install_hint="pip install -U 'jax[cuda13]'",
        triton_backend="nvidia",
        compile_options=("maxnreg",),
        example_arch="sm_90",
        arch_help="a compute capability such as cuda=90, cuda='9.0' or cuda='sm_90'",
        parse_arch=_cuda_arch,
        encoded_descriptor="nvTmaDesc",
        jaxlib_encodes_descriptors=True,
        probe_target=("cuda", 80, 32),
        error_words=r"cuda|nvidia|cudnn|cupti|cublas|cusparse|nccl",
    ),
    "rocm": Vendor(
        platform="rocm",
        arch_noun="an AMD GPU architecture",
        plugin_packages=("jax_rocm10_plugin", "jax_rocm7_plugin", "jax_rocm60_plugin"),
        install_hint="pip install -U 'jax[rocm7-local]' (see JAX's ROCm install guide)",
        triton_backend="amd",
        compile_options=("waves_per_eu", "matrix_instr_nonkdim", "kpack"),
        example_arch="gfx942",
        arch_help="a gfx name such as rocm='gfx942' (MI300), 'gfx950' (MI355) or 'gfx90a' (MI200)",
        parse_arch=_rocm_arch,
        encoded_descriptor="tensordesc",
        jaxlib_encodes_descriptors=False,
        probe_target=("hip", "gfx942", 64),
        error_words=r"rocm|hip|amdgpu",
    ),
}

GPU_PLATFORMS = tuple(VENDORS)

# Every vendor's compile options: `triton_call` keywords that are not constexprs (unless the
# kernel has a parameter of that name). Each backend passes on only its own.
COMPILE_OPTIONS = tuple(option for vendor in VENDORS.values() for option in vendor.compile_options)

# What Triton's front end runs alone on, to ask whether a call's arguments line up with a
# kernel's parameters (`spec._kinds.front_end_error`): the first vendor's probe target whose
# compiler backend is installed.
FRONT_END_PROBES = tuple((v.triton_backend, v.probe_target) for v in VENDORS.values())


def vendor(platform: str) -> Vendor:
    """The vendor of a GPU platform.

    Raises:
      ValueError: `platform` is not one the package lowers for, naming those it does.
    """
    try:
        return VENDORS[platform]
    except KeyError:
        raise ValueError(f"platform {platform!r} is not a GPU platform this package lowers for; "
                         f"use one of {', '.join(map(repr, GPU_PLATFORMS))}.") from None


def arch_platform(arch: Any) -> str:
    """The platform an architecture name belongs to: "rocm" for gfx names, else "cuda"."""
    return "rocm" if str(arch).strip().lower().startswith("gfx") else "cuda"


def normalize_arch(platform: str, arch: Any, *, what: str = "arch") -> str:
    """The canonical architecture name ("sm_90", "gfx942") for `arch` on `platform`.

    Raises:
      ValueError: naming `what`, the value and the accepted forms.
    """
    known = vendor(platform)
    canonical = None if isinstance(arch, bool) else known.parse_arch(str(arch).strip().lower())
    if canonical is None:
        raise ValueError(f"{what}={arch!r} is not {known.arch_noun}. Use {known.arch_help}.")
    return canonical
