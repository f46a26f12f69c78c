"""Triton's autotuner and heuristics at lowering: the configs a call is tuned among, the
autotuner features jaxlib cannot honour (each refused with its alternative), the heuristics."""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.kernel import _callbacks

if TYPE_CHECKING:
    from triton.runtime.autotuner import Autotuner

LAUNCH_SETTINGS = ("num_warps", "num_stages", "num_ctas")

# What a pre_hook (the autotuner's, or a config's that touches data) can do instead.
PRE_HOOK_ALTERNATIVE = ("restore inputs through input_output_aliases (jaxlib restores aliased "
                        "buffers between trials) or zero outputs with zeroed_outputs")
_JAXLIB_TIMES = "drop it: jaxlib times every config itself, on the device, at the first run"
# Triton autotuner features that need the host around each trial, or that time the trials
# differently: jaxlib's autotuner runs the trials itself, on the device.
_UNSUPPORTED_AUTOTUNE = {
    "pre_hook": PRE_HOOK_ALTERNATIVE,
    "post_hook": "do the work after the call, in JAX",
    "restore_value": "alias the buffer with input_output_aliases; jaxlib restores aliased inputs "
                     "between trials",
    "reset_to_zero": "list those outputs in triton_call's zeroed_outputs, which are zeroed "
                     "before every launch",
    "do_bench": _JAXLIB_TIMES,
    "warmup": _JAXLIB_TIMES,
    "rep": _JAXLIB_TIMES,
    "use_cuda_graph": _JAXLIB_TIMES,
    "cache_results": "drop it: jaxlib times the configs once per process, at the first run, and "
                     "keeps the fastest for the life of the process",
}


def check_autotuner(autotuner: Autotuner, kernel: str) -> None:
    """Raises NotImplementedError for an autotuner feature jaxlib cannot honour."""
    from triton import knobs

    used = {
        "pre_hook": getattr(autotuner, "user_defined_pre_hook", False),
        "post_hook": getattr(autotuner, "user_defined_post_hook", False),
        "restore_value": bool(getattr(autotuner, "restore_value", None)),
        "reset_to_zero": bool(getattr(autotuner, "reset_to_zero", None)),
        "warmup": getattr(autotuner, "num_warmups", None) is not None,
        "rep": getattr(autotuner, "num_reps", None) is not None,
        "use_cuda_graph": bool(getattr(autotuner, "use_cuda_graph", False)),
        # Asked of this autotuner, not set by Triton's global knob.
        "cache_results": (bool(getattr(autotuner, "cache_results", False))
                          and not knobs.autotuning.cache),
    }
    # warmup, rep and use_cuda_graph install a `_do_bench` of their own; report those by name.
    used["do_bench"] = (getattr(autotuner, "_do_bench", None) is not None
                        and not (used["warmup"] or used["rep"] or used["use_cuda_graph"]))
    names = [name for name in _UNSUPPORTED_AUTOTUNE if used[name]]
    if names:
        advice = "; ".join(f"for {name}: {_UNSUPPORTED_AUTOTUNE[name]}" for name in names)
        raise NotImplementedError(
            f"@triton.autotune({', '.join(f'{name}=...' for name in names)}) on kernel {kernel} "
            f"is not supported by jax_triton_rocm: jaxlib times the configs on the device, at the "
            f"first run, without host code around the trials. Instead, {advice}.")
    for config in autotuner.configs:  # a config's pre_hook runs at lowering (`_hooks`)
        if getattr(config, "ir_override", None) is not None:
            raise NotImplementedError(
                f"triton.Config(ir_override={config.ir_override!r}) on kernel {kernel} is not "
                f"supported by jax_triton_rocm, which compiles every config from the kernel's "
                f"source. Drop ir_override, or change the kernel's source.")


