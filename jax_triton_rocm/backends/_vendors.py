"""The GPU vendors the package lowers for (`VENDORS`, one per JAX platform; a new vendor is an
entry here and a backend module), which jaxlib plugin is installed and what it loads: by
feature, or by version number only where the plugin does not import here.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import itertools
import logging
import os
import re
import types
from collections.abc import Callable
from typing import Any

from jax_triton_rocm.base import _compat

logger = logging.getLogger("jax_triton_rocm")


def _cuda_arch(text: str) -> str | None:
    """"sm_90" from 90, "90", "9.0", "sm_90", "sm90", "sm_90a"; None for anything else."""
    # A major version above 19 is none of CUDA's: "90.0" is no "major.minor" (sm_900).
    dotted = re.fullmatch(r"([01]?\d)\.(\d)", text)
    if dotted:
        return f"sm_{int(dotted.group(1)) * 10 + int(dotted.group(2))}"
    match = re.fullmatch(r"(?:sm_?)?(\d{2,3})a?", text)
    return f"sm_{match.group(1)}" if match else None


def _rocm_arch(text: str) -> str | None:
    """"gfx942" from "gfx942" or "gfx942:sramecc+:xnack-" (target features dropped); else None."""
    match = re.fullmatch(r"(gfx[0-9]{2,3}[0-9a-f])(?::.*)?", text)
    return match.group(1) if match else None


@dataclasses.dataclass(frozen=True)
class Vendor:
    """One GPU vendor. `plugin_packages`: jaxlib plugins with a `_triton`, newest first;
    `encoded_descriptor`: Triton's launcher type of a descriptor passed encoded (TMA, TDM);
    `error_words`: a regex of the words that tie an error message to this vendor."""

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

# Where Triton's front end runs alone (`checks._kinds`): the first whose backend is installed.
FRONT_END_PROBES = tuple((v.triton_backend, v.probe_target) for v in VENDORS.values())


def vendor(platform: str) -> Vendor:
    """The vendor of a GPU platform; ValueError, naming those there are, for another."""
    try:
        return VENDORS[platform]
    except KeyError:
        raise ValueError(f"platform {platform!r} is not a GPU platform this package lowers for; "
                         f"use one of {', '.join(map(repr, GPU_PLATFORMS))}.") from None


def normalize_arch(platform: str, arch: Any, *, what: str = "arch") -> str:
    """The canonical architecture name ("sm_90", "gfx942") for `arch` on `platform`; else
    ValueError, naming `what`, the value and the accepted forms."""
    known = vendor(platform)
    canonical = None if isinstance(arch, bool) else known.parse_arch(str(arch).strip().lower())
    if canonical is None:
        raise ValueError(f"{what}={arch!r} is not {known.arch_noun}. Use {known.arch_help}.")
    return canonical


@dataclasses.dataclass(frozen=True)
class GpuArch:
    """The architecture a call compiles for, and where it was named (`source`, for messages)."""

    platform: str
    arch: str
    source: str


PLUGIN_PACKAGES = {platform: v.plugin_packages for platform, v in VENDORS.items()}

# What a plugin's `_triton` can do: the release that added it (where no binary can be read), and
# a string only a binary with it carries (a proto message's full name, or a binding's name).
PLUGIN_FEATURES: dict[str, tuple[tuple[int, ...], bytes]] = {
    "module_image": ((0, 11, 1), b"jax_triton.ModuleImageProto"),
    "global_scratch": ((0, 11, 1), b"global_scratch_size"),
    "tma_descriptors": ((0, 11, 1), b"create_tma_descriptor_parameter"),
}


def installed_plugin(platform: str) -> str | None:
    """The import name of the jaxlib plugin installed for `platform`, or None (no import)."""
    return next((package for package in PLUGIN_PACKAGES[platform]
                 if importlib.util.find_spec(package) is not None), None)


def installed_gpu_platforms() -> tuple[str, ...]:
    return tuple([p for p in GPU_PLATFORMS if installed_plugin(p) is not None])


@functools.cache
def plugin_triton_module(platform: str) -> types.ModuleType | None:
    """The plugin's own `_triton` extension for `platform` (None where it does not import), not
    `jax._src.lib.gpu_triton`'s top-level names, which ROCm's overwrite when both are installed."""
    try:
        from jax._src.lib import gpu_triton  # registers the custom-call targets with XLA
    except Exception as err:  # a broken plugin must not break lowering for the other vendor
        logger.debug("jax._src.lib.gpu_triton did not import: %s", err)
        gpu_triton = None
    attr = {"cuda": "_cuda_triton", "rocm": "_hip_triton"}[platform]
    module = getattr(gpu_triton, attr, None)
    package = installed_plugin(platform)
    if module is not None or package is None:
        return module
    try:
        return importlib.import_module(f"{package}._triton")
    except Exception as err:
        logger.debug("%s._triton did not import: %s", package, err)
        return None


@dataclasses.dataclass(frozen=True)
class PluginFeatures:
    """What the jaxlib plugin that will run a kernel loads (`plugin` None: none installed): a
    binary in `module_image`, the global scratch a kernel asks for (`tl.make_tensor_descriptor`
    on sm_90+), host-side TMA descriptors encoded at launch; `detected_from` says how we know."""

    platform: str
    plugin: str | None
    module_image: bool
    global_scratch: bool
    detected_from: str
    tma_descriptors: bool = False


def _features_from_version(platform: str, plugin: str | None, version: str, source: str):
    digits = [re.sub(r"\D", "", piece) for piece in version.split(".")]
    release = tuple(int(number) for number in itertools.takewhile(bool, digits))
    return PluginFeatures(platform=platform, plugin=plugin, detected_from=f"{source} {version}",
                          **{name: release >= since
                             for name, (since, _) in PLUGIN_FEATURES.items()})


@functools.cache
def plugin_features(platform: str) -> PluginFeatures | None:
    """What the installed plugin for `platform` loads (None: none installed), from its `_triton`
    binary (imported, or found in its distribution's files), else from its release."""
    module = plugin_triton_module(platform)
    if module is not None:
        plugin, path = module.__name__.split(".")[0], module.__file__
        source = f"{module.__name__} (inspected)"
    else:
        plugin = installed_plugin(platform)
        if plugin is None:
            return None
        distribution = plugin.replace("_", "-")
        try:  # the extension file, as the distribution lists it
            files = importlib.metadata.files(distribution) or ()
            version = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            files, version = (), _compat.jaxlib_version()
        path = next((str(file.locate()) for file in files if file.parent.name == plugin
                     and file.name.startswith("_triton.") and file.suffix == ".so"), None)
        if path is None or not os.path.isfile(path):
            return _features_from_version(platform, plugin, version, f"{distribution} release")
        source = f"{path} (read; it does not import here)"
    with open(path, "rb") as binary:
        content = binary.read()
    return PluginFeatures(platform=platform, plugin=plugin, detected_from=source,
                          **{name: marker in content
                             for name, (_, marker) in PLUGIN_FEATURES.items()})


@functools.cache
def assumed_features(platform: str) -> PluginFeatures:
    """Features assumed for a platform with no plugin here: those of this jaxlib's release, as the
    plugins ship in lockstep with jaxlib."""
    return _features_from_version(platform, None, _compat.jaxlib_version(),
                                  "no plugin here; assumed jaxlib")


def triton_compiler(platform: str) -> types.ModuleType:
    """Triton's compiler module for `platform` (`triton.backends.nvidia.compiler`, ...); an
    ImportError naming what to install where it does not import (Triton's own where Triton does
    not import at all)."""
    info = _compat.triton_info()
    name = vendor(platform).triton_backend
    try:
        return importlib.import_module(f"triton.backends.{name}.compiler")
    except ModuleNotFoundError as err:
        raise ImportError(
            f"The installed Triton {info.version} has no '{name}' backend, which lowering for "
            f"platform '{platform}' needs (it has: {', '.join(info.backends) or 'none'}). Install "
            f"a Triton build for {platform.upper()}: {_compat.TRITON_INSTALL_HINT}") from err
    except (ImportError, RuntimeError, ValueError) as err:
        raise ImportError(
            f"Triton {info.version}'s '{name}' backend does not import: {type(err).__name__}: "
            f"{err}. Reinstall Triton: {_compat.TRITON_INSTALL_HINT}") from err
