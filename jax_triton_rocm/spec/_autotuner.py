"""Triton's autotuner at lowering: what of it jaxlib's autotuner cannot honour, each refused with
its alternative (jaxlib times the configs itself, on the device, at the first run, without host
code around the trials), and `perf_model` with `top_k`, which Triton runs on the host before any
trial and so runs here, at lowering."""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.spec import _callbacks

if TYPE_CHECKING:
    from triton.runtime.autotuner import Autotuner

# What a pre_hook (the autotuner's, or a config's that touches data) can do instead.
PRE_HOOK_ALTERNATIVE = ("restore inputs through input_output_aliases (jaxlib restores aliased "
                        "buffers between trials) or zero outputs with zeroed_outputs")
# Triton autotuner features that need the host around each trial, or that time the trials
# differently. jaxlib's autotuner runs the trials itself, on the device, so none of them can run;
# each gets an error naming what to use instead.
_UNSUPPORTED_AUTOTUNE = {
    "pre_hook": PRE_HOOK_ALTERNATIVE,
    "post_hook": "do the work after the call, in JAX",
    "restore_value": "alias the buffer with input_output_aliases; jaxlib restores aliased inputs "
                     "between trials",
    "reset_to_zero": "list those outputs in triton_call's zeroed_outputs, which are zeroed "
                     "before every launch",
    "do_bench": "drop it: jaxlib times every config itself, on the device, at the first run",
    "warmup": "drop it: jaxlib times every config itself, on the device, at the first run",
    "rep": "drop it: jaxlib times every config itself, on the device, at the first run",
    "use_cuda_graph": "drop it: jaxlib times every config itself, on the device, at the first run",
    "cache_results": "drop it: jaxlib times the configs once per process, at the first run, and "
                     "keeps the fastest for the life of the process",
}


def _user_cache_results(autotuner: Autotuner) -> bool:
    """Whether `cache_results=True` was asked of this autotuner (not Triton's global knob)."""
    if not getattr(autotuner, "cache_results", False):
        return False
    from triton import knobs

    return not knobs.autotuning.cache


def _used_features(autotuner: Autotuner) -> list[str]:
    """The unsupported autotuner features this autotuner uses, by argument name."""
    used = {
        "pre_hook": getattr(autotuner, "user_defined_pre_hook", False),
        "post_hook": getattr(autotuner, "user_defined_post_hook", False),
        "restore_value": bool(getattr(autotuner, "restore_value", None)),
        "reset_to_zero": bool(getattr(autotuner, "reset_to_zero", None)),
        "warmup": getattr(autotuner, "num_warmups", None) is not None,
        "rep": getattr(autotuner, "num_reps", None) is not None,
        "use_cuda_graph": bool(getattr(autotuner, "use_cuda_graph", False)),
        "cache_results": _user_cache_results(autotuner),
    }
    # warmup, rep and use_cuda_graph install a `_do_bench` of their own; report those by name.
    used["do_bench"] = (getattr(autotuner, "_do_bench", None) is not None
                        and not (used["warmup"] or used["rep"] or used["use_cuda_graph"]))
    return [name for name in _UNSUPPORTED_AUTOTUNE if used[name]]


def check_autotuner(autotuner: Autotuner, kernel: str) -> None:
    """Raises NotImplementedError for an autotuner feature jaxlib cannot honour.

    The message names the feature, the kernel and the alternative; nothing is silently ignored.
    """
    used = _used_features(autotuner)
    if used:
        advice = "; ".join(f"for {name}: {_UNSUPPORTED_AUTOTUNE[name]}" for name in used)
        raise NotImplementedError(
            f"@triton.autotune({', '.join(f'{name}=...' for name in used)}) on kernel {kernel} "
            f"is not supported by jax_triton_rocm: jaxlib times the configs on the device, at the "
            f"first run, without host code around the trials. Instead, {advice}.")
    for config in autotuner.configs:  # a config's pre_hook runs at lowering (`_hooks`)
        if getattr(config, "ir_override", None) is not None:
            raise NotImplementedError(
                f"triton.Config(ir_override={config.ir_override!r}) on kernel {kernel} is not "
                f"supported by jax_triton_rocm, which compiles every config from the kernel's "
                f"source. Drop ir_override, or change the kernel's source.")


def _top_k(autotuner: Autotuner, kernel: str) -> int:
    """How many configs `perf_model` keeps: `top_k` as Triton reads it (an int, or a float up to
    1.0, the share of all configs)."""
    top_k = getattr(autotuner, "configs_top_k", 1.0)
    if isinstance(top_k, float) and top_k <= 1.0:
        top_k = int(len(autotuner.configs) * top_k)
    elif not isinstance(top_k, int) or isinstance(top_k, bool):
        raise TypeError(f"prune_configs_by={{'top_k': {top_k!r}}} on kernel {kernel} must be an "
                        f"int or a float up to 1.0 (a share of the configs), as in Triton.")
    if top_k < 1:
        raise ValueError(f"prune_configs_by={{'top_k': {autotuner.configs_top_k!r}}} on kernel "
                         f"{kernel} keeps no config of {len(autotuner.configs)}; keep at least "
                         f"one.")
    return top_k


def fastest_estimated(autotuner: Autotuner, configs: list, named_args: Mapping[str, Any],
                      kwargs: Mapping[str, Any], kernel: str) -> list:
    """The `top_k` of `configs` that the autotuner's `perf_model` estimates fastest, fastest
    first, as Triton's autotuner keeps them: the model is called with the arguments given by
    position, the keywords and each config's `all_kwargs()` (its kwargs and settings) by name,
    arrays as abstract values; `configs` as they are where no more than `top_k` are left.

    Raises:
      TypeError / ValueError: a bad `top_k`, or a model that raised or returned no number.
    """
    top_k = _top_k(autotuner, kernel)
    if len(configs) <= top_k:
        return configs
    model, estimates = autotuner.perf_model, []
    for config in configs:
        values = {**named_args, **kwargs, **config.all_kwargs()}
        what = f"perf_model of kernel {kernel}, for config ({config}),"
        returned = _callbacks.call(
            functools.partial(model, **values), what=what, given=values,
            fix="It receives the kernel's arguments, the keywords and the config's kwargs and "
                "settings by name (arrays as their shape and dtype) and returns an estimated time.")
        try:
            estimate = float(returned)
        except (TypeError, ValueError):
            estimate = math.nan
        if math.isnan(estimate):
            raise ValueError(f"{what} ({_callbacks.describe(model)}) returned {returned!r}, not a "
                             f"number; it must return the config's estimated time.")
        estimates.append(estimate)
    order = sorted(range(len(configs)), key=estimates.__getitem__)
    return [configs[i] for i in order[:top_k]]
