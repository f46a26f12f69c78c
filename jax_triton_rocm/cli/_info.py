"""What `python -m jax_triton_rocm info` reports: versions, plugins, devices, delivery, caches.
Every probe reports its own failure as text, so one broken piece never hides the rest.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import logging
import re
import sys
import threading
from collections.abc import Callable
from typing import Any

from jax_triton_rocm._version import __version__
from jax_triton_rocm.backends import _no_gpu, _vendors
from jax_triton_rocm.base import _compat, _env
from jax_triton_rocm.cli import _kernels, _startup
from jax_triton_rocm.routes import _arch

_PLUGIN_DISTRIBUTION = re.compile(r"jax[-_](cuda|rocm)\d+[-_](plugin|pjrt)")
KERNELS = ("add, constexpr length", "add, runtime length")
ROUTE_NAMES = {"xla": "XLA's Triton call", "jaxlib": "jaxlib's Triton call (typed FFI)",
               "jaxlib legacy": "jaxlib's legacy Triton call"}


def triton_report() -> dict[str, Any]:
    """Triton's version, backends, and where its compiles are cached."""
    try:
        info = _compat.triton_info()
    except ImportError as err:
        return {"error": str(err)}
    from jax_triton_rocm.compile import _folders

    knobs = info.module.knobs.cache
    note = (f"{_env.TRITON_CACHE_DIR}={_env.as_set(_env.TRITON_CACHE_DIR)!r} leaves Triton none; "
            f"the package's compiles use {knobs.get_triton_dir('cache')}"
            if _folders.needs_default_dir(knobs) else "")
    return {"version": info.version, "backends": list(info.backends), "cache_dir": knobs.dir,
            "cache_note": note}


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
            report[platform] = {"devices": [], "error": _startup.first_line(err)}
            continue
        report[platform] = {"devices": [
            {"id": d.id, "kind": d.device_kind,
             "arch": _or_told(lambda: _vendors.normalize_arch(platform, d.compute_capability),
                              (AttributeError, ValueError), None) if platform != "cpu" else None}
            for d in devices]}
    return report


def _or_told(read: Callable[[], Any], errors: tuple[type[Exception], ...],
             told: str | None = "unknown") -> Any:
    """`read()`; where it raises one of `errors`: "`told` (the error)", or None for no `told`."""
    try:
        return read()
    except errors as err:
        return told and f"{told} ({_startup.first_line(err)})"


def platform_report(platform: str) -> dict[str, Any]:
    """What a lowering for `platform` emits here: target, delivery, module_image, named arch."""
    features = _vendors.plugin_features(platform)
    assumed = features is None
    features = features or _vendors.assumed_features(platform)

    def named_arch() -> str | None:
        named = _arch.named_arch(platform)
        return f"{named.arch} (from {named.source})" if named else None

    def delivery() -> str:
        if platform == "rocm":
            from jax_triton_rocm.backends.hip import _hip

            return {"embedded": "embedded: HSACO in module_image", "path": "path: HSACO file, "
                    "its path in the ptx field"}[_hip.delivery_mode(features)]
        if not features.module_image:
            return "PTX, assembled by jaxlib's ptxas at load"
        name = _env.ENV_KEEP_PTX_TEXT
        try:
            ptx_text = f"{'with' if _env.keep_ptx_text() else 'without'} its PTX text ({name})"
        except ValueError:  # marked under "Environment"; the report goes on
            ptx_text = f"with its PTX text or not ({name} is invalid: see Environment)"
        return f"CUBIN in module_image, {ptx_text}; a digest of it in the ptx field"

    return {
        "plugin": features.plugin,
        "features_from": features.detected_from,
        "custom_call_target": _or_told(lambda: _compat.plain_call_name(
            _env.lowering_settings(()), exporting=False), (ValueError,)),
        "autotuned_call_name": _or_told(_compat.autotuned_call_name, (ValueError,)),
        "binary_delivery": _or_told(delivery, (ImportError, ValueError)),
        "module_image_read": features.module_image,
        "global_scratch": features.global_scratch,
        "named_arch": _or_told(named_arch, (ValueError, RuntimeError), "invalid"),
        "install_hint": _vendors.VENDORS[platform].install_hint if assumed else None,
    }


