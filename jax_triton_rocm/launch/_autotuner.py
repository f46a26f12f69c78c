"""What of Triton's autotuner jaxlib's autotuner cannot honour, each refused with its
alternative: jaxlib times the configs itself, on the device, at the first run, without host code
around the trials."""

from __future__ import annotations

from typing import Any

# Triton autotuner features that need the host around each trial, or that time the trials
# differently. jaxlib's autotuner runs the trials itself, on the device, so none of them can run;
# each gets an error naming what to use instead.
_UNSUPPORTED_AUTOTUNE = {
    "pre_hook": "restore inputs through input_output_aliases (jaxlib restores aliased buffers "
                "between trials) or zero outputs with zeroed_outputs",
    "post_hook": "do the work after the call, in JAX",
    "restore_value": "alias the buffer with input_output_aliases; jaxlib restores aliased inputs "
                     "between trials",
    "reset_to_zero": "list those outputs in triton_call's zeroed_outputs, which are zeroed "
                     "before every launch",
    "perf_model": "prune with prune_configs_by={'early_config_prune': fn} instead (perf_model "
                  "and top_k need the device at lowering time)",
    "do_bench": "drop it: jaxlib times every config itself, on the device, at the first run",
    "warmup": "drop it: jaxlib times every config itself, on the device, at the first run",
    "rep": "drop it: jaxlib times every config itself, on the device, at the first run",
    "use_cuda_graph": "drop it: jaxlib times every config itself, on the device, at the first run",
    "cache_results": "drop it: jaxlib times the configs once per process, at the first run, and "
                     "keeps the fastest for the life of the process",
}


def _user_cache_results(autotuner: Any) -> bool:
    """Whether `cache_results=True` was asked of this autotuner (not Triton's global knob)."""
    if not getattr(autotuner, "cache_results", False):
        return False
    from triton import knobs

    return not knobs.autotuning.cache


def _used_features(autotuner: Any) -> list[str]:
    """The unsupported autotuner features this autotuner uses, by argument name."""
    used = {
        "pre_hook": getattr(autotuner, "user_defined_pre_hook", False),
        "post_hook": getattr(autotuner, "user_defined_post_hook", False),
        "restore_value": bool(getattr(autotuner, "restore_value", None)),
        "reset_to_zero": bool(getattr(autotuner, "reset_to_zero", None)),
        "perf_model": getattr(autotuner, "perf_model", None) is not None,
        "warmup": getattr(autotuner, "num_warmups", None) is not None,
        "rep": getattr(autotuner, "num_reps", None) is not None,
        "use_cuda_graph": bool(getattr(autotuner, "use_cuda_graph", False)),
        "cache_results": _user_cache_results(autotuner),
    }
    # warmup, rep and use_cuda_graph install a `_do_bench` of their own; report those by name.
    used["do_bench"] = (getattr(autotuner, "_do_bench", None) is not None
                        and not (used["warmup"] or used["rep"] or used["use_cuda_graph"]))
    return [name for name in _UNSUPPORTED_AUTOTUNE if used[name]]


def check_autotuner(autotuner: Any, kernel: str) -> None:
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
    for config in autotuner.configs:
        if getattr(config, "pre_hook", None) is not None:
            raise NotImplementedError(
                f"triton.Config(pre_hook=...) ({config}) on kernel {kernel} is not supported by "
                f"jax_triton_rocm: jaxlib runs the trials without host hooks. Instead, "
                f"{_UNSUPPORTED_AUTOTUNE['pre_hook']}.")
        if getattr(config, "ir_override", None) is not None:
            raise NotImplementedError(
                f"triton.Config(ir_override={config.ir_override!r}) on kernel {kernel} is not "
                f"supported by jax_triton_rocm, which compiles every config from the kernel's "
                f"source. Drop ir_override, or change the kernel's source.")