def apply_heuristics(heuristics: tuple, config: Any, named: dict, kernel: str,
                      param_names: set[str], compile_options: tuple[str, ...],
                      config_keys: frozenset[str] = frozenset()) -> Any:
    """Runs `heuristics` (outermost first) on `config`; each sees the values set before it.
    `config_keys`: for heuristics around an autotuner, what its configs set."""
    for wrapper in heuristics:
        for key, rule in wrapper.values.items():
            args = {**named, **config.kwargs_view()}
            what = f"The heuristic for {key!r} (@triton.heuristics) of kernel {kernel}"
            try:
                value = _callbacks.call(
                    rule, args, what=what, given=args,
                    fix="Fix the rule: it receives the kernel's arguments by name (arrays as "
                        "their shape and dtype) and the values set before it.")
            except ValueError as err:
                read = err.__cause__.args[0] if isinstance(err.__cause__, KeyError) else None
                if read not in config_keys or read in args:
                    raise
                raise ValueError(
                    f"{what} ({_callbacks.describe(rule)}) read {read!r}, which the kernel's "
                    f"@triton.autotune configs set; this @triton.heuristics wraps "
                    f"@triton.autotune, so it runs once per call, before a config is chosen, "
                    f"as in Triton (whose launcher raises KeyError: {read!r} there too). Put "
                    f"@triton.heuristics below @triton.autotune (between it and @triton.jit) "
                    f"to run it on each config's values.") from err.__cause__
            if key in param_names:
                config = dataclasses.replace(config, constexprs={**config.constexprs, key: value})
            elif key in LAUNCH_SETTINGS:
                config = dataclasses.replace(config, **{key: value})
            elif key in compile_options:
                config = dataclasses.replace(config, options={**config.options, key: value})
            else:
                raise TypeError(
                    f"@triton.heuristics on kernel {kernel} sets {key!r}, which is neither a "
                    f"parameter of the kernel ({', '.join(sorted(param_names))}) nor a launch "
                    f"setting ({', '.join(LAUNCH_SETTINGS + compile_options)}). Rename "
                    f"it to one of those.")
    return config


def _from_autotune_config(base: Any, config: Any, kernel: str, param_names: set[str],
                          compile_options: tuple[str, ...]) -> Any:
    """`base` with a `triton.Config`'s kwargs, settings and vendor options laid over it."""
    for key in config.kwargs:
        if key not in param_names and key not in compile_options:
            raise TypeError(
                f"triton.Config({config}) on kernel {kernel} sets {key!r}, which is neither a "
                f"parameter of the kernel ({', '.join(sorted(param_names))}) nor a compile "
                f"option ({', '.join(compile_options)}). Fix the config's kwargs.")
    maxnreg = getattr(config, "maxnreg", None)
    options = {**base.options, **({} if maxnreg is None else {"maxnreg": maxnreg}),
               **{k: v for k, v in config.kwargs.items() if k not in param_names}}
    constexprs = {**base.constexprs, **{k: v for k, v in config.kwargs.items() if k in param_names}}
    settings = {key: getattr(config, key) for key in LAUNCH_SETTINGS
                if getattr(config, key, None) is not None}
    return dataclasses.replace(base, constexprs=constexprs, options=options,
                               description=str(config), **settings)


def autotune_configs(autotuner: Autotuner, base: Any, named: dict, by_keyword: tuple,
                      kernel: str, param_names: set[str],
                      compile_options: tuple[str, ...]) -> list[tuple[Any, Any]]:
    """The autotuner's configs that agree with the call, pruned as Triton prunes them, each as
    (its `triton.Config`, `base` with it laid over)."""
    check_autotuner(autotuner, kernel)
    candidates = agreeing_configs(autotuner.configs, base, kernel)
    named_args = {name: value for name, value in named.items() if name not in by_keyword}
    kwargs = {**{name: named[name] for name in by_keyword if name in named},
              **base.kwargs_view()}
    if (prune := getattr(autotuner, "early_config_prune", None)) is not None:
        candidates = early_pruned(prune, candidates, named_args, kwargs, kernel)
    if (model := getattr(autotuner, "perf_model", None)) is not None:
        candidates = fastest_configs(autotuner, model, candidates, named_args, kwargs, kernel)
    return [(config, _from_autotune_config(base, config, kernel, param_names, compile_options))
            for config in candidates]