def collect(startup: _startup.Startup) -> dict[str, Any]:
    """The whole report, as plain JSON-able values, for JAX's start-up `startup`."""
    import jax

    from jax_triton_rocm.routes import _primitive

    devices = devices_report(startup)
    no_gpu = any(devices[p]["devices"] for p in _vendors.GPU_PLATFORMS) or startup.failure
    # The installed jaxlib GPU plugin distributions (plugin and PJRT), name -> version.
    found = {(dist.metadata["Name"] or "").lower(): dist.version
             for dist in importlib.metadata.distributions()}
    return {
        "jax_triton_rocm": __version__,
        "python": sys.version.split()[0],
        "os": sys.platform,
        "jax": jax.__version__,
        "jaxlib": _compat.jaxlib_version(),
        "jaxlib_gpu_plugins": dict(sorted((name.replace("_", "-"), version)
                                          for name, version in found.items()
                                          if _PLUGIN_DISTRIBUTION.fullmatch(name))),
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
        "routes": routes_report(devices),
        "environment": environment_report(),
    }


def environment_report() -> dict[str, dict[str, str | None]]:
    """The package's, Triton's and JAX's variables with their values (None: unset), unknown
    `JAX_TRITON_ROCM_*` ones (typos), and the message each invalid one raises."""
    try:
        invalid = _env.variable_errors()
    except Exception as err:  # noqa: BLE001  (a broken reader must not hide the report)
        invalid = {"(checking the variables)": _startup.first_line(err)}
    return {
        "package": _env.listed(_env.PACKAGE_ENV_VARS),
        "unknown_package_variables": _env.unknown_package_variables(),
        "triton": _env.listed(_env.TRITON_ENV_VARS),
        "jax": _env.listed(_env.JAX_ENV_VARS),
        "invalid": invalid,
    }


def _route_of(fn: Any, platform: str) -> tuple[str, str]:
    """The route, and why, that `fn(x, y)`'s lowering for `platform` logs."""
    import jax
    import jax.numpy as jnp

    logger, thread = logging.getLogger("jax_triton_rocm"), threading.get_ident()
    found, level = [], logger.level

    def keep(record: logging.LogRecord) -> bool:
        route = getattr(record, "jax_triton_rocm_route", None)
        if route is not None and record.thread == thread:
            found.append((route, getattr(record, "jax_triton_rocm_reason", "")))
        return True

    logger.addFilter(keep)
    logger.setLevel(logging.DEBUG)
    try:
        x = jax.ShapeDtypeStruct((4096,), jnp.float32)
        jax.jit(fn).trace(x, x).lower(lowering_platforms=(platform,))
    finally:
        logger.removeFilter(keep)
        logger.setLevel(level)
    return found[-1] if found else ("unknown", "no route was logged")


def routes_report(devices: dict[str, Any]) -> dict[str, Any]:
    """Per GPU platform: the routes two vector adds take here, also with `xla_native=True`, found
    by lowering them (no GPU needed) for the named arch, the first device's or an assumed one."""
    routes: dict[str, Any] = {}
    for platform in _vendors.GPU_PLATFORMS:
        entry: dict[str, Any] = {}
        try:
            from jax_triton_rocm.api._target_arch import target_arch
            from jax_triton_rocm.routes import _primitive

            named = _arch.named_arch(platform)
            found = [d["arch"] for d in devices.get(platform, {}).get("devices", [])
                     if d.get("arch")]
            arch, source = ((named.arch, f"named, from {named.source}") if named else
                            (found[0], "the device's") if found else
                            (_vendors.vendor(platform).example_arch, "assumed: no device here"))
            entry["arch"] = f"{arch} ({source})"
            calls = {name: (_kernels.add(sized), _kernels.add(sized, xla_native=True))
                     for name, sized in zip(KERNELS, (True, False))}
            kernels: dict[str, Any] = {}
            with target_arch(**{platform: arch}):
                for name, (plain, asking) in calls.items():
                    route, reason = _route_of(plain, platform)
                    try:  # what `xla_native=True` gives: XLA's call, or why it is refused
                        asked, _ = _route_of(asking, platform)
                        asked = ROUTE_NAMES.get(asked, asked)
                    except _primitive.XlaNativeRefused as err:
                        asked = f"refused: {err.reason}"
                    kernels[name] = {"route": route, "reason": reason, "xla_native": asked}
            entry["kernels"] = kernels
        except Exception as err:  # noqa: BLE001  (one broken piece never hides the report)
            entry["error"] = _startup.first_line(err)
        routes[platform] = entry
    return routes


