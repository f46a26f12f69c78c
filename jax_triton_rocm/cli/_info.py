"""What `python -m jax_triton_rocm info` reports: versions, plugins, devices, delivery, caches.

Every probe here catches its own failure and reports it as text, so one broken piece (a Triton
that does not import, a plugin without its CUDA libraries, a JAX that cannot start) never hides
the rest of the report. JAX's start-up comes from `_startup.start()`, which the command line runs
first. Also: canonical architecture names from the command line (`canonical_arch`), for the demo.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import re
import sys
from typing import Any

from jax_triton_rocm._version import __version__
from jax_triton_rocm.backends import _no_gpu, _vendors
from jax_triton_rocm.base import _compat, _env
from jax_triton_rocm.cli import _info_routes, _startup
from jax_triton_rocm.routes import _arch

_PLUGIN_DISTRIBUTION = re.compile(r"jax[-_](cuda|rocm)\d+[-_](plugin|pjrt)")


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def plugin_distributions() -> dict[str, str]:
    """The installed jaxlib GPU plugin distributions (plugin and PJRT), name -> version."""
    found = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"] or ""
        if _PLUGIN_DISTRIBUTION.fullmatch(name.lower()):
            found[name.lower().replace("_", "-")] = dist.version
    return dict(sorted(found.items()))


def triton_report() -> dict[str, Any]:
    """Triton's version, backends, Gluon, and where its compiles are cached."""
    try:
        info = _compat.triton_info()
    except ImportError as err:
        return {"error": str(err)}
    from jax_triton_rocm.base import _files

    cache_knobs = info.module.knobs.cache
    cache_dir = cache_knobs.dir
    if _files.needs_default_dir(cache_knobs):
        cache_note = (f"{_env.TRITON_CACHE_DIR}={_env.as_set(_env.TRITON_CACHE_DIR)!r} leaves "
                      f"Triton none; the package's compiles use "
                      f"{cache_knobs.get_triton_dir('cache')}")
    else:
        cache_note = ""
    return {
        "version": info.version,
        "backends": list(info.backends),
        "cache_dir": cache_dir,
        "cache_note": cache_note,
    }


def devices_report(startup: _startup.Startup) -> dict[str, Any]:
    """Per JAX platform: its devices and their architectures, or why there are none."""
    import jax

    report: dict[str, Any] = {}
    for platform in ("cpu", *_vendors.GPU_PLATFORMS):
        if platform not in startup.platforms:
            report[platform] = {"devices": [], "error": "not started"}
            continue
        try:
            devices = jax.devices(platform)
        except RuntimeError as err:
            report[platform] = {"devices": [], "error": _first_line(err)}
            continue
        report[platform] = {"devices": [
            {"id": d.id, "kind": d.device_kind,
             "arch": (_safe_arch(platform, d) if platform != "cpu" else None)}
            for d in devices]}
    return report


def _safe_arch(platform: str, device: Any) -> str | None:
    try:
        return _vendors.normalize_arch(platform, device.compute_capability)
    except (AttributeError, ValueError):
        return None


def _delivery(platform: str, features: _vendors.PluginFeatures) -> str:
    if platform == "cuda":
        if not features.module_image:
            return "PTX, assembled by jaxlib's ptxas at load"
        name = _env.ENV_KEEP_PTX_TEXT
        try:
            ptx_text = f"{'with' if _env.keep_ptx_text() else 'without'} its PTX text ({name})"
        except ValueError:  # marked under "Environment"; the report goes on
            ptx_text = f"with its PTX text or not ({name} is invalid: see Environment)"
        return f"CUBIN in module_image, {ptx_text}; a digest of it in the ptx field"
    try:
        from jax_triton_rocm.backends.hip import _hip

        mode = _hip.delivery_mode(features)
    except (ImportError, ValueError) as err:
        return f"unknown ({_first_line(err)})"
    return {"embedded": "embedded: HSACO in module_image",
            "path": "path: HSACO file, its path in the ptx field"}[mode]


