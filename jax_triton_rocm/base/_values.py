"""Checks of user-given values: environment variables, compile options, launch results.

Each check raises where the value is read, with an error that names the argument (or variable),
shows the value and says what is allowed, so a mistake never reaches Triton or jaxlib, where it
would fail far from its cause or pass silently.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

# The package's environment variables, as docs/environment.md's table documents them: each
# reader takes its name from here, and `info` shows them all.
ENV_TARGET_ARCH = "JAX_TRITON_ROCM_TARGET_ARCH"
ENV_HSACO_DELIVERY = "JAX_TRITON_ROCM_HSACO_DELIVERY"
ENV_PREWARM = "JAX_TRITON_ROCM_PREWARM"
ENV_AUTOTUNE_TARGET = "JAX_TRITON_ROCM_AUTOTUNE_TARGET"
ENV_AUTOTUNE_DIR = "JAX_TRITON_ROCM_AUTOTUNE_DIR"
ENV_COMPILE_THREADS = "JAX_TRITON_ROCM_COMPILE_THREADS"
ENV_XLA_NATIVE = "JAX_TRITON_ROCM_XLA_NATIVE"
ENV_KERNEL_CACHE_SIZE = "JAX_TRITON_ROCM_KERNEL_CACHE_SIZE"
ENV_CALL_CACHE_SIZE = "JAX_TRITON_ROCM_CALL_CACHE_SIZE"
ENV_REMEMBER_TRITON_KEY = "JAX_TRITON_ROCM_REMEMBER_TRITON_KEY"
PACKAGE_ENV_VARS = (ENV_TARGET_ARCH, ENV_HSACO_DELIVERY, ENV_PREWARM, ENV_AUTOTUNE_TARGET,
                    ENV_AUTOTUNE_DIR, ENV_COMPILE_THREADS, ENV_XLA_NATIVE, ENV_KERNEL_CACHE_SIZE,
                    ENV_CALL_CACHE_SIZE, ENV_REMEMBER_TRITON_KEY)

# The values of the variables that choose among words (`env_choice`).
HSACO_DELIVERY_MODES = ("embedded", "path")
AUTOTUNE_TARGET_CHOICES = ("ffi", "legacy")
DEFAULT_CACHE_SIZE = 1024

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def env_flag(name: str, default: bool | None) -> bool | None:
    """The boolean environment variable `name` (unset or empty: `default`; None leaves the
    choice to the caller, as "unset").

    Raises:
      ValueError: a value that is not one of 1/true/yes/on or 0/false/no/off (any case).
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    shown = "" if default is None else f" ({int(default)})"
    raise ValueError(f"{name}={raw!r} is not a flag; use 1 (or true/yes/on) or 0 (or "
                     f"false/no/off), or unset it for the default{shown}.")


