"""The one reader of the environment: every variable the package reads, each with its reader
(a ValueError names the variable, its value and what is allowed), which reads at each call; its
caller decides when. docs/environment.md documents them.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import os
from collections.abc import Callable, Iterable
from typing import Any

from jax_triton_rocm.base import _values

logger = logging.getLogger("jax_triton_rocm")

# The package's environment variables, as docs/environment.md's table documents them.
ENV_PREFIX = "JAX_TRITON_ROCM_"
ENV_TARGET_ARCH = "JAX_TRITON_ROCM_TARGET_ARCH"
ENV_HSACO_DELIVERY = "JAX_TRITON_ROCM_HSACO_DELIVERY"
ENV_PREWARM = "JAX_TRITON_ROCM_PREWARM"
ENV_AUTOTUNE_TARGET = "JAX_TRITON_ROCM_AUTOTUNE_TARGET"
ENV_AUTOTUNE_DIR = "JAX_TRITON_ROCM_AUTOTUNE_DIR"
ENV_COMPILE_THREADS = "JAX_TRITON_ROCM_COMPILE_THREADS"
ENV_EARLY_COMPILE = "JAX_TRITON_ROCM_EARLY_COMPILE"
ENV_XLA_NATIVE = "JAX_TRITON_ROCM_XLA_NATIVE"
ENV_KERNEL_CACHE_SIZE = "JAX_TRITON_ROCM_KERNEL_CACHE_SIZE"
ENV_CALL_CACHE_SIZE = "JAX_TRITON_ROCM_CALL_CACHE_SIZE"
ENV_REMEMBER_TRITON_KEY = "JAX_TRITON_ROCM_REMEMBER_TRITON_KEY"
ENV_KEEP_PTX_TEXT = "JAX_TRITON_ROCM_KEEP_PTX_TEXT"
ENV_CALL_TARGET = "JAX_TRITON_ROCM_CALL_TARGET"
PACKAGE_ENV_VARS = (ENV_TARGET_ARCH, ENV_HSACO_DELIVERY, ENV_PREWARM, ENV_AUTOTUNE_TARGET,
                    ENV_AUTOTUNE_DIR, ENV_COMPILE_THREADS, ENV_EARLY_COMPILE, ENV_XLA_NATIVE,
                    ENV_KERNEL_CACHE_SIZE, ENV_CALL_CACHE_SIZE, ENV_REMEMBER_TRITON_KEY,
                    ENV_KEEP_PTX_TEXT, ENV_CALL_TARGET)

# Triton's and the system's variables the package reads: where Triton's folders are, for the
# package's compiles and its warnings about them.
TRITON_CACHE_DIR = "TRITON_CACHE_DIR"
TRITON_DUMP_DIR = "TRITON_DUMP_DIR"
TRITON_HOME = "TRITON_HOME"
HOME = "HOME"
# Triton's variables that change what the package's compiles do or where they go, and the one
# Triton 3.9 warns about where a compile does not say whether to fuse (the package's compiles say);
# JAX's, which decide which backends start. `info` lists them.
TRITON_ENV_VARS = (TRITON_CACHE_DIR, TRITON_HOME, "TRITON_KERNEL_DUMP", TRITON_DUMP_DIR,
                   "TRITON_DEFAULT_FP_FUSION")
# XLA's flags, read for whether XLA records custom calls (`base._compat.plain_call_name`).
XLA_FLAGS = "XLA_FLAGS"
JAX_ENV_VARS = ("JAX_PLATFORMS", XLA_FLAGS)

DEFAULT_CACHE_SIZE = 1024

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
# More digits than any count the package takes needs; Python refuses to convert 4301 and more.
_MAX_DIGITS = 18
_SHOWN_CHARS = 40


def _shown(raw: str) -> str:
    """`raw` as a message quotes it, a long value cut short with its length."""
    if len(raw) <= _SHOWN_CHARS:
        return repr(raw)
    return f"{raw[:_SHOWN_CHARS]!r}... ({len(raw)} characters)"


def _flag(name: str, default: bool | None) -> bool | None:
    """The boolean variable `name` (unset or empty: `default`; None leaves the choice to the
    caller); a ValueError for a value not among 1/true/yes/on and 0/false/no/off (any case)."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in _TRUE + _FALSE:
        return raw.lower() in _TRUE
    shown = "" if default is None else f" ({int(default)})"
    raise ValueError(f"{name}={_shown(raw)} is not a flag; use 1 (or true/yes/on) or 0 (or "
                     f"false/no/off), or unset it for the default{shown}.")


