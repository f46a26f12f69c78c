"""Why JAX has no GPU device here, and what to install or change. JAX is imported only inside
the functions: the command line reads `JAX_PLATFORMS` and the plugins before it starts JAX.
"""

from __future__ import annotations

import dataclasses

from jax_triton_rocm.backends import _vendors

_SMI = {"cuda": "nvidia-smi", "rocm": "rocm-smi"}


@dataclasses.dataclass(frozen=True)
class Problem:
    """Something that failed: `what`, its likely `cause` and the `fix`; `platform` if one's."""

    what: str
    cause: str
    fix: str
    platform: str | None = None

    def text(self) -> str:
        """The problem in three lines: what, likely cause, fix."""
        return f"{self.what}\n  likely cause: {self.cause}\n  fix: {self.fix}"


def jax_platforms() -> str:
    """JAX's `jax_platforms` setting (`JAX_PLATFORMS`), "" when unset."""
    from jax._src import config

    return config.jax_platforms.value or ""


def named_platforms() -> set[str]:
    """The platforms `JAX_PLATFORMS` names, aliases ("gpu") expanded; empty when unset."""
    from jax._src import xla_bridge

    named = set()
    for name in filter(None, (p.strip() for p in jax_platforms().split(","))):
        named.update(xla_bridge.expand_platform_alias(name))
    return named


def nvidia_gpu_visible() -> bool:
    """Whether JAX sees an NVIDIA GPU device file."""
    from jax._src import hardware_utils

    return hardware_utils.has_visible_nvidia_gpu()


def without_plugin(platform: str) -> str:
    """How to stop a broken plugin of `platform` from starting, on a machine without its GPU."""
    plugin = _vendors.installed_plugin(platform)
    uninstall = (f"pip uninstall -y {plugin.replace('_', '-')} "
                 f"{plugin.replace('_plugin', '_pjrt').replace('_', '-')}, or " if plugin else "")
    return ("Without that GPU nothing needs the plugin (cross-compiling does not): "
            f"{uninstall}set JAX_PLATFORMS=cpu to skip it.")


def why_not_started(platform: str, problems: tuple[Problem, ...] | list[Problem] = ()
                    ) -> tuple[str, str]:
    """(likely cause, fix) for a GPU `platform` that JAX did not start; a problem of that
    platform among `problems` (read from JAX's start-up) is the answer where there is one."""
    vendor = _vendors.VENDORS.get(platform)
    if vendor is None:
        return (f"{platform!r} is not a platform this JAX knows",
                "use cpu, cuda or rocm in JAX_PLATFORMS.")
    if _vendors.installed_plugin(platform) is None:
        return (f"no jaxlib {platform} plugin is installed",
                f"install JAX for that GPU: {vendor.install_hint}.")
    for problem in problems:
        if problem.platform == platform:
            return problem.cause, problem.fix
    if platform == "cuda" and not nvidia_gpu_visible():
        return ("JAX sees no NVIDIA GPU here (no /dev/nvidia0 or /dev/nvidiactl): no GPU, or its "
                "driver is not loaded", "check the GPU and its driver with nvidia-smi.")
    from jax._src import xla_bridge

    error = getattr(xla_bridge, "_backend_errors", {}).get(platform)
    return ((f"its backend failed: {error}" if error else
             "the plugin found no device (no GPU, no driver, or libraries missing)"),
            f"check the GPU and its driver ({_SMI[platform]}), and that JAX was installed with "
            f"its libraries: {vendor.install_hint}.")


def no_gpu_reason(problems: tuple[Problem, ...] = ()) -> str:
    """Why JAX has no CUDA or ROCm device here, and what to install or change; `problems`
    (what JAX's start-up reported, `_startup.start()`) name a plugin's failure."""
    from jax._src import xla_bridge

    installed = {p: _vendors.installed_plugin(p) for p in _vendors.GPU_PLATFORMS}
    if not any(installed.values()):
        return ("No jaxlib GPU plugin is installed (none is needed without a GPU), so JAX runs "
                f"on the CPU. On a machine with a GPU, install JAX with its plugin: "
                f"{_vendors.VENDORS['cuda'].install_hint} on NVIDIA, "
                f"{_vendors.VENDORS['rocm'].install_hint} on AMD.")
    try:
        started = set(xla_bridge.backends())
    except Exception:  # noqa: BLE001  (start-up failed: the command line explains it)
        started = set()
    setting, named = jax_platforms(), named_platforms()
    reasons = []
    for platform, plugin in installed.items():
        if plugin is None or platform in started:
            continue
        if setting and platform not in named:
            reasons.append(f"{plugin} is installed, but JAX_PLATFORMS={setting!r} leaves "
                           f"{platform} out (add {platform} to it, or unset it).")
            continue
        cause, fix = why_not_started(platform, problems)
        reasons.append(f"{plugin} is installed, but JAX started no {platform} device: {cause}. "
                       f"{fix}")
    return " ".join(reasons) or "JAX reports no CUDA or ROCm device."