def agreeing_configs(configs: list, base: Any, kernel: str) -> list:
    """The `configs` that agree with what the call (`base`) fixes; ValueError where none does."""
    # A call may fix what the configs tune, as in jax-triton (Triton's launcher refuses that):
    # a constexpr, a launch setting or a compile option. A config sets what its `all_kwargs`
    # holds: its kwargs, and each setting it does not leave to the call (None), Triton's
    # defaults (num_warps=4, num_stages=3, num_ctas=1) included.
    settings = {**base.options, **{key: getattr(base, key) for key in LAUNCH_SETTINGS}}
    given = {**{key: value for key, value in settings.items() if value is not None},
             **base.constexprs}
    candidates = [config for config in configs
                  if all(value == given[key] for key, value in config.all_kwargs().items()
                         if key in given)]
    if not candidates:
        overlap = sorted(set(given) & set().union(*[config.all_kwargs() for config in configs]))
        raise ValueError(
            f"Kernel {kernel}: the call sets "
            f"{', '.join(f'{key}={given[key]!r}' for key in overlap)} (or a heuristic around "
            f"@triton.autotune does), and no autotune config agrees: "
            f"{'; '.join(map(str, configs))}. Give a value that one of them sets, or drop it "
            f"from the call to let the autotuner choose.")
    return candidates


def early_pruned(prune: Any, candidates: list, named_args: dict, kwargs: dict,
                 kernel: str) -> list:
    """The `candidates` the autotuner's `early_config_prune` keeps; ValueError where it returns
    no list of configs, or an empty one."""
    what = f"early_config_prune of kernel {kernel}"
    fix = (f"It must return the triton.Config objects it keeps (at least one of the "
           f"{len(candidates)}: {'; '.join(str(c) for c in candidates)}).")
    given = _callbacks.Arguments(named_args=named_args, kwargs=kwargs)
    kept = _callbacks.call(
        functools.partial(prune, list(candidates), dict(named_args), **kwargs),
        what=what, given=given, fix=f"Fix it. {fix}")
    try:
        kept = list(kept)
    except TypeError:
        raise ValueError(f"{what} ({_callbacks.describe(prune)}) returned {kept!r}, not a "
                         f"list of configs. {fix}") from None
    wrong = [item for item in kept if not isinstance(item, type(candidates[0]))]
    if wrong:
        raise ValueError(f"{what} ({_callbacks.describe(prune)}) returned {wrong[0]!r}, a "
                         f"{type(wrong[0]).__name__}, among its configs. {fix}")
    if not kept:
        raise ValueError(f"{what} ({_callbacks.describe(prune)}) returned no config. {fix}")
    return kept


def fastest_configs(autotuner: Autotuner, model: Any, candidates: list, named_args: dict,
                    kwargs: dict, kernel: str) -> list:
    """The autotuner's `top_k` `candidates` its `perf_model` estimates fastest, as Triton reads
    `top_k`; raises where `top_k` keeps none, or an estimate is no number."""
    configs = autotuner.configs
    # `top_k`: an int, or a share of all the configs.
    top_k = getattr(autotuner, "configs_top_k", 1.0)
    if isinstance(top_k, float) and top_k <= 1.0:
        top_k = int(len(configs) * top_k)
    elif not isinstance(top_k, int) or isinstance(top_k, bool):
        raise TypeError(f"prune_configs_by={{'top_k': {top_k!r}}} on kernel {kernel} must be "
                        f"an int or a float up to 1.0 (a share of the configs), as in Triton.")
    if top_k < 1:
        raise ValueError(f"prune_configs_by={{'top_k': {autotuner.configs_top_k!r}}} on "
                         f"kernel {kernel} keeps no config of {len(configs)}; keep at "
                         f"least one.")
    if len(candidates) > top_k:
        estimates = []
        for config in candidates:
            values = {**named_args, **kwargs, **config.all_kwargs()}
            what = f"perf_model of kernel {kernel}, for config ({config}),"
            returned = _callbacks.call(
                functools.partial(model, **values), what=what, given=values,
                fix="It receives the kernel's arguments, the keywords and the config's "
                    "kwargs and settings by name (arrays as their shape and dtype) and "
                    "returns an estimated time.")
            try:
                estimate = float(returned)
            except (TypeError, ValueError):
                estimate = math.nan
            if math.isnan(estimate):
                raise ValueError(f"{what} ({_callbacks.describe(model)}) returned "
                                 f"{returned!r}, not a number; it must return the config's "
                                 f"estimated time.")
            estimates.append(estimate)
        order = sorted(range(len(candidates)), key=estimates.__getitem__)
        candidates = [candidates[i] for i in order[:top_k]]
    return candidates