def _choice(name: str, choices: tuple[str, ...], *, what: str, unset: str) -> str | None:
    """The variable `name`, lower-cased, one of `choices` (None: unset or empty); else a
    ValueError saying `what` a value is ("a delivery mode") and what `unset` gives."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return None
    if raw not in choices:
        raise ValueError(f"{name}={_shown(raw)} is not {what}; use one of {', '.join(choices)} (or "
                         f"unset it for {unset}).")
    return raw


def _count(name: str, default: int, *, minimum: int, meaning: str = "",
           default_text: str | None = None) -> int:
    """The integer variable `name` (unset or empty: `default`), at least `minimum`; a ValueError
    for anything but ASCII digits ("²" is a digit to `str.isdigit`) or over `_MAX_DIGITS`."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or len(raw) > _MAX_DIGITS or int(raw) < minimum:
        kind = "positive" if minimum > 0 else "non-negative"
        shown = default if default_text is None else default_text
        raise ValueError(f"{name}={_shown(raw)} must be a {kind} integer of at most "
                         f"{_MAX_DIGITS} digits{meaning}; unset it for the default ({shown}).")
    return int(raw)


# `JAX_TRITON_ROCM_TARGET_ARCH` as set (None: unset), parsed by `routes._arch`.
target_arch = functools.partial(os.environ.get, ENV_TARGET_ARCH)
# The HSACO delivery `JAX_TRITON_ROCM_HSACO_DELIVERY` forces, or None.
hsaco_delivery = functools.partial(_choice, ENV_HSACO_DELIVERY, ("embedded", "path"),
                                   what="a delivery mode", unset="the best supported")
# Whether ROCm kernels are prewarmed (`JAX_TRITON_ROCM_PREWARM`; unset: yes).
prewarm = functools.partial(_flag, ENV_PREWARM, True)
# The target `JAX_TRITON_ROCM_AUTOTUNE_TARGET` forces on autotuned calls, or None.
autotune_target = functools.partial(_choice, ENV_AUTOTUNE_TARGET, ("ffi", "legacy"),
                                    what="a target for autotuned calls",
                                    unset="the default, legacy")


# The target `JAX_TRITON_ROCM_CALL_TARGET` sets for plain calls, or None (unset: auto).
call_target = functools.partial(_choice, ENV_CALL_TARGET, ("auto", "ffi", "legacy"),
                                what="a target for plain calls",
                                unset="auto, chosen from XLA_FLAGS")


autotune_dir = functools.partial(os.environ.get, ENV_AUTOTUNE_DIR)


def compile_threads() -> int:
    """The most threads compiling kernels at once (0: one; unset: the CPUs this process may use)."""
    return _count(ENV_COMPILE_THREADS, _values.cpu_count(), minimum=0,
                  default_text=f"one thread per kernel, at most {_values.cpu_count()}")


early_compile = functools.partial(_flag, ENV_EARLY_COMPILE, True)
xla_native = functools.partial(_flag, ENV_XLA_NATIVE, None)
remember_triton_key = functools.partial(_flag, ENV_REMEMBER_TRITON_KEY, True)
keep_ptx_text = functools.partial(_flag, ENV_KEEP_PTX_TEXT, False)


def cache_size(name: str) -> int:
    """The bound the cache-size variable `name` sets (read at each use; unset: 1024)."""
    return _count(name, DEFAULT_CACHE_SIZE, minimum=1,
                  meaning=" (how many entries the cache keeps)")


# Variable `name` as set (None: unset), for a message or a memo key; its reader decides.
as_set = os.environ.get


