"""What differs between jaxlib, plugin and Triton releases, detected in one place.

Every other module asks this one ("does the plugin load a module image?", "which Triton
backends are installed?") instead of comparing versions itself. Detection is by feature wherever
the installed packages allow it; the one fallback on version numbers (a plugin that cannot be
imported on this machine, such as the ROCm plugin without a ROCm runtime) is written here and
nowhere else.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import types
from typing import Any

from jax_triton_rocm.base import _values, _vendors

logger = logging.getLogger("jax_triton_rocm")

# The jaxlib plugins that carry a `_triton` module, newest first (as jaxlib's plugin_support).
PLUGIN_PACKAGES = {platform: v.plugin_packages for platform, v in _vendors.VENDORS.items()}
PLUGIN_INSTALL_HINT = {platform: v.install_hint for platform, v in _vendors.VENDORS.items()}

FFI_TARGET = "triton_kernel_call_ffi"
LEGACY_TARGET = "triton_kernel_call"
XLA_TRITON_TARGET = "__gpu$xla.gpu.triton"  # XLA's own Triton call (`routes.xla._xla_native`)
XLA_CALL_NAME_ATTRIBUTE = "jax_triton_rocm.name"  # the call's name on it (a frontend attribute)

# Forces the custom-call target of autotuned calls: "ffi" or "legacy" (unset: legacy).
ENV_AUTOTUNE_TARGET = _values.ENV_AUTOTUNE_TARGET
AUTOTUNE_TARGETS = {"ffi": FFI_TARGET, "legacy": LEGACY_TARGET}

# Where jaxlib times an autotuned call's configs (`AutotunedKernelCall::Autotune` via
# `GetKernelCall`, jaxlib/gpu/triton_kernels.cc; the CUDA and ROCm plugins build the same source):
#  - `triton_kernel_call_ffi`, jaxlib 0.10.2-0.11.x: in the *initialize* stage, which XLA runs for
#    every thunk before any executes: operands computed earlier in the program are not computed
#    yet, so a kernel that turns data into addresses (gather, MoE permute) goes out of bounds.
#  - `triton_kernel_call_ffi`, jaxlib 0.12: no initialize stage (`registrations()`); at the first
#    execute, which XLA may be capturing into a command buffer, on arbitrary data too.
#  - `triton_kernel_call` (legacy): at execute only, never in a command buffer: on real data.
# So autotuned calls take the legacy target; a config picked once on real data
# (`routes._target`, `jax_triton_rocm.autotune`) is emitted alone, as a plain FFI call.

# What a plugin's `_triton` can do, by feature: the release that added it (only for a plugin
# whose `_triton` cannot be imported here, as ROCm's without libamdhip64, or for no plugin, where
# jaxlib's release is assumed), and a string only a binary with it carries (protobuf keeps the
# full names of message types for UTF-8 checks; a Python binding keeps its name).
PLUGIN_FEATURES: dict[str, tuple[tuple[int, ...], bytes]] = {
    "module_image": ((0, 11, 1), b"jax_triton.ModuleImageProto"),
    "global_scratch": ((0, 11, 1), b"global_scratch_size"),
    "tma_descriptors": ((0, 11, 1), b"create_tma_descriptor_parameter"),
}


def installed_plugin(platform: str) -> str | None:
    """The import name of the jaxlib plugin installed for `platform`, or None (cheap: no import,
    no device)."""
    for package in PLUGIN_PACKAGES[platform]:
        if importlib.util.find_spec(package) is not None:
            return package
    return None


def installed_gpu_platforms() -> tuple[str, ...]:
    """The GPU platforms ("cuda", "rocm") whose jaxlib plugin is installed."""
    return tuple([p for p in _vendors.GPU_PLATFORMS if installed_plugin(p) is not None])


@functools.cache
def plugin_triton_module(platform: str) -> types.ModuleType | None:
    """The plugin's `_triton` extension for `platform`, or None where it cannot be imported.

    Uses the plugin's own module, never `jax._src.lib.gpu_triton`'s top-level names: those are
    overwritten by ROCm's when both plugins are installed.
    """
    try:
        from jax._src.lib import gpu_triton  # registers the custom-call targets with XLA
    except Exception as err:  # a broken plugin must not break lowering for the other vendor
        logger.debug("jax._src.lib.gpu_triton did not import: %s", err)
        gpu_triton = None
    attr = {"cuda": "_cuda_triton", "rocm": "_hip_triton"}[platform]
    module = getattr(gpu_triton, attr, None)
    if module is not None:
        return module
    package = installed_plugin(platform)
    if package is None:
        return None
    try:
        return importlib.import_module(f"{package}._triton")
    except Exception as err:
        logger.debug("%s._triton did not import: %s", package, err)
        return None


@dataclasses.dataclass(frozen=True)
class PluginFeatures:
    """What the jaxlib plugin that will run a kernel can load.

    Attributes:
      platform: "cuda" or "rocm".
      plugin: the plugin's import name, or None when no plugin is installed.
      module_image: the plugin reads `TritonKernel.module_image` (a CUBIN or HSACO inside).
      global_scratch: the plugin allocates the global scratch memory a kernel asks for (what
        descriptors built in a kernel, `tl.make_tensor_descriptor`, use on sm_90+).
      detected_from: how this was found out, for error messages and notes.
      tma_descriptors: the plugin encodes host-side TMA descriptors (a `TensorDescriptor`
        operand on sm_90+) at launch.
    """

    platform: str
    plugin: str | None
    module_image: bool
    global_scratch: bool
    detected_from: str
    tma_descriptors: bool = False


def autotuned_call_target() -> str:
    """The custom-call target for an autotuned call: legacy, unless the environment forces one.

    `JAX_TRITON_ROCM_AUTOTUNE_TARGET=ffi|legacy` (read at each lowering) forces one; `ffi`
    logs one warning per process (jaxlib then times configs on operands not yet computed).

    Raises ValueError for an unknown value.
    """
    forced = os.environ.get(ENV_AUTOTUNE_TARGET, "").strip().lower()
    if not forced:
        return LEGACY_TARGET
    if forced not in AUTOTUNE_TARGETS:
        raise ValueError(
            f"{ENV_AUTOTUNE_TARGET}={forced!r} is not a target for autotuned calls; use one of "
            f"{', '.join(AUTOTUNE_TARGETS)} (or unset it for the default, legacy).")
    if forced == "ffi":
        _warn_ffi_autotune()
    return AUTOTUNE_TARGETS[forced]


@functools.cache
def _warn_ffi_autotune() -> None:
    logger.warning(
        "jax_triton_rocm: %s=ffi sends autotuned calls through %s, whose autotuner times the "
        "configs before the program's earlier kernels have run (jaxlib 0.10-0.11: in the "
        "handler's initialize stage; 0.12: possibly inside a CUDA-graph capture): a kernel whose "
        "addresses depend on an operand computed in the same program (a gather, a scatter, an "
        "MoE permute) then reads and writes out of bounds, which can crash the process or "
        "corrupt other buffers. It is safe only when every operand of every autotuned call is "
        "an input of the jitted program. Unset it to use the legacy target, or pick the configs "
        "once on real data with jax_triton_rocm.autotune.", ENV_AUTOTUNE_TARGET, FFI_TARGET)


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in version.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    return tuple(parts)


def _features_from_version(platform: str, plugin: str | None, version: str, source: str):
    release = _version_tuple(version)
    return PluginFeatures(platform=platform, plugin=plugin, detected_from=f"{source} {version}",
                          **{name: release >= since
                             for name, (since, _) in PLUGIN_FEATURES.items()})


@functools.cache
def plugin_features(platform: str) -> PluginFeatures | None:
    """Detects what the installed plugin for `platform` loads; None when no plugin is installed.

    From the names the plugin's `_triton` binary carries (its proto and its launcher): the
    imported module's file, or, where it cannot be imported (the ROCm plugin needs libamdhip64),
    the file as the plugin's distribution lists it; from the plugin's release when neither exists.
    """
    module = plugin_triton_module(platform)
    if module is not None:
        plugin, path = module.__name__.split(".")[0], module.__file__
        source = f"{module.__name__} (inspected)"
    else:
        plugin = installed_plugin(platform)
        if plugin is None:
            return None
        distribution = plugin.replace("_", "-")
        path = _unimported_triton_binary(distribution, plugin)
        if path is None:
            try:
                version = importlib.metadata.version(distribution)
            except importlib.metadata.PackageNotFoundError:
                version = jaxlib_version()
            return _features_from_version(platform, plugin, version, f"{distribution} release")
        source = f"{path} (read; it does not import here)"
    with open(path, "rb") as binary:
        content = binary.read()
    return PluginFeatures(platform=platform, plugin=plugin, detected_from=source,
                          **{name: marker in content
                             for name, (_, marker) in PLUGIN_FEATURES.items()})


def _unimported_triton_binary(distribution: str, package: str) -> str | None:
    """The path of `package._triton`'s extension file, from the distribution's file list."""
    try:
        files = importlib.metadata.files(distribution) or ()
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if (file.parent.name == package and file.name.startswith("_triton.")
                and file.suffix == ".so"):
            path = str(file.locate())
            return path if os.path.isfile(path) else None
    return None


def assumed_features(platform: str) -> PluginFeatures:
    """Features assumed when cross-compiling for a platform with no plugin installed here.

    The plugins ship in lockstep with jaxlib, so the jaxlib installed here stands for the one
    that will load the kernel.
    """
    return _features_from_version(platform, None, jaxlib_version(),
                                  "no plugin here; assumed jaxlib")


def jaxlib_version() -> str:
    import jaxlib
    return jaxlib.__version__


@dataclasses.dataclass(frozen=True)
class TritonInfo:
    """The installed Triton: its module, its version and what it offers."""

    module: Any
    version: str
    backends: tuple[str, ...]


TRITON_INSTALL_HINT = "pip install 'triton>=3.6,<3.10'"


@functools.cache
def triton_info() -> TritonInfo:
    """Imports Triton once; raises ImportError saying what is wrong, with the cause chained.

    A Triton whose import fails with ImportError, RuntimeError or ValueError (a build for
    another Python, a backend that does not load, a mismatched LLVM) gets the same treatment as
    a missing one: an ImportError that names the problem and the install command.
    """
    try:
        import triton
        import triton.backends
    except ModuleNotFoundError as err:
        if err.name is not None and err.name.split(".")[0] == "triton":
            raise ImportError(
                f"jax_triton_rocm needs Triton, which is not installed. Install it with: "
                f"{TRITON_INSTALL_HINT}") from err
        raise ImportError(f"Triton is installed but does not import ({err}). Reinstall it "
                          f"with: {TRITON_INSTALL_HINT}") from err
    except (ImportError, RuntimeError, ValueError) as err:
        raise ImportError(
            f"Triton is installed but does not import: {type(err).__name__}: {err}. It may be "
            f"a build for another Python, platform or LLVM; reinstall it with: "
            f"{TRITON_INSTALL_HINT}") from err
    backends = tuple(sorted(getattr(triton.backends, "backends", {})))
    return TritonInfo(module=triton, version=triton.__version__, backends=backends)


def triton_backend_error(platform: str, err: BaseException) -> ImportError:
    """The error for Triton's compiler backend of `platform` ("cuda" -> nvidia, "rocm" -> amd)
    failing to import with `err` (the caller raises it, chained): it names the platform, the
    backend and what to install."""
    info = triton_info()
    name = _vendors.vendor(platform).triton_backend
    if isinstance(err, ModuleNotFoundError):
        return ImportError(
            f"The installed Triton {info.version} has no '{name}' backend, which lowering for "
            f"platform '{platform}' needs (it has: {', '.join(info.backends) or 'none'}). Install "
            f"a Triton build for {platform.upper()}: {TRITON_INSTALL_HINT}")
    return ImportError(
        f"Triton {info.version}'s '{name}' backend does not import: {type(err).__name__}: "
        f"{err}. Reinstall Triton: {TRITON_INSTALL_HINT}")
