"""The values a kernel key folds in as text: constexprs, options and the globals a kernel reads.

`stable_text` writes a value so that two texts are equal exactly when the values compile alike;
`global_values` finds the globals a kernel and the Triton functions it calls read, and writes
their current values (Triton's own record of them goes stale: see `global_values`).
"""

from __future__ import annotations

import inspect
from typing import Any

from jax_triton_rocm.base import _state


def stable_text(value: Any) -> str:
    """A text for a constexpr value that is equal exactly when the values compile alike."""
    cache_key = getattr(value, "cache_key", None)
    if isinstance(cache_key, str):
        return f"fn:{cache_key}"
    inner = getattr(value, "value", None)
    if type(value).__name__ == "constexpr":
        return f"constexpr:{stable_text(inner)}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({','.join(stable_text(v) for v in value)})"
    return f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"


def global_values(jit_fn: Any) -> tuple[tuple[str, str], ...]:
    """The globals `jit_fn` and the Triton functions it calls read, with their current values.

    Triton records these (`JITFunction.used_global_vals`) only the first time it hashes a
    function, folds the values of that moment into `cache_key` and never updates them (its own
    launcher refuses to run once one changed; it does not recompile). So the same walk
    (Triton's `DependenciesFinder`) is run here on each function of the call tree, reading the
    values as they are now: a rebound global gives a new kernel key, and, through the source's
    hash (`_with_globals_in_hash`), a new entry in Triton's on-disk cache.

    Returns:
      ((module:name, value text), ...), sorted; the same in every process for the same values.
    """
    values: dict[tuple[str, str], str] = {}
    seen: set[int] = set()
    pending = [jit_fn]
    while pending:
        fn = pending.pop()
        if id(fn) in seen or not callable(getattr(fn, "parse", None)):
            continue
        seen.add(id(fn))
        names, callees = _global_references(fn)
        module = getattr(fn, "__module__", "") or ""
        for scope, name in names:
            if name in scope:
                values[(module, name)] = stable_text(scope[name])
        pending.extend(callees)
    return tuple(sorted((f"{module}:{name}", text) for (module, name), text in values.items()))


def _global_references(fn: Any) -> tuple[tuple, tuple]:
    """((globals dict, name), ...) that `fn` reads and the Triton functions it calls.

    Finding them parses the source, too slow for every lowering, so they are kept per function
    (`_state.GLOBAL_REFERENCES`, with the function, so that its id is not reused); their values
    are read afresh every time.
    """
    entry = _state.GLOBAL_REFERENCES.get(id(fn))
    if entry is not None and entry[0] is fn and entry[1] == fn.src:
        return entry[2], entry[3]
    from triton.runtime.jit import DependenciesFinder

    class GlobalsFinder(DependenciesFinder):
        """Triton's walk, with calls to other Triton functions collected, not merged: their
        recorded values would be the stale ones."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.callees: list[Any] = []

        def _update_hash(self, func: Any) -> None:
            self.callees.append(func)

    finder = GlobalsFinder(name=getattr(fn, "__name__", "?"), globals=fn.__globals__,
                           nonlocals=inspect.getclosurevars(fn.fn).nonlocals, src=fn.src)
    with _state.triton_language_lock():  # `ast.parse` is not safe across threads on 3.11
        finder.visit(fn.parse())
    names = tuple((scope, name) for (name, _), (_, scope) in finder.used_global_vals.items())
    _state.GLOBAL_REFERENCES.put(id(fn), (fn, fn.src, names, tuple(finder.callees)))
    return names, tuple(finder.callees)