def platform_report(platform: str) -> dict[str, Any]:
    """What a lowering for `platform` emits here: target, delivery, module_image, named arch."""
    features = _vendors.plugin_features(platform)
    assumed = features is None
    if assumed:
        features = _vendors.assumed_features(platform)
    try:
        autotuned = _compat.autotuned_call_name()
    except ValueError as err:
        autotuned = f"unknown ({_first_line(err)})"
    try:
        plain = _compat.plain_call_name(exporting=False)
    except ValueError as err:
        plain = f"unknown ({_first_line(err)})"
    try:
        named = _arch.named_arch(platform)
        named_text = f"{named.arch} (from {named.source})" if named else None
    except (ValueError, RuntimeError) as err:
        named_text = f"invalid ({_first_line(err)})"
    return {
        "plugin": features.plugin,
        "features_from": features.detected_from,
        "custom_call_target": plain,
        "autotuned_call_name": autotuned,
        "binary_delivery": _delivery(platform, features),
        "module_image_read": features.module_image,
        "global_scratch": features.global_scratch,
        "named_arch": named_text,
        "install_hint": _vendors.PLUGIN_INSTALL_HINT[platform] if assumed else None,
    }


def collect(startup: _startup.Startup) -> dict[str, Any]:
    """The whole report, as plain JSON-able values, for JAX's start-up `startup`."""
    import jax
    import jaxlib

    from jax_triton_rocm.routes import _primitive

    devices = devices_report(startup)
    no_gpu = any(devices[p]["devices"] for p in _vendors.GPU_PLATFORMS) or startup.failure
    return {
        "jax_triton_rocm": __version__,
        "python": sys.version.split()[0],
        "os": sys.platform,
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "jaxlib_gpu_plugins": plugin_distributions(),
        "triton": triton_report(),
        "registered_platforms": list(_primitive.registered_platforms()),
        "jax_startup": {
            "failure": startup.failure and dataclasses.asdict(startup.failure),
            "problems": [dataclasses.asdict(p) for p in startup.problems],
            "notes": list(startup.notes),
        },
        "devices": devices,
        "no_gpu_reason": None if no_gpu else _no_gpu.no_gpu_reason(startup.problems),
        "platforms": {p: platform_report(p) for p in _vendors.GPU_PLATFORMS},
        "routes": _info_routes.report(devices),
        "environment": environment_report(),
    }


def exit_status(report: dict[str, Any]) -> int:
    """`info`'s exit status: JAX could not start (3), else Triton does not import (4), else 0."""
    if report["jax_startup"]["failure"]:
        return _startup.EXIT_JAX_DID_NOT_START
    return _startup.EXIT_NO_TRITON if "error" in report["triton"] else _startup.EXIT_OK


def environment_report() -> dict[str, dict[str, str | None]]:
    """The package's, Triton's and JAX's variables with their values (None: unset).

    A `JAX_TRITON_ROCM_*` variable the package does not know is listed too: it is most likely
    a typo. Under "invalid", each package variable whose value the package refuses, with the
    message a kernel call (or the demo) raises for it.
    """
    try:
        invalid = _env.variable_errors()
    except Exception as err:  # noqa: BLE001  (a broken reader must not hide the report)
        invalid = {"(checking the variables)": _first_line(err)}
    return {
        "package": _env.listed(_env.PACKAGE_ENV_VARS),
        "unknown_package_variables": _env.unknown_package_variables(),
        "triton": _env.listed(_env.TRITON_ENV_VARS),
        "jax": _env.listed(_env.JAX_ENV_VARS),
        "invalid": invalid,
    }


