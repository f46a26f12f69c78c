"""The launch configurations of one call: one for a plain kernel, several for an autotuned one.

A configuration fixes the constexprs, the compile options (`num_warps`, `num_stages`, `num_ctas`,
vendor knobs) and what a callable grid sees. jaxlib receives one kernel call per configuration;
with more than one it times them on the device at the first run and keeps the fastest.

The order is Triton's own: heuristics that wrap `@triton.autotune` run once, on the call's
arguments; then the autotuner's configs (pruned by `early_config_prune`) each add their kwargs
and settings; then the heuristics inside the autotuner run once per config, seeing its values.
Array arguments appear to heuristics, pruning functions and grids as abstract values (`.shape`,
`.dtype`, no data); scalars as their values.

`key` needs nothing here: a lowering is already specific to its shapes, dtypes and scalars, and
jaxlib tunes each lowered call on its own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jax_triton_rocm.base import _values, _vendors
from jax_triton_rocm.launch import _layout
from jax_triton_rocm.launch._spec import KernelCallSpec

LAUNCH_SETTINGS = ("num_warps", "num_stages", "num_ctas")

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


@dataclasses.dataclass(frozen=True)
class LaunchConfig:
    """One way to launch the kernel.

    Attributes:
      constexprs: constexpr values by parameter name.
      num_warps, num_stages: compile settings (None: the backend's default).
      num_ctas: CTAs per cluster.
      options: vendor compile options (waves_per_eu, matrix_instr_nonkdim, kpack, maxnreg).
      description: shown by jaxlib's autotuner (Triton's text for the config).
      meta: what a callable `grid` or `zeroed_outputs` receives: the arguments by name, the
        constexprs and the launch settings, as Triton's launcher gives them to a grid.
    """

    constexprs: dict[str, Any]
    num_warps: int | None
    num_stages: int | None
    num_ctas: int
    options: dict[str, Any]
    description: str
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)

    def kwargs_view(self) -> dict[str, Any]:
        """The keyword arguments Triton's launcher would hold: options, settings, constexprs."""
        settings = {k: getattr(self, k) for k in LAUNCH_SETTINGS if getattr(self, k) is not None}
        return {**self.options, **settings, **self.constexprs}


def named_args(jit_fn: Any, positional: tuple, in_avals: tuple, out_avals: tuple) -> dict:
    """Argument values by name, as heuristics and pruning functions see them.

    Arrays appear as their abstract values (shape and dtype, no data). Parameters filled by name
    ("keyword" entries) are left to the constexprs.
    """
    names = list(jit_fn.arg_names)
    named: dict[str, Any] = {}
    for name, (kind, value) in zip(names, positional):
        if kind in ("array", "input"):
            named[name] = in_avals[value]
        elif kind == "output":
            named[name] = out_avals[value]
        elif kind == "scalar":
            named[name] = value
    if not _layout.places_outputs(positional):
        named.update(zip(names[len(positional):], out_avals))
    return named


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


def _apply_heuristics(heuristics: tuple, config: LaunchConfig, named: dict, kernel: str,
                      param_names: set[str]) -> LaunchConfig:
    """Runs `heuristics` (outermost first) on `config`; each sees the values set before it."""
    for wrapper in heuristics:
        for key, rule in wrapper.values.items():
            value = rule({**named, **config.kwargs_view()})
            if key in param_names:
                config = dataclasses.replace(config, constexprs={**config.constexprs, key: value})
            elif key in LAUNCH_SETTINGS:
                config = dataclasses.replace(config, **{key: value})
            elif key in _vendors.COMPILE_OPTIONS:
                config = dataclasses.replace(config, options={**config.options, key: value})
            else:
                raise TypeError(
                    f"@triton.heuristics on kernel {kernel} sets {key!r}, which is neither a "
                    f"parameter of the kernel ({', '.join(sorted(param_names))}) nor a launch "
                    f"setting ({', '.join(LAUNCH_SETTINGS + _vendors.COMPILE_OPTIONS)}). Rename "
                    f"it to one of those.")
    return config


