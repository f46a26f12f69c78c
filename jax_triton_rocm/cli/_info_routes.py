"""What `python -m jax_triton_rocm info` says about routes: per GPU platform, which route two
typical kernels take here and why (`routes._primitive`), and whether XLA's Triton call would
take them on request (`xla_native=True`), found by lowering them.

The kernels are vector adds: one with pointer and constexpr parameters only (its length compiled
in), one whose length is a runtime scalar. Each is lowered for the architecture named for the
platform, else that of its first device here, else an assumed one (the vendor's example), so
the answer needs no GPU. The route reflects this process's JAX_TRITON_ROCM_XLA_NATIVE.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.cli import _kernels, _startup

KERNELS = ("add, constexpr length", "add, runtime length")
ROUTE_NAMES = {"xla": "XLA's Triton call", "jaxlib": "jaxlib's Triton call (typed FFI)",
               "jaxlib legacy": "jaxlib's legacy Triton call"}


def _arch(platform: str, devices: list[dict]) -> tuple[str, str]:
    """The architecture to lower for, and where it comes from."""
    from jax_triton_rocm.routes import _arch

    named = _arch.named_arch(platform)
    if named is not None:
        return named.arch, f"named, from {named.source}"
    for device in devices:
        if device.get("arch"):
            return device["arch"], "the device's"
    return _vendors.vendor(platform).example_arch, "assumed: no device here"


def _route_of(fn: Any, platform: str) -> tuple[str, str]:
    """The route `fn(x, y)`'s lowering for `platform` logs (`routes._primitive.log_route`), and
    why."""
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


def _on_request(fn: Any, platform: str) -> str:
    """What `xla_native=True` gives `fn`: XLA's call, or why it is refused."""
    from jax_triton_rocm.routes import _primitive

    try:
        route, _ = _route_of(fn, platform)
    except _primitive.XlaNativeRefused as err:
        return f"refused: {err.reason}"
    return ROUTE_NAMES.get(route, route)


def report(devices: dict[str, Any]) -> dict[str, Any]:
    """Per GPU platform: the architecture lowered for, and each typical kernel's route and why,
    and what asking for XLA's call (`xla_native=True`) gives it.

    `devices` is `_info.devices_report()`; a lowering that fails is reported, not raised.
    """
    routes: dict[str, Any] = {}
    for platform in _vendors.GPU_PLATFORMS:
        entry: dict[str, Any] = {}
        try:
            import jax_triton_rocm as jtr

            arch, source = _arch(platform, devices.get(platform, {}).get("devices", []))
            entry["arch"] = f"{arch} ({source})"
            calls = {name: (_kernels.add(kernel), _kernels.add(kernel, xla_native=True))
                     for name, kernel in zip(KERNELS, ("sized_add", "add"))}
            with jtr.target_arch(**{platform: arch}):
                entry["kernels"] = {
                    name: {**dict(zip(("route", "reason"), _route_of(plain, platform))),
                           "xla_native": _on_request(asking, platform)}
                    for name, (plain, asking) in calls.items()}
        except Exception as err:  # noqa: BLE001  (one broken piece never hides the report)
            entry["error"] = _startup.first_line(err)
        routes[platform] = entry
    return routes


def format_lines(routes: dict[str, Any]) -> list[str]:
    """`report()` as lines for the terminal."""
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
