"""`autotune`: pick each autotuned call's config once, on the real data of a real run: the
function run one equation at a time, each undecided call's configs compiled and timed on its
real operands ([Autotuning](autotuning.md)).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
from jax._src import core
from jax.interpreters import mlir

from jax_triton_rocm.routes import _choices
from jax_triton_rocm.routes._primitive import triton_kernel_p
from jax_triton_rocm.kernel import _spec

# Equations whose body is entered rather than run whole, by the parameter holding the body.
_CALL_BODIES = {"jit": "jaxpr", "closed_call": "call_jaxpr", "custom_jvp_call": "call_jaxpr",
                "custom_vjp_call": "call_jaxpr", "remat2": "jaxpr"}
# How long the timed runs of one config take at least, and how many runs at most.
TARGET_SECONDS = 0.02
MAX_RUNS = 100
ROUNDS = 3


def autotune(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Runs `fn(*args, **kwargs)`, picking each autotuned Triton call's config on real data.

    Every autotuned call `fn` makes that has no remembered config is timed with each config, on
    the operands this run computes for it, and the fastest is remembered: from then on (in this
    process, and in later ones through `JAX_TRITON_ROCM_AUTOTUNE_DIR`) the call lowers to that
    config alone. Run it once with representative arrays, before jitting `fn`; a function
    jitted before picks the choices up at its next call (JAX's caches are cleared).

    Args:
      fn: the function, as you would pass it to `jax.jit` (static arguments bound beforehand).
      *args: arrays on the GPU (and pytrees of them) to run it on. Python and NumPy scalars
        among them are bound as they are (a kernel receives them as scalars); arrays, 0-d ones
        too, are traced, as under `jax.jit`.
      **kwargs: keyword arguments of `fn`, as `*args`.

    Returns:
      What `fn(*args, **kwargs)` returns, computed with the chosen configs.
    """
    leaves, tree = jax.tree_util.tree_flatten((args, kwargs))
    scalars = {i: leaf for i, leaf in enumerate(leaves) if isinstance(leaf, _spec.SCALAR_TYPES)}
    arrays = [leaf for i, leaf in enumerate(leaves) if i not in scalars]

    def with_scalars(*traced: Any) -> Any:
        given = iter(traced)
        call_args, call_kwargs = jax.tree_util.tree_unflatten(
            tree, [scalars[i] if i in scalars else next(given) for i in range(len(leaves))])
        return fn(*call_args, **call_kwargs)

    closed, out_shape = jax.make_jaxpr(with_scalars, return_shape=True)(*arrays)
    generation = _choices.STORE.generation
    flat = _evaluate(closed.jaxpr, closed.consts, arrays, set())
    if _choices.STORE.generation != generation:
        jax.clear_caches()
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), flat)


def _evaluate(jaxpr: Any, consts: Sequence[Any], args: Sequence[Any],
              settled: set) -> list[Any]:
    """Runs `jaxpr` on real values, one equation at a time, tuning where a call is undecided;
    `settled`: the equations tuned already in this run."""
    env = dict(zip([*jaxpr.constvars, *jaxpr.invars], [*consts, *args]))

    def read(var: Any) -> Any:
        return var.val if isinstance(var, core.Literal) else env[var]

    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        body = _call_body(eqn)
        # What decides how `eqn` lowers, or None where that is not hashable.
        signature = (eqn.primitive, tuple(sorted(eqn.params.items())),
                     tuple(getattr(v, "aval", None) for v in eqn.invars))
        try:
            hash(signature)
        except TypeError:
            signature = None
        if body is not None:
            outs = _evaluate(body[0], body[1], invals, settled)
        elif _may_call_triton(eqn) and (signature is None or signature not in settled):
            outs = _tune_and_run(eqn, invals)
            if signature is not None:
                settled.add(signature)
        else:
            outs = _bind(eqn, invals)
        env.update(zip(eqn.outvars, outs))
    return [read(v) for v in jaxpr.outvars]