def _from_autotune_config(base: LaunchConfig, config: Any, kernel: str,
                          param_names: set[str]) -> LaunchConfig:
    """`base` with a `triton.Config`'s kwargs, settings and vendor options laid over it."""
    constexprs = dict(base.constexprs)
    options = dict(base.options)
    if getattr(config, "maxnreg", None) is not None:
        options["maxnreg"] = config.maxnreg
    for key, value in config.kwargs.items():
        if key in param_names:
            constexprs[key] = value
        elif key in _vendors.COMPILE_OPTIONS:
            options[key] = value
        else:
            raise TypeError(
                f"triton.Config({config}) on kernel {kernel} sets {key!r}, which is neither a "
                f"parameter of the kernel ({', '.join(sorted(param_names))}) nor a compile "
                f"option ({', '.join(_vendors.COMPILE_OPTIONS)}). Fix the config's kwargs.")
    return LaunchConfig(
        constexprs=constexprs,
        num_warps=config.num_warps if config.num_warps is not None else base.num_warps,
        num_stages=config.num_stages if config.num_stages is not None else base.num_stages,
        num_ctas=getattr(config, "num_ctas", None) or base.num_ctas,
        options=options,
        description=str(config),
    )


def _autotune_configs(autotuner: Any, base: LaunchConfig, named: dict, kernel: str,
                      param_names: set[str]) -> list[LaunchConfig]:
    """The autotuner's configs over `base`, pruned by its `early_config_prune`, in its order."""
    check_autotuner(autotuner, kernel)
    for config in autotuner.configs:
        conflicts = sorted(set(base.constexprs) & set(config.kwargs))
        if conflicts:
            raise ValueError(
                f"Kernel {kernel}: {', '.join(map(repr, conflicts))} is set both by the call "
                f"(or a heuristic around @triton.autotune) and by autotune config ({config}), as "
                f"Triton forbids too. Drop it from the call to let the autotuner choose, or drop "
                f"it from the configs.")
    candidates = list(autotuner.configs)
    prune = getattr(autotuner, "early_config_prune", None)
    if prune is not None:
        candidates = list(prune(candidates, dict(named), **base.kwargs_view()))
        if not candidates:
            raise ValueError(
                f"early_config_prune of kernel {kernel} returned no config (of "
                f"{len(autotuner.configs)}: {'; '.join(str(c) for c in autotuner.configs)}). It "
                f"must keep at least one.")
    return [_from_autotune_config(base, config, kernel, param_names) for config in candidates]


def _checked_options(config: LaunchConfig) -> LaunchConfig:
    """`config` with its vendor options checked; they may come from an autotune config or a
    heuristic, which `triton_call` never saw."""
    if not config.options:
        return config
    where = f"in autotune config ({config.description})" if config.description else ""
    return dataclasses.replace(config, options=_values.compile_options(config.options,
                                                                       where=where))


def resolve(spec: KernelCallSpec, in_avals: tuple, out_avals: tuple) -> list[LaunchConfig]:
    """The launch configurations of a call, in the order jaxlib should try them.

    Raises:
      NotImplementedError: an autotuner feature jaxlib cannot honour (names the alternative).
      ValueError: a metaparameter set by both the call and a config, or pruning left no config.
      TypeError: a config or heuristic sets a name that is no parameter and no launch setting.
    """
    unwrapped = spec.unwrapped
    jit_fn = unwrapped.jit_fn
    kernel = spec.kernel_name
    named = named_args(jit_fn, spec.positional, in_avals, out_avals)
    param_names = set(jit_fn.arg_names)
    outside = unwrapped.heuristics[:unwrapped.heuristics_outside]
    inside = unwrapped.heuristics[unwrapped.heuristics_outside:]
    base = LaunchConfig(dict(spec.metaparams), spec.num_warps, spec.num_stages, spec.num_ctas,
                        dict(spec.options), "")
    base = _apply_heuristics(outside, base, named, kernel, param_names)
    if unwrapped.autotuner is None:
        configs = [base]
    else:
        configs = _autotune_configs(unwrapped.autotuner, base, named, kernel, param_names)
    configs = [_apply_heuristics(inside, c, named, kernel, param_names) for c in configs]
    configs = [_checked_options(c) for c in configs]
    return [dataclasses.replace(c, meta={**named, **c.kwargs_view()}) for c in configs]