def routes_lines(routes: dict[str, Any]) -> list[str]:
    """`routes_report()` as lines for the terminal."""
    lines = ["Routes of typical kernels (docs/routes.md: 'Which route a call takes'):"]
    for platform, entry in routes.items():
        if "error" in entry:
            lines.append(f"  {platform}: unknown ({entry['error']})")
            continue
        lines.append(f"  {platform}, lowered for {entry['arch']}:")
        for name, found in entry["kernels"].items():
            route = ROUTE_NAMES.get(found["route"], found["route"])
            lines.append(f"    {name}: {route}, as {found['reason']}; with xla_native=True: "
                         f"{found['xla_native']}")
    return lines


def format_report(report: dict[str, Any]) -> str:
    """`collect()`'s report as text for a terminal."""
    triton, startup, environment = report["triton"], report["jax_startup"], report["environment"]
    lines = [f"jax_triton_rocm {report['jax_triton_rocm']}",
             f"Python {report['python']} on {report['os']}",
             f"jax {report['jax']}, jaxlib {report['jaxlib']}",
             "jaxlib GPU plugins: " + (", ".join(f"{name} {version}" for name, version
                                                 in report["jaxlib_gpu_plugins"].items())
                                       or "none installed")]
    if "error" in triton:
        lines.append(f"Triton: {triton['error']}")
    else:
        lines += [f"Triton {triton['version']}, backends: {', '.join(triton['backends'])}",
                  f"Triton cache dir: {triton['cache_dir']!r}"
                  + (f" ({triton['cache_note']})" if triton["cache_note"] else "")]
    lines.append("Lowering rules registered for: "
                 + (", ".join(report["registered_platforms"]) or "none"))
    if startup["failure"] or startup["problems"] or startup["notes"]:
        lines.append("JAX start-up:")
        for label, problems in (("failed", [startup["failure"]] if startup["failure"] else []),
                                ("problem", startup["problems"])):
            texts = (_no_gpu.Problem(**p).text().replace("\n", "\n  ") for p in problems)
            lines += [f"  {label}: {text}" for text in texts]
        lines += [f"  note: {note}" for note in startup["notes"]]
    lines.append("Devices:")
    for platform, entry in report["devices"].items():
        described = ", ".join(f"{d['id']}: {d['kind']}" + (f" ({d['arch']})" if d["arch"] else "")
                              for d in entry["devices"])
        lines.append(f"  {platform}: " + (described or f"none ({entry['error']})"))
    if report["no_gpu_reason"]:
        lines.append(f"  no GPU: {report['no_gpu_reason']}")
    for platform, entry in report["platforms"].items():
        lines += [f"Lowering for {platform}:",
                  f"  jaxlib plugin: {entry['plugin'] or 'not installed'}"
                  f" (features: {entry['features_from']})",
                  *([f"  to run on this GPU: {entry['install_hint']}"] if entry["install_hint"]
                    else []),
                  f"  custom-call target: {entry['custom_call_target']}"
                  f" (autotuned calls: {entry['autotuned_call_name']})",
                  f"  binary delivery: {entry['binary_delivery']}",
                  f"  module_image read: {'yes' if entry['module_image_read'] else 'no'}",
                  f"  named architecture: {entry['named_arch'] or 'none'}"]
    lines += routes_lines(report["routes"])
    lines.append("Environment:")
    for group in ("package", "triton", "jax"):
        for name, value in environment[group].items():
            problem = environment["invalid"].get(name)
            lines.append((f"  {name}={value!r}" if value is not None else f"  {name} unset")
                         + (f" (invalid: {problem})" if problem else ""))
    for name, value in environment["unknown_package_variables"].items():
        lines.append(f"  {name}={value!r} (not a variable of this package: a typo?)")
    return "\n".join(lines)