def _split(value: Any) -> tuple[Any, Sequence[Any]] | None:
    """(jaxpr, consts) of a Jaxpr or ClosedJaxpr parameter value; None for anything else."""
    if hasattr(value, "eqns"):
        return value, ()
    if hasattr(value, "jaxpr") and hasattr(value, "consts") and hasattr(value.jaxpr, "eqns"):
        return value.jaxpr, value.consts
    return None


def _call_body(eqn: Any) -> tuple[Any, Sequence[Any]] | None:
    """The body of a call-like equation whose inputs are the equation's, or None."""
    param = _CALL_BODIES.get(eqn.primitive.name)
    body = _split(eqn.params.get(param)) if param else None
    if body is None or len(body[0].invars) != len(eqn.invars):
        return None
    return body


def _may_call_triton(eqn: Any) -> bool:
    """Whether lowering `eqn` may emit a Triton call: a `triton_call`, a primitive lowered on
    GPUs by a rule from outside JAX, or one with such an equation in its body."""
    if eqn.primitive is triton_kernel_p:
        return True
    rules = getattr(mlir, "_platform_specific_lowerings", {})
    for platform in ("cuda", "rocm", "gpu"):
        entry = rules.get(platform, {}).get(eqn.primitive)
        rule = getattr(entry, "rule", entry)  # JAX keeps the rule in a LoweringRuleEntry
        module = getattr(rule, "__module__", None) or ""
        if rule is not None and not module.startswith(("jax.", "jaxlib.")):
            return True
    bodies = [_split(item) for value in eqn.params.values()
              for item in (value if isinstance(value, (tuple, list)) else (value,))]
    return any(_may_call_triton(inner) for body in bodies if body is not None
               for inner in body[0].eqns)


def _bind(eqn: Any, invals: Sequence[Any]) -> list[Any]:
    with eqn.ctx.manager:
        outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(eqn.params))
    return list(outs) if eqn.primitive.multiple_results else [outs]


def _compiled(eqn: Any, invals: Sequence[Any],
              forced: dict[str, int]) -> tuple[Any, dict[str, _choices.Undecided]]:
    """`eqn` alone, compiled for `invals` with the `forced` configs; and what it left undecided."""
    # A new function each time, so that neither JAX's caches nor the lowered-call memo (whose key
    # holds the session's forced configs) serve a lowering made with other choices.
    with _choices.session(forced) as current:
        compiled = jax.jit(lambda *operands: _bind(eqn, operands)).trace(*invals).lower().compile()
    return compiled, current.undecided


def _tune_and_run(eqn: Any, invals: Sequence[Any]) -> list[Any]:
    compiled, undecided = _compiled(eqn, invals, {})
    decided: dict[str, int] = {}
    while undecided:
        key, call = next(iter(undecided.items()))
        times = [_time(_compiled(eqn, invals, {**decided, key: index})[0], invals)
                 for index in range(len(call.descriptions))]
        best = min(range(len(times)), key=times.__getitem__)
        decided[key] = best
        _choices.STORE.put(key, _choices.Choice(best, call.descriptions[best],
                                                tuple(t * 1e3 for t in times)))
        compiled, undecided = _compiled(eqn, invals, decided)
    return list(compiled(*invals))


def _time(compiled: Any, invals: Sequence[Any]) -> float:
    """Seconds per run of `compiled` on `invals`: the best of a few rounds of back-to-back runs,
    after one uncounted run that loads the kernels (and lets jaxlib tune any call undecided)."""
    jax.block_until_ready(compiled(*invals))
    start = time.perf_counter()
    jax.block_until_ready(compiled(*invals))
    once = time.perf_counter() - start
    runs = max(1, min(MAX_RUNS, int(TARGET_SECONDS / max(once, 1e-6))))
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(runs):
            outs = compiled(*invals)  # runs queue up on the device; only the last is waited for
        jax.block_until_ready(outs)
        best = min(best, (time.perf_counter() - start) / runs)
    return best
