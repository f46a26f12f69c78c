"""Which GPU architecture a lowering compiles for, and where its kernels will run.

In order: `target_arch(...)` in force; `JAX_TRITON_ROCM_TARGET_ARCH` (read at import: a later
change raises); the computation's devices (they must agree); the platform's local devices. The
named architectures live in a JAX config state in its trace and jit cache keys, so a function
traced under one `target_arch` is never served a lowering made for another.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from jax._src import config

from jax_triton_rocm import backends
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.backends._vendors import GpuArch, normalize_arch
from jax_triton_rocm.base import _compat, _env
from jax_triton_rocm.kernel._spec import KernelCallSpec

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext, ModuleContext
    from jax_triton_rocm.backends._backend import Backend


def placement(backend: Backend, ctx: LoweringRuleContext, spec: KernelCallSpec
              ) -> tuple[GpuArch, _vendors.PluginFeatures, GpuArch | None, bool]:
    """Where jaxlib's route runs the call: `resolve_arch`'s two, the devices' architecture where
    it differs from the compile target (only where the call names its own, `compute_capability`:
    those named, else, outside `jax.export`, whose result runs elsewhere, the computation's),
    and whether the lowering is for `jax.export`."""
    arch, features = resolve_arch(backend, ctx, spec)
    exporting = for_export(ctx)
    if exporting:  # before the memos: a plan kept from another lowering may hold a path
        backend.check_export(features)
    devices = None
    if backend.arch_keyword and arch.source == backend.arch_keyword:  # the call's own target
        devices = named_arch(backend.platform)
        if devices is None and not exporting:
            try:
                devices = lowering_arch(backend.platform, ctx.module_context)
            except RuntimeError:  # no device here: a cross-compile for the call's own arch
                devices = None
        if devices is not None and devices.arch == arch.arch:
            devices = None
    return arch, features, devices, exporting


def traced_platform() -> str | None:
    """The GPU platform a call traced now will most likely be lowered for: JAX's default backend
    where it is a GPU's, else the one GPU platform with a named architecture (a cross-compile);
    None where a trace cannot tell (no GPU and none or several named)."""
    from jax._src import xla_bridge

    if xla_bridge.backends_are_initialized():  # a trace never starts JAX's backends itself
        if (default := xla_bridge.get_backend().platform) in _vendors.GPU_PLATFORMS:
            return default
    named = [platform for platform in _vendors.GPU_PLATFORMS
             if named_arch(platform) is not None]
    return named[0] if len(named) == 1 else None


def traced_arch(backend: Backend, spec: KernelCallSpec) -> GpuArch | None:
    """The architecture a lowering for `backend`'s platform will compile the call for, as
    `resolve_arch` finds it (the call's own, else a named one, else the local devices'); None
    where the devices have none or several, or Triton cannot compile for it."""
    platform = backend.platform
    own = getattr(spec, backend.arch_field) if backend.arch_field else None
    try:
        arch = (GpuArch(platform, own, backend.arch_keyword) if own else named_arch(platform)
                ) or lowering_arch(platform, None)
    except (ValueError, RuntimeError):  # no device, or devices of no one architecture
        return None
    return None if arch_problem(platform, arch.arch) else arch


def for_export(ctx: LoweringRuleContext) -> bool:
    """Whether the lowering is for `jax.export` (its result may run on other machines and
    jaxlibs), as the lowering parameters say (jax 0.10.2-0.12)."""
    parameters = getattr(ctx.module_context, "lowering_parameters", None)
    return bool(getattr(parameters, "for_export", False))


def device_kind(platform: str, module_context: ModuleContext) -> str | None:
    """The kind of GPU the lowering runs on (e.g. "NVIDIA H200"), or None where there are several
    kinds or none (cross-compiling)."""
    kinds = {getattr(d, "device_kind", None) for d in _devices(platform, module_context)[0]}
    return kinds.pop() if len(kinds) == 1 else None


# Holds a tuple of (platform, arch) pairs under `target_arch`, else the environment's string
# (JAX reads its default from the variable of the same name).
_ARCH_STATE = config.string_or_object_state(
    _env.ENV_TARGET_ARCH.lower(), None,
    "GPU architectures jax_triton_rocm compiles Triton kernels for, e.g. 'cuda=sm_90,rocm=gfx942'"
    " (default: those of the devices).",
    include_in_jit_key=True, include_in_trace_context=True)
# The variable as JAX read it into `_ARCH_STATE`, just above.
_ENV_AS_READ = _env.target_arch()


@functools.lru_cache(maxsize=None)  # one entry per architecture named in the process
def arch_problem(platform: str, arch: str) -> str | None:
    """Why the installed Triton cannot compile for canonical `arch`, or None. Triton keeps no
    list of its targets: the backend's (LLVM's, ptxas's) bounds them, else Triton's compile."""
    try:
        backend = backends.backend(platform)
        if backend.knows_arch(arch):
            return None
        known = backend.known_archs()
    except Exception:  # noqa: BLE001  (no list to check against: Triton's compile will tell)
        return None
    if not known:
        return None
    return (f"is not an architecture the installed Triton ({_compat.triton_info().version}) can "
            f"compile for; it knows {', '.join(known)}")


def check_arch(platform: str, arch: str, *, given: Any, what: str) -> str:
    """`arch` (canonical) if the installed Triton can compile for it, else a ValueError."""
    problem = arch_problem(platform, arch)
    if problem:
        raise ValueError(f"{what}={given!r} ({arch}) {problem}.")
    return arch


def _parse_env(raw: str) -> dict[str, str]:
    archs = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        platform, sep, arch = item.partition("=")
        platform = platform.strip().lower()
        if not sep or platform not in ("cuda", "rocm"):
            raise ValueError(
                f"{_env.ENV_TARGET_ARCH}={raw!r}: each item must be 'cuda=ARCH' or 'rocm=ARCH', "
                f"e.g. {_env.ENV_TARGET_ARCH}='cuda=sm_90,rocm=gfx942'.")
        if platform in archs:
            raise ValueError(
                f"{_env.ENV_TARGET_ARCH}={raw!r} names platform {platform} more than once; one "
                f"lowering compiles for one architecture per platform. Name each platform once, "
                f"e.g. {_env.ENV_TARGET_ARCH}='cuda=sm_90,rocm=gfx942'.")
        archs[platform] = check_arch(
            platform, normalize_arch(platform, arch, what=_env.ENV_TARGET_ARCH), given=raw,
            what=_env.ENV_TARGET_ARCH)
    return archs


# The variable's reader for `_env.check_variables`: the architectures it names now.
_env.VARIABLE_READERS[_env.ENV_TARGET_ARCH] = lambda: _parse_env(_env.target_arch() or "")


@contextlib.contextmanager
def named_in_force(archs: dict[str, str]) -> Iterator[dict[str, str]]:
    """Names `archs` (canonical, by platform) over those named before; yields them all. It does
    not check the variable: the way out of one set too late."""
    value = _ARCH_STATE.value
    named = _parse_env(value) if isinstance(value, str) else dict(value or ())
    merged = {**named, **archs}
    with _ARCH_STATE(tuple(sorted(merged.items()))):
        yield merged


def named_arch(platform: str) -> GpuArch | None:
    """The architecture named for `platform` by `target_arch`, else by the environment, if any;
    a RuntimeError where the variable changed after it was read."""
    value = _ARCH_STATE.value
    if not isinstance(value, tuple):  # no target_arch() in force
        now = _env.target_arch()
        if now != _ENV_AS_READ:  # set, changed or unset after it was read
            then = "unset" if _ENV_AS_READ is None else f"{_ENV_AS_READ!r}"
            done = "unset" if now is None else f"set to {now!r}"
            try:
                example = ", ".join(f"{p}={a!r}" for p, a in _parse_env(now or "").items())
            except ValueError:
                example = ""
            example = example or f"cuda={_vendors.vendor('cuda').example_arch!r}"
            raise RuntimeError(
                f"{_env.ENV_TARGET_ARCH} was {done} too late: jax_triton_rocm read it when it was "
                f"imported ({then} then), and a change after that has no effect in this process. "
                f"Set it before Python starts (in the shell) or before `import jax_triton_rocm` "
                f"(and before JAX starts its backends, which imports it), or name the "
                f"architecture in code: `with jax_triton_rocm.target_arch({example}):` around "
                f"the lowering.")
    archs = _parse_env(value) if isinstance(value, str) else dict(value or ())
    if platform not in archs:
        return None
    source = _env.ENV_TARGET_ARCH if isinstance(value, str) else "target_arch()"
    return GpuArch(platform, archs[platform], source)


def _device_arch(platform: str, device: Any) -> str:
    """The architecture a device reports in `compute_capability` ("9.0", "gfx942:xnack-"); a
    device without a live GPU reports a placeholder."""
    capability = getattr(device, "compute_capability", None)
    example = "cuda='sm_90'" if platform == "cuda" else "rocm='gfx942'"
    try:
        if capability is None:
            raise ValueError(f"device {device} does not report compute_capability")
        return normalize_arch(platform, capability, what=f"{device}.compute_capability")
    except ValueError as err:
        raise ValueError(
            f"Device {device} reports compute_capability={capability!r}, which names no "
            f"{platform} architecture, so the lowering cannot tell what to compile for. Name it: "
            f"`with jax_triton_rocm.target_arch({example}):` or "
            f"{_env.ENV_TARGET_ARCH}='{example.replace(chr(39), '')}'.") from err


def _devices(platform: str, module_context: ModuleContext) -> tuple[list[Any], str]:
    """The devices of `platform` the module is built for, else the local ones; and which."""
    axis_context = getattr(module_context, "axis_context", None)
    devices = list(getattr(axis_context, "device_assignment", None) or ())
    mesh = getattr(axis_context, "mesh", None)
    if not devices and mesh is not None and hasattr(mesh, "devices"):
        devices = list(mesh.devices.flat)
    devices = [d for d in devices if getattr(d, "platform", platform) == platform]
    if devices:
        return devices, "the computation's devices"
    local = f"the local {platform} devices"
    try:
        backend = module_context.get_backend(optional=True)
    except Exception:  # no such backend on this machine (or a context without `get_backend`)
        backend = None
    if backend is not None:
        return list(backend.local_devices()), local
    import jax

    try:
        return list(jax.local_devices(backend=platform)), local
    except RuntimeError:
        return [], local


def resolve_arch(backend: Backend, ctx: LoweringRuleContext,
                 spec: KernelCallSpec) -> tuple[GpuArch, _vendors.PluginFeatures]:
    """The target a call compiles for (its vendor keyword, a named architecture or the
    devices), and the features of the jaxlib plugin that will load the kernel."""
    platform = backend.platform
    own = getattr(spec, backend.arch_field) if backend.arch_field else None
    if own is not None:  # then Triton must know it too
        check_arch(platform, own, given=own, what=backend.arch_keyword.rstrip("="))
    named = named_arch(platform) if own is None else GpuArch(platform, own, backend.arch_keyword)
    features = _vendors.plugin_features(platform)
    if features is None and named is None:
        vendor = _vendors.vendor(platform)
        example = vendor.example_arch
        raise RuntimeError(
            f"Lowering triton_call for platform '{platform}' needs JAX's {platform.upper()} "
            f"plugin, which is not installed: {vendor.install_hint}. To only "
            f"cross-compile (no GPU here), name the architecture: `with "
            f"jax_triton_rocm.target_arch({platform}='{example}'):` around the lowering, or "
            f"{_env.ENV_TARGET_ARCH}='{platform}={example}'.")
    features = features or _vendors.assumed_features(platform)
    return named or lowering_arch(platform, ctx.module_context), features


def lowering_arch(platform: str, module_context: ModuleContext) -> GpuArch:
    """The devices' architecture for a lowering of `platform` where none is named (the callers
    ask `named_arch` first)."""
    devices, source = _devices(platform, module_context)
    archs = {_device_arch(platform, d) for d in devices}
    if len(archs) == 1:
        return GpuArch(platform, archs.pop(), source)
    if len(archs) > 1:
        raise ValueError(
            f"The {platform} devices of this computation have different architectures "
            f"({', '.join(sorted(archs))}); one Triton binary cannot serve them all. Lower for "
            f"one kind of device at a time (jax.jit(..., device=...) or a mesh of like devices).")
    example = f"{platform}='{_vendors.vendor(platform).example_arch}'"
    raise RuntimeError(
        f"No {platform} device to take the GPU architecture from. To lower for {platform} "
        f"without one, name the architecture: `with jax_triton_rocm.target_arch({example}):` "
        f"around the lowering, or set {_env.ENV_TARGET_ARCH}='{example.replace(chr(39), '')}'.")