def _startup_lines(startup: dict[str, Any]) -> list[str]:
    """The JAX start-up section: why it failed, each plugin that failed, other messages."""
    if not (startup["failure"] or startup["problems"] or startup["notes"]):
        return []
    lines = ["JAX start-up:"]
    for label, problems in (("failed", [startup["failure"]] if startup["failure"] else []),
                            ("problem", startup["problems"])):
        for problem in problems:
            lines += [f"  {label}: {problem['what']}", f"    likely cause: {problem['cause']}",
                      f"    fix: {problem['fix']}"]
    lines += [f"  note: {note}" for note in startup["notes"]]
    return lines


def format_report(report: dict[str, Any]) -> str:
    """`collect()`'s report as text for a terminal."""
    lines = [f"jax_triton_rocm {report['jax_triton_rocm']}",
             f"Python {report['python']} on {report['os']}",
             f"jax {report['jax']}, jaxlib {report['jaxlib']}"]
    plugins = report["jaxlib_gpu_plugins"]
    lines.append("jaxlib GPU plugins: " + (
        ", ".join(f"{name} {version}" for name, version in plugins.items()) or "none installed"))
    triton = report["triton"]
    if "error" in triton:
        lines.append(f"Triton: {triton['error']}")
    else:
        lines.append(f"Triton {triton['version']}, backends: {', '.join(triton['backends'])}")
        lines.append(f"Triton cache dir: {triton['cache_dir']!r}"
                     + (f" ({triton['cache_note']})" if triton["cache_note"] else ""))
    lines.append("Lowering rules registered for: "
                 + (", ".join(report["registered_platforms"]) or "none"))
    lines += _startup_lines(report["jax_startup"])
    lines.append("Devices:")
    for platform, entry in report["devices"].items():
        if entry["devices"]:
            described = ", ".join(f"{d['id']}: {d['kind']}" + (f" ({d['arch']})" if d["arch"]
                                                              else "")
                                  for d in entry["devices"])
            lines.append(f"  {platform}: {described}")
        else:
            lines.append(f"  {platform}: none ({entry['error']})")
    if report["no_gpu_reason"]:
        lines.append(f"  no GPU: {report['no_gpu_reason']}")
    for platform, entry in report["platforms"].items():
        lines.append(f"Lowering for {platform}:")
        lines.append(f"  jaxlib plugin: {entry['plugin'] or 'not installed'}"
                     f" (features: {entry['features_from']})")
        if entry["install_hint"]:
            lines.append(f"  to run on this GPU: {entry['install_hint']}")
        lines.append(f"  custom-call target: {entry['custom_call_target']}"
                     f" (autotuned calls: {entry['autotuned_call_name']})")
        lines.append(f"  binary delivery: {entry['binary_delivery']}")
        lines.append(f"  module_image read: {'yes' if entry['module_image_read'] else 'no'}")
        lines.append(f"  named architecture: {entry['named_arch'] or 'none'}")
    lines.extend(_info_routes.format_lines(report["routes"]))
    lines.append("Environment:")
    environment = report["environment"]
    for group in ("package", "triton", "jax"):
        for name, value in environment[group].items():
            problem = environment["invalid"].get(name)
            lines.append((f"  {name}={value!r}" if value is not None else f"  {name} unset")
                         + (f" (invalid: {problem})" if problem else ""))
    for name, value in environment["unknown_package_variables"].items():
        lines.append(f"  {name}={value!r} (not a variable of this package: a typo?)")
    return "\n".join(lines)


def canonical_arch(arch: str) -> tuple[str, str]:
    """(platform, canonical name) for a name given on the command line ("9.0" -> sm_90).

    Raises:
      ValueError: neither a CUDA nor an AMD architecture; says which forms are accepted.
    """
    platform = _vendors.arch_platform(arch)
    try:
        return platform, _vendors.normalize_arch(platform, arch, what="--arch")
    except ValueError as err:
        if platform == "rocm":
            raise
        raise ValueError(
            f"--arch {arch!r} is neither a CUDA architecture (sm_90, 9.0, 90) nor an AMD one "
            f"(gfx90a, gfx942, gfx950, gfx1100).") from err