def launch_settings(num_warps: Any, num_stages: Any, num_ctas: Any, *, caller: str = "",
                    where: str = "") -> None:
    """Raises ValueError unless each launch setting a call, an autotune config or a heuristic
    may give is None (the target's Triton default) or a positive int, `num_warps` a power of
    two; the message starts with `caller` (e.g. "triton_call_lowering: ") and says `where` the
    value came from (e.g. "in autotune config (...)")."""
    at = f" {where}" if where else ""
    for what, value in (("num_warps", num_warps), ("num_stages", num_stages),
                        ("num_ctas", num_ctas)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{caller}{what}={value!r}{at} must be a positive int or None (the "
                             f"target's Triton default).")
        if what == "num_warps" and value & (value - 1):
            raise ValueError(f"{caller}{what}={value!r}{at} must be a power of two (1, 2, 4, 8, "
                             f"...), as Triton requires.")


def exact_key(value: Any) -> Any:
    """`value` as a memo key equal only to the key of the same value of the same type, written
    alike: 2, 2.0, True and np.int32(2) differ, as do 0.0 and -0.0 (Python's `==` makes each
    group one key, and each compiles or passes differently). Sequences go item by item.
    """
    kind = type(value)
    if kind in (int, str, bytes, type(None)):  # the common cases, at the cost of a tuple
        return kind, value
    if isinstance(value, (tuple, list)):
        return kind, tuple(exact_key(item) for item in value)
    if kind.__name__ == "constexpr":  # Triton's wrapper compares by its value
        return kind, exact_key(getattr(value, "value", None))
    if isinstance(value, float):  # its bits: the sign of zero and a NaN's payload count
        return kind, struct.pack("<d", value)
    if isinstance(value, (np.floating, np.complexfloating)):
        return kind, value.tobytes()
    if isinstance(value, complex):
        return kind, struct.pack("<dd", value.real, value.imag)
    if hasattr(value, "cache_key") and hasattr(value, "src"):
        # A Triton function by identity: its own hash parses its source (slow, and not safe
        # across threads on 3.11); keys that outlive it hold its call graph's digest too.
        return kind, id(value)
    return kind, value


def replaced(instance: Any, **fields: Any) -> Any:
    """A copy of the frozen dataclass `instance` with `fields` replaced: `dataclasses.replace`
    without running `__init__` or `__post_init__` (a caller that has one recomputes what it
    derives), in a fifth of the time, for copies made at every trace."""
    copy = object.__new__(type(instance))
    copy.__dict__.update(instance.__dict__)
    copy.__dict__.update(fields)
    return copy


def is_int(value: Any) -> bool:
    """A Python or NumPy integer, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def flag(value: Any, what: str) -> bool:
    """`value` as a bool, for an argument that must be one (`debug`, `enable_fp_fusion`).

    Raises:
      TypeError: anything but a Python or NumPy bool (a string such as "no" is truthy).
    """
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{what}={value!r} must be a bool (True or False), got "
                    f"{type(value).__name__}.")


# Compile options of the vendor backends, with what Triton's backends accept
# (`triton/backends/amd/compiler.py` HIPOptions, `triton/backends/nvidia/compiler.py`
# CUDAOptions): (allowed values, or an inclusive int range, and what they mean).
_OPTION_VALUES: dict[str, tuple[tuple[int, ...] | range, str]] = {
    # amdgpu-waves-per-eu: 0 gives no hint; otherwise waves per SIMD, at most 20 on any AMD GPU.
    "waves_per_eu": (range(0, 21), "an int from 0 (no hint) to 20"),
    # The MFMA/WMMA shape Triton's AMD backend may force (0 lets it choose).
    "matrix_instr_nonkdim": ((0, 4, 16, 32), "one of 0 (chosen by Triton), 4, 16, 32"),
    # K elements packed per MFMA operand load.
    "kpack": ((1, 2), "one of 1, 2"),
    # PTX .maxnreg: registers per thread, at most 255 on every NVIDIA GPU.
    "maxnreg": (range(1, 256), "an int from 1 to 255 (registers per thread), or None"),
}


def compile_option(name: str, value: Any, *, where: str = "", caller: str = "") -> Any:
    """Checks one vendor compile option (`waves_per_eu`, `matrix_instr_nonkdim`, `kpack`,
    `maxnreg`) against what Triton's backend accepts; returns it as a plain int (or None).

    Args:
      where: where the value came from, for the message (e.g. "in autotune config (...)").
      caller: what the message starts with (e.g. "triton_call_lowering: ").

    Raises:
      TypeError: not an int. ValueError: out of range. Both name the option and its value.
    """
    allowed, text = _OPTION_VALUES[name]
    at = f" {where}" if where else ""
    if value is None:
        return None
    if not is_int(value):
        raise TypeError(f"{caller}{name}={value!r}{at} must be {text}; got "
                        f"{type(value).__name__}.")
    if int(value) not in allowed:
        raise ValueError(f"{caller}{name}={value!r}{at} must be {text}, as Triton's backend "
                         f"accepts.")
    return int(value)


def compile_options(options: Mapping[str, Any], *, where: str = "",
                    caller: str = "") -> dict[str, Any]:
    """`compile_option` for each of `options`; returns them checked."""
    return {name: compile_option(name, value, where=where, caller=caller)
            for name, value in options.items()}


def output_indices(indices: Any, n_outs: int, *, what: str,
                   an_output: str = "an output") -> tuple[int, ...]:
    """Output indices (`zeroed_outputs`, or what a callable `zeroed_outputs` returned), sorted.

    Args:
      what: the argument as the message names it ("zeroed_outputs").
      an_output: what an output is called where the user is ("a result" of a primitive).

    Raises:
      TypeError: not a sequence of ints. ValueError: an index that is not an output's.
    """
    if isinstance(indices, (str, bytes)) or not isinstance(indices, (Sequence, set, frozenset)):
        raise TypeError(f"{what}={indices!r} must be a sequence of {an_output.split()[-1]} "
                        f"indices (e.g. (0,)), or a callable of the metaparameters returning one.")
    for idx in indices:
        if not is_int(idx) or not 0 <= idx < n_outs:
            raise ValueError(f"{what}={indices!r}: {idx!r} is not {an_output} index "
                             f"(0..{n_outs - 1}).")
    return tuple(sorted({int(i) for i in indices}))


def env_choice(name: str, choices: tuple[str, ...], *, what: str, unset: str) -> str | None:
    """The variable `name`, lower-cased, one of `choices`; None when unset or empty.

    Args:
      what: what a value is, for the message ("a delivery mode").
      unset: what leaving it unset gives, for the message ("the best supported").

    Raises:
      ValueError: any other value, naming the variable, the value and the choices.
    """
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return None
    if raw not in choices:
        raise ValueError(f"{name}={raw!r} is not {what}; use one of {', '.join(choices)} (or "
                         f"unset it for {unset}).")
    return raw


def env_count(name: str, default: int, *, minimum: int, meaning: str = "",
              default_text: str | None = None) -> int:
    """The integer variable `name` (unset or empty: `default`).

    Args:
      minimum: 1 for a positive integer, 0 for a non-negative one.
      meaning: what the number counts, for the message (" (how many entries the cache keeps)").
      default_text: the default as the message shows it (`default` if None).

    Raises:
      ValueError: anything but ASCII digits ("²" is a digit to `str.isdigit`), or a number
        below `minimum`; names the variable and its value.
    """
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit()) or int(raw) < minimum:
        kind = "positive" if minimum > 0 else "non-negative"
        shown = default if default_text is None else default_text
        raise ValueError(f"{name}={raw!r} must be a {kind} integer{meaning}; unset it for the "
                         f"default ({shown}).")
    return int(raw)


def cache_size(name: str) -> int:
    """The bound the cache-size variable `name` sets (read at each use; unset: 1024)."""
    return env_count(name, DEFAULT_CACHE_SIZE, minimum=1,
                     meaning=" (how many entries the cache keeps)")


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def compile_threads() -> int:
    """The most threads that compile kernels at once (`JAX_TRITON_ROCM_COMPILE_THREADS`; 0
    means one; unset: the CPUs this process may run on)."""
    return env_count(ENV_COMPILE_THREADS, cpu_count(), minimum=0,
                     default_text=f"one thread per kernel, at most {cpu_count()}")


def hsaco_delivery() -> str | None:
    """The HSACO delivery `JAX_TRITON_ROCM_HSACO_DELIVERY` forces, or None."""
    return env_choice(ENV_HSACO_DELIVERY, HSACO_DELIVERY_MODES, what="a delivery mode",
                      unset="the best supported")


def autotune_target() -> str | None:
    """The target `JAX_TRITON_ROCM_AUTOTUNE_TARGET` forces on autotuned calls, or None."""
    return env_choice(ENV_AUTOTUNE_TARGET, AUTOTUNE_TARGET_CHOICES,
                      what="a target for autotuned calls", unset="the default, legacy")


# Each variable's reader, as the package reads it (a reader raises ValueError for a value it
# refuses): `check_variables` runs them all where the package starts, so that a mistake is told
# on every machine, not only where the variable's feature is used (prewarm on ROCm, the kernel
# cache on a GPU). A reader that lives in a higher layer adds itself (`routes._arch`).
VARIABLE_READERS: dict[str, Callable[[], Any]] = {
    ENV_HSACO_DELIVERY: hsaco_delivery,
    ENV_PREWARM: lambda: env_flag(ENV_PREWARM, default=True),
    ENV_AUTOTUNE_TARGET: autotune_target,
    ENV_COMPILE_THREADS: compile_threads,
    ENV_XLA_NATIVE: lambda: env_flag(ENV_XLA_NATIVE, default=None),
    ENV_KERNEL_CACHE_SIZE: lambda: cache_size(ENV_KERNEL_CACHE_SIZE),
    ENV_CALL_CACHE_SIZE: lambda: cache_size(ENV_CALL_CACHE_SIZE),
    ENV_REMEMBER_TRITON_KEY: lambda: env_flag(ENV_REMEMBER_TRITON_KEY, default=True),
}
# The variables' values when `check_variables` last found them all valid.
_CHECKED_VALUES: list[tuple[str | None, ...]] = []


def variable_errors() -> dict[str, str]:
    """For each package variable whose value its reader refuses, the message it raises."""
    errors = {}
    for name, read in VARIABLE_READERS.items():
        try:
            read()
        except ValueError as err:
            errors[name] = str(err)
    return errors


def check_variables() -> None:
    """Checks every package variable that is set, as its reader will (cheap while they are as
    last checked).

    Raises:
      ValueError: the first refused value's message, naming the variable, its value and what
        is allowed.
    """
    values = tuple(os.environ.get(name) for name in PACKAGE_ENV_VARS)
    if values in _CHECKED_VALUES:
        return
    for message in variable_errors().values():
        raise ValueError(message)
    _CHECKED_VALUES[:] = [values]
