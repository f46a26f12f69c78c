"""`triton_call`'s options as jax-triton 0.3 and 0.4 write them, turned into one form: which
convention the call follows (`out_shape=` or `out_type=`), `backend_options` merged with the
explicit launch settings, and `cost_estimate`. Each rule is in docs/porting.md; a value given both ways is an error that names both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from jax_triton_rocm import backends
from jax_triton_rocm.base import _values, _vendors

# The explicit arguments `backend_options` may give instead, with their defaults.
SETTINGS = {"num_warps": None, "num_stages": None, "num_ctas": 1, "debug": False,
            "enable_fp_fusion": True}
# Triton options the package sets itself per target, or that jaxlib cannot launch with.
_REFUSED = {
    "arch": "the target's architecture comes from the device or target_arch",
    "backend_name": "the backend comes from the platform lowered for",
    "warp_size": "the warp size comes from the target",
    "ir_override": "kernels are compiled from their source",
    "launch_cooperative_grid": "jaxlib launches no cooperative grids",
    "launch_pdl": "jaxlib launches no programmatic dependent launches",
    "instrumentation_mode": "jaxlib allocates no profiling buffer",
}
COST_KEYS = ("flops", "transcendentals", "bytes_accessed")


class _NotGiven:
    """The default of `triton_call`'s `out_type` and `out_shape`: not given (None is a value,
    and gives no output)."""

    def __repr__(self) -> str:
        return "<not given>"


NOT_GIVEN = _NotGiven()


@dataclasses.dataclass(frozen=True)
class Options:
    """The call's options in one form.

    Attributes:
      settings: num_warps, num_stages, num_ctas, debug, enable_fp_fusion (defaults applied).
      compile_options: vendor knobs (`waves_per_eu`, `maxnreg`, ...) from `backend_options`.
      backend_options: other Triton options, sorted (each backend takes its own).
    """

    settings: dict[str, Any]
    compile_options: dict[str, Any]
    backend_options: tuple[tuple[str, Any], ...]


def convention(out_shape: Any, out_type: Any) -> tuple[str, Any]:
    """("out_shape", value) for jax-triton 0.3's convention, ("out_type", value) for 0.4's.

    Raises:
      TypeError: both or neither given.
    """
    if out_shape is not NOT_GIVEN and out_type is not NOT_GIVEN:
        raise TypeError("triton_call got both out_type= (jax-triton 0.4) and out_shape= (0.3); "
                        "give one: they mean the same outputs, but pick the convention for "
                        "keyword operands and input_output_aliases (docs/porting.md).")
    if out_shape is NOT_GIVEN and out_type is NOT_GIVEN:
        raise TypeError("triton_call needs the outputs' shapes and dtypes: out_type= (jax-triton "
                        "0.4) or out_shape= (0.3), e.g. out_type=jax.ShapeDtypeStruct(x.shape, "
                        "x.dtype), or out_type=() for a kernel that only updates Refs.")
    return ("out_shape", out_shape) if out_type is NOT_GIVEN else ("out_type", out_type)


def _hashable(key: str, value: Any) -> None:
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"backend_options[{key!r}] must be hashable, got {value!r} (JAX caches "
                        f"compiled calls by their options): pass a tuple instead of a list, or "
                        f"a tuple of (key, value) pairs instead of a dict.") from None


def _triton_option_names() -> dict[str, frozenset[str]]:
    """Each installed vendor's Triton option fields, by platform."""
    names = {}
    for platform in _vendors.GPU_PLATFORMS:
        try:
            names[platform] = backends.backend(platform).triton_option_names()
        except ImportError:  # a Triton built without that vendor's backend
            continue
    return names


def _other_option(key: str, known: dict[str, frozenset[str]]) -> None:
    """Raises unless `key` is a Triton option of some vendor that the package passes on."""
    if key in _REFUSED:
        raise ValueError(f"backend_options[{key!r}] cannot be set here: {_REFUSED[key]}.")
    if not any(key in names for names in known.values()):
        every = sorted(set().union(*known.values()) - set(_REFUSED)) if known else []
        raise ValueError(
            f"backend_options[{key!r}] is no Triton compile option of any installed vendor "
            f"backend ({', '.join(known) or 'none'}); options are: {', '.join(every)}.")


def merged(explicit: Mapping[str, Any], backend_options: Any,
           keyword_options: Mapping[str, Any]) -> Options:
    """`backend_options` merged with the explicit settings and the vendor knobs given as
    keywords (`waves_per_eu=2`); the defaults applied where neither gives a value.

    Raises:
      TypeError: `backend_options` is not a mapping of str, or a value is unhashable.
      ValueError: an option given both ways (naming both), or one no vendor knows.
    """
    given = {} if backend_options is None else backend_options
    if not isinstance(given, Mapping) or not all(isinstance(k, str) for k in given):
        raise TypeError(f"backend_options={backend_options!r} must be a dict of Triton option "
                        f"names to values, e.g. {{'num_warps': 8}}.")
    settings = {k: v for k, v in explicit.items() if v is not None}
    compile_options = dict(keyword_options)
    others, known = {}, None
    for key, value in given.items():
        _hashable(key, value)
        if key in settings or key in compile_options:
            raise ValueError(
                f"{key} is given both as an argument of triton_call ({key}="
                f"{settings.get(key, compile_options.get(key))!r}) and in backend_options "
                f"({value!r}); give it once.")
        if key in SETTINGS:
            settings[key] = value
        elif key in _vendors.COMPILE_OPTIONS:
            compile_options[key] = value
        else:
            known = _triton_option_names() if known is None else known
            _other_option(key, known)
            others[key] = value
    for key, default in SETTINGS.items():
        settings.setdefault(key, default)
    return Options(settings, compile_options, tuple(sorted(others.items())))


def cost_estimate(value: Any) -> tuple[tuple[str, int], ...] | None:
    """`cost_estimate` as sorted (key, int) pairs, or None.

    Raises:
      TypeError / ValueError: not a mapping of the known keys to non-negative ints.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"cost_estimate={value!r} must be a dict such as "
                        f"{{'flops': 2 * n, 'bytes_accessed': 12 * n}}.")
    for key, count in value.items():
        if key not in COST_KEYS or not _values.is_int(count) or count < 0:
            raise ValueError(f"cost_estimate={dict(value)!r}: {key!r}: {count!r} is not one of "
                             f"{', '.join(COST_KEYS)} with a non-negative int.")
    return tuple(sorted((key, int(count)) for key, count in value.items()))
