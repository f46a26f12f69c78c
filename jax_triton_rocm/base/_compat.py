"""What differs between jaxlib and Triton releases (which is installed, which custom-call
target a call takes), detected in one place. Detected beside their one reader: the Triton dialect
(`routes.xla._xla_native`), what a plugin loads (`backends._vendors`).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import shlex
from typing import Any

from jax_triton_rocm.base import _env, _state

logger = logging.getLogger("jax_triton_rocm")

FFI_CALL_NAME = "triton_kernel_call_ffi"
LEGACY_CALL_NAME = "triton_kernel_call"
XLA_TRITON_CALL_NAME = "__gpu$xla.gpu.triton"  # XLA's own Triton call (`routes.xla._xla_native`)
XLA_CALL_NAME_ATTRIBUTE = "jax_triton_rocm.name"  # the call's name on it (a frontend attribute)


def autotuned_call_name() -> str:
    """The custom-call target for an autotuned call: legacy, which times the configs on real data
    (docs/autotuning.md, "Which config runs"), unless `JAX_TRITON_ROCM_AUTOTUNE_TARGET=ffi`
    forces the FFI one, with one warning per process."""
    if _env.autotune_target() != "ffi":
        return LEGACY_CALL_NAME
    if _state.first_warning("ffi autotune"):
        logger.warning(
            "jax_triton_rocm: %s=ffi sends autotuned calls through %s, whose autotuner times the "
            "configs before the program's earlier kernels have run (jaxlib 0.10-0.11: in the "
            "handler's initialize stage; 0.12: possibly inside a CUDA-graph capture): a kernel "
            "whose addresses depend on an operand computed in the same program (a gather, a "
            "scatter, an MoE permute) then reads and writes out of bounds, which can crash the "
            "process or corrupt other buffers. It is safe only when every operand of every "
            "autotuned call is an input of the jitted program. Unset it to use the legacy target, "
            "or pick the configs once on real data with jax_triton_rocm.autotune.",
            _env.ENV_AUTOTUNE_TARGET, FFI_CALL_NAME)
    return FFI_CALL_NAME


# Plain calls take the typed-FFI target, which XLA records into command buffers, unless XLA_FLAGS
# keep custom calls out of them (docs/environment.md, JAX_TRITON_ROCM_CALL_TARGET).
_COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer="
_COMMAND_TYPE = re.compile(r"[A-Z][A-Z0-9_]*")  # a name of XLA's command types, upper-cased
_GRAPH_LEVEL_FLAG = "--xla_gpu_graph_level="  # the older flag: no level 0-3 records custom calls


@functools.lru_cache(maxsize=16)
def custom_calls_recorded(xla_flags: str) -> bool:
    """Whether XLA, started with `xla_flags`, records custom calls into command buffers, its flags
    applied in order as XLA does; a value XLA refuses (it stops the process) changes nothing."""
    try:
        words = shlex.split(xla_flags)
    except ValueError:  # unbalanced quotes: XLA reads it its own way; look at plain words
        words = xla_flags.split()
    recorded = True  # XLA's default list holds CUSTOM_CALL
    for word in words:
        if word.startswith(_GRAPH_LEVEL_FLAG):
            recorded = False
        elif word.startswith(_COMMAND_BUFFER_FLAG):
            items = [item.strip().upper() for item in word[len(_COMMAND_BUFFER_FLAG):].split(",")]
            if items == [""]:
                recorded = False
            elif all(item[:1] in "+-" and _COMMAND_TYPE.fullmatch(item[1:]) for item in items):
                for item in items:
                    if item[1:] == "CUSTOM_CALL":
                        recorded = item[0] == "+"
            elif all(_COMMAND_TYPE.fullmatch(item) for item in items):
                recorded = "CUSTOM_CALL" in items
    return recorded


def plain_call_name(settings: _env.LoweringSettings, *, exporting: bool) -> str:
    """The target of a plain call as `settings` choose it (auto: `custom_calls_recorded`). An
    exported call takes FFI: it runs under other flags, and jax-triton's export checks allow it."""
    if exporting or settings.call_target == "ffi":
        return FFI_CALL_NAME
    if settings.call_target == "legacy" or not custom_calls_recorded(settings.xla_flags):
        return LEGACY_CALL_NAME
    return FFI_CALL_NAME


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
    """Imports Triton once; ImportError, naming the install command, for a missing or broken one."""
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
