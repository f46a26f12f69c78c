"""The launch configurations of one call: one for a plain kernel, several for an autotuned one.

A configuration fixes the constexprs (metaparameters, then the config's kwargs, then the
heuristics' values), the compile options (`num_warps`, `num_stages`, `num_ctas`, vendor knobs)
and the grid. jaxlib receives one kernel call per configuration; with more than one it times them
on the device at the first run and keeps the fastest.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jax_triton_rocm import _kernel

# Triton autotuner features that need a host-side hook around each trial. jaxlib's autotuner runs
# the trials itself, on the device, so these cannot run; each gets an error naming what to use.
_UNSUPPORTED_AUTOTUNE = {
    "pre_hook": "restore inputs through input_output_aliases (jaxlib restores aliased buffers "
                "between trials) or zero outputs with zeroed_outputs",
    "post_hook": "do the work after the call in JAX",
    "restore_value": "alias the buffer with input_output_aliases; jaxlib restores aliased buffers "
                     "between trials",
    "reset_to_zero": "list those outputs in zeroed_outputs",
    "perf_model": "prune with prune_configs_by={'early_config_prune': ...} instead",
}


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """One way to launch the kernel.

    Attributes:
      constexprs: constexpr values by parameter name.
      num_warps, num_stages, num_ctas: launch and compile settings (None: backend default).
      options: vendor compile options (waves_per_eu, matrix_instr_nonkdim, kpack, maxnreg).
      description: shown by jaxlib's autotuner.
    """

    constexprs: dict[str, Any]
    num_warps: int | None
    num_stages: int | None
    num_ctas: int
    options: dict[str, Any]
    description: str


def _named_args(jit_fn: Any, positional: tuple, in_avals: tuple, out_avals: tuple) -> dict:
    """Argument values by name, as heuristics and pruning functions see them.

    Arrays appear as their abstract values (shape and dtype, no data).
    """
    names = jit_fn.arg_names
    values: list[Any] = [in_avals[v] if kind == "array" else v for kind, v in positional]
    values += list(out_avals)
    return dict(zip(names, values))


def _check_autotuner(autotuner: Any) -> None:
    for attr, advice in _UNSUPPORTED_AUTOTUNE.items():
        if attr == "pre_hook":
            used = getattr(autotuner, "user_defined_pre_hook", False)
        elif attr == "post_hook":
            used = getattr(autotuner, "user_defined_post_hook", False)
        else:
            used = bool(getattr(autotuner, attr, None))
        if used:
            raise NotImplementedError(
                f"@triton.autotune({attr}=...) is not supported by jax_triton_rocm: jaxlib times "
                f"the configs on the device without host hooks. Instead, {advice}.")
    for config in autotuner.configs:
        if getattr(config, "pre_hook", None) is not None:
            raise NotImplementedError(
                f"triton.Config(pre_hook=...) in {config} is not supported by jax_triton_rocm: "
                f"jaxlib runs the trials without host hooks. Instead, "
                f"{_UNSUPPORTED_AUTOTUNE['pre_hook']}.")


def _config_options(config: Any) -> dict[str, Any]:
    """Vendor options a triton.Config carries (in its kwargs or as attributes)."""
    options = {}
    for key in _kernel.COMPILE_OPTIONS:
        value = getattr(config, key, None)
        if value is not None:
            options[key] = value
    return options


def resolve(
    unwrapped: _kernel.Unwrapped,
    *,
    metaparams: dict[str, Any],
    options: dict[str, Any],
    num_warps: int | None,
    num_stages: int | None,
    num_ctas: int,
    positional: tuple,
    in_avals: tuple,
    out_avals: tuple,
) -> list[LaunchConfig]:
    """The launch configurations of a call, in the order jaxlib should try them.

    Configs whose kwargs contradict an explicit metaparameter are dropped, then the autotuner's
    `early_config_prune` runs, then heuristics fill their values per config.

    Raises:
      NotImplementedError: an autotuner feature jaxlib cannot honour (names the alternative).
      ValueError: pruning left no config.
    """
    named = _named_args(unwrapped.jit_fn, positional, in_avals, out_avals)
    param_names = set(unwrapped.jit_fn.arg_names)
    if unwrapped.autotuner is None:
        configs = [LaunchConfig(dict(metaparams), num_warps, num_stages, num_ctas, dict(options),
                                "")]
    else:
        autotuner = unwrapped.autotuner
        _check_autotuner(autotuner)
        candidates = [c for c in autotuner.configs
                      if all(c.kwargs.get(k, v) == v for k, v in metaparams.items())]
        prune = getattr(autotuner, "early_config_prune", None)
        if prune is not None and candidates:
            candidates = list(prune(candidates, {**named, **metaparams}))
        if not candidates:
            raise ValueError(
                f"No autotune config of kernel {_kernel.kernel_name(unwrapped.jit_fn)} is left "
                f"after pruning (explicit metaparameters {metaparams} and early_config_prune). "
                f"Configs: {[str(c) for c in autotuner.configs]}.")
        configs = []
        for config in candidates:
            kwargs = {k: v for k, v in config.kwargs.items() if k in param_names}
            config_options = {**options, **_config_options(config),
                              **{k: v for k, v in config.kwargs.items()
                                 if k in _kernel.COMPILE_OPTIONS and k not in param_names}}
            configs.append(LaunchConfig(
                {**metaparams, **kwargs},
                config.num_warps if config.num_warps is not None else num_warps,
                config.num_stages if config.num_stages is not None else num_stages,
                getattr(config, "num_ctas", None) or num_ctas,
                config_options,
                str(config),
            ))
    resolved = []
    for config in configs:
        constexprs = dict(config.constexprs)
        for heuristics in unwrapped.heuristics:  # outermost first, as Triton runs them
            for key, rule in heuristics.values.items():
                constexprs[key] = rule({**named, **constexprs})
        resolved.append(dataclasses.replace(config, constexprs=constexprs))
    return resolved
