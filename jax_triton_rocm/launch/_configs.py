"""The launch configurations of one call: one for a plain kernel, several for an autotuned one.

A configuration fixes the constexprs, the compile options (`num_warps`, `num_stages`, `num_ctas`,
vendor knobs) and what a callable grid sees. jaxlib receives one kernel call per configuration;
with more than one it times them on the device at the first run and keeps the fastest.

The order is Triton's own: heuristics that wrap `@triton.autotune` run once, on the call's
arguments; then the autotuner's configs (pruned by `early_config_prune`, then by `perf_model`
and `top_k`) each add their kwargs and settings, and each config's `pre_hook` runs (`_hooks`:
it may give the config's tensor descriptors their block shapes); then the heuristics inside the
autotuner run once per config, seeing its values. Each function receives the arguments as
Triton's launcher passes them: `early_config_prune(configs, named_args, **kwargs)` and
`perf_model(**named_args, **kwargs, **config.all_kwargs())` get the parameters given by
position in `named_args` and those given by keyword (`KernelCallSpec.by_keyword`), with the
constexprs and settings, in `kwargs`; heuristics, pre_hooks and grids get them all in one dict.
Array arguments appear as abstract values (`.shape`, `.dtype`, no data); scalars as their values.

`key` needs nothing here: a lowering is already specific to its shapes, dtypes and scalars, and
jaxlib tunes each lowered call on its own.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from jax_triton_rocm.base import _values, _vendors
from jax_triton_rocm.launch import _autotuner, _callbacks, _hooks, _layout, _nested, _types
from jax_triton_rocm.launch._spec import KernelCallSpec

LAUNCH_SETTINGS = ("num_warps", "num_stages", "num_ctas")


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
      positional: the call's layout with the tensor descriptors whose block shape the config's
        `pre_hook` set (`_hooks`); None where it is the spec's own.
    """

    constexprs: dict[str, Any]
    num_warps: int | None
    num_stages: int | None
    num_ctas: int
    options: dict[str, Any]
    description: str
    meta: dict[str, Any] = dataclasses.field(default_factory=dict)
    positional: tuple | None = None

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
        elif kind in _nested.NESTED_KINDS:
            named[name] = _nested.named_value((kind, value), in_avals)
    if not _layout.places_outputs(positional):
        named.update(zip(names[len(positional):], out_avals))
    return named


def _apply_heuristics(heuristics: tuple, config: LaunchConfig, named: dict, kernel: str,
                      param_names: set[str]) -> LaunchConfig:
    """Runs `heuristics` (outermost first) on `config`; each sees the values set before it.

    Raises:
      ValueError: a rule raised (`_callbacks.call` names the rule, what it read and was given).
      TypeError: a rule sets a name that is no parameter and no launch setting.
    """
    for wrapper in heuristics:
        for key, rule in wrapper.values.items():
            args = {**named, **config.kwargs_view()}
            value = _callbacks.call(
                rule, args, what=f"The heuristic for {key!r} (@triton.heuristics) of kernel "
                                 f"{kernel}",
                given=args, fix="Fix the rule: it receives the kernel's arguments by name "
                                "(arrays as their shape and dtype) and the values set before it.")
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
        num_ctas=config.num_ctas if getattr(config, "num_ctas", None) is not None
        else base.num_ctas,
        options=options,
        description=str(config),
    )


def _autotune_configs(autotuner: Any, base: LaunchConfig, named: dict, by_keyword: tuple,
                      kernel: str, param_names: set[str]) -> list[tuple[Any, LaunchConfig]]:
    """The autotuner's configs over `base`, each with its `triton.Config`, pruned by its
    `early_config_prune` and its `perf_model`, in the order they leave."""
    _autotuner.check_autotuner(autotuner, kernel)
    for config in autotuner.configs:
        conflicts = sorted(set(base.constexprs) & set(config.kwargs))
        if conflicts:
            raise ValueError(
                f"Kernel {kernel}: {', '.join(map(repr, conflicts))} is set both by the call "
                f"(or a heuristic around @triton.autotune) and by autotune config ({config}), as "
                f"Triton forbids too. Drop it from the call to let the autotuner choose, or drop "
                f"it from the configs.")
    candidates = list(autotuner.configs)
    named_args = {name: value for name, value in named.items() if name not in by_keyword}
    kwargs = {**{name: named[name] for name in by_keyword if name in named},
              **base.kwargs_view()}
    prune = getattr(autotuner, "early_config_prune", None)
    if prune is not None:
        candidates = _pruned(prune, candidates, named_args, kwargs, kernel)
    if getattr(autotuner, "perf_model", None) is not None:
        candidates = _autotuner.fastest_estimated(autotuner, candidates, named_args, kwargs,
                                                  kernel)
    return [(config, _from_autotune_config(base, config, kernel, param_names))
            for config in candidates]