@dataclasses.dataclass(frozen=True)
class LoweringSettings:
    """What a lowering reads from the environment, once, at its top (`variables`: its vendor's)."""

    xla_native: bool | None
    variables: tuple[str | None, ...]
    call_target: str | None
    xla_flags: str
    keep_ptx_text: bool


def lowering_settings(variables: tuple[str, ...], asked: bool | None = False) -> LoweringSettings:
    return LoweringSettings(xla_native() if asked is None else asked,
                            tuple([os.environ.get(name) for name in variables]), call_target(),
                            os.environ.get(XLA_FLAGS, ""),
                            ENV_KEEP_PTX_TEXT in variables and bool(keep_ptx_text()))


def listed(names: Iterable[str]) -> dict[str, str | None]:
    """`names` with their values as set (None: unset), for `info`."""
    return {name: os.environ.get(name) for name in names}


def unknown_package_variables() -> dict[str, str]:
    """The unknown `JAX_TRITON_ROCM_*` variables set (typos) and their values, but tests' TEST_*."""
    unknown = sorted([name for name in os.environ
                      if name.startswith(ENV_PREFIX) and name not in PACKAGE_ENV_VARS
                      and not name[len(ENV_PREFIX):].startswith("TEST_")])
    return {name: os.environ[name] for name in unknown}


# Each variable's reader: `check_variables` runs them all where the package starts, so that a
# mistake is told on every machine, not only where its feature is used (prewarm on ROCm).
VARIABLE_READERS: dict[str, Callable[[], Any]] = {
    ENV_HSACO_DELIVERY: hsaco_delivery,
    ENV_PREWARM: prewarm,
    ENV_AUTOTUNE_TARGET: autotune_target,
    ENV_CALL_TARGET: call_target,
    ENV_COMPILE_THREADS: compile_threads,
    ENV_EARLY_COMPILE: early_compile,
    ENV_XLA_NATIVE: xla_native,
    ENV_KERNEL_CACHE_SIZE: functools.partial(cache_size, ENV_KERNEL_CACHE_SIZE),
    ENV_CALL_CACHE_SIZE: functools.partial(cache_size, ENV_CALL_CACHE_SIZE),
    ENV_REMEMBER_TRITON_KEY: remember_triton_key,
    ENV_KEEP_PTX_TEXT: keep_ptx_text,
}
# The variables' values when `check_variables` last found them all valid.
_CHECKED_VALUES: list[tuple[str | None, ...]] = []
# Whether `check_variables` has looked for unknown package variables: once per process.
_UNKNOWN_LOOKED_FOR: list[bool] = []


def variable_errors() -> dict[str, str]:
    """For each package variable whose value its reader refuses, the message it raises."""
    errors = {}
    for name, read in VARIABLE_READERS.items():
        if not os.environ.get(name, "").strip():
            continue  # unset or blank: each reader gives its default, never an error
        try:
            read()
        except ValueError as err:
            errors[name] = str(err)
    return errors


def check_variables() -> None:
    """Raises the first refused value's ValueError (cheap while the values are as last
    checked); the first time, warns of each `JAX_TRITON_ROCM_*` variable it does not know."""
    if not _UNKNOWN_LOOKED_FOR:
        _UNKNOWN_LOOKED_FOR.append(True)
        if unknown := unknown_package_variables():
            known = {name[len(ENV_PREFIX):]: name for name in PACKAGE_ENV_VARS}
            named = [f"{name} (the closest known name: "
                     f"{known[difflib.get_close_matches(name[len(ENV_PREFIX):], known, 1, 0)[0]]})"
                     for name in unknown]
            logger.warning("jax_triton_rocm: ignoring %s: the package reads no variable of that "
                           "name (docs/environment.md lists those it reads). This warning is "
                           "logged once per process.", ", ".join(named))
    values = tuple([os.environ.get(name) for name in PACKAGE_ENV_VARS])
    if values in _CHECKED_VALUES:
        return
    # None set (or all blank): every reader gives its default, never an error.
    if any([os.environ.get(name, "").strip() for name in VARIABLE_READERS]):
        for message in variable_errors().values():
            raise ValueError(message)
    _CHECKED_VALUES[:] = [values]