def _pruned(prune: Any, configs: list, named_args: dict, kwargs: dict, kernel: str) -> list:
    """The configs `prune` (an `early_config_prune`) keeps, checked to be some of `configs`'
    kind (`triton.Config`s), at least one.

    Raises:
      ValueError: `prune` raised, returned no config, or returned something else.
    """
    what = f"early_config_prune of kernel {kernel}"
    fix = (f"It must return the triton.Config objects it keeps (at least one of the "
           f"{len(configs)}: {'; '.join(str(c) for c in configs)}).")
    given = _callbacks.Arguments(named_args=named_args, kwargs=kwargs)
    kept = _callbacks.call(functools.partial(prune, list(configs), dict(named_args), **kwargs),
                           what=what, given=given, fix=f"Fix it. {fix}")
    try:
        kept = list(kept)
    except TypeError:
        raise ValueError(f"{what} ({_callbacks.describe(prune)}) returned {kept!r}, not a list "
                         f"of configs. {fix}") from None
    config_type = type(configs[0]) if configs else object
    wrong = [item for item in kept if not isinstance(item, config_type)]
    if wrong:
        raise ValueError(f"{what} ({_callbacks.describe(prune)}) returned {wrong[0]!r}, a "
                         f"{type(wrong[0]).__name__}, among its configs. {fix}")
    if not kept:
        raise ValueError(f"{what} ({_callbacks.describe(prune)}) returned no config. {fix}")
    return kept


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
        pairs = [(None, base)]
    else:
        pairs = _autotune_configs(unwrapped.autotuner, base, named, spec.by_keyword, kernel,
                                  param_names)
    configs = []
    for triton_config, config in pairs:
        config, seen = _hooked(triton_config, config, spec, named, in_avals, out_avals)
        config = _apply_heuristics(inside, config, seen, kernel, param_names)
        _values.launch_settings(config.num_warps, config.num_stages, config.num_ctas,
                                where=_config_source(config, kernel))
        configs.append(_finished(_checked_options(config), seen))
    return configs


def _hooked(triton_config: Any, config: LaunchConfig, spec: KernelCallSpec, named: dict,
            in_avals: tuple, out_avals: tuple) -> tuple[LaunchConfig, dict]:
    """`config` after its `triton.Config`'s pre_hook (`_hooks.run`), with the layout of the
    descriptors it re-blocked, and the arguments by name as the hook left them."""
    hook = getattr(triton_config, "pre_hook", None)
    if hook is None:
        return config, named
    jit_fn = spec.unwrapped.jit_fn
    descriptors = _hooks.run(hook, triton_config, {**named, **config.kwargs_view()},
                             list(jit_fn.arg_names), spec.kernel_name)
    if not descriptors:
        return config, named
    positional = _hooks.reblocked(spec.positional, descriptors)
    return (dataclasses.replace(config, positional=positional),
            named_args(jit_fn, positional, in_avals, out_avals))


def _config_source(config: LaunchConfig, kernel: str) -> str:
    """Where a config's launch settings came from, for messages (the call's own were checked
    when it was made)."""
    if config.description:
        return f"in autotune config ({config.description}) of kernel {kernel}"
    return f"set by @triton.heuristics on kernel {kernel}"


def _finished(config: LaunchConfig, named: dict) -> LaunchConfig:
    """`config` with NumPy scalar constexprs as the Python scalars they equal (so that
    `np.int64(256)` compiles, and compiles as `256` does: `_types.plain_constexpr`), and with
    what a grid sees (`meta`)."""
    constexprs = {k: _types.plain_constexpr(v) for k, v in config.constexprs.items()}
    config = dataclasses.replace(config, constexprs=constexprs)
    return dataclasses.replace(config, meta={**named, **config.kwargs_view()})
