"""The user's own functions (a grid, a heuristic, a perf_model...) called while launches are
planned, an error of theirs raised again naming the function, the values it was given, the fix."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any

from jax_triton_rocm.kernel._spec import aval_text

_SHOWN_CHARS = 60  # of one value's text in a message


def describe(fn: Any) -> str:
    """`fn`'s name, and where a Python function is defined."""
    fn = fn.func if isinstance(fn, functools.partial) else fn
    name = getattr(fn, "__qualname__", None) or repr(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
        return name
    return f"{name} at {os.path.basename(code.co_filename)}:{code.co_firstlineno}"


class Arguments(dict):
    """The mappings a function receives, by their names in its signature."""


def _shown(given: Mapping[str, Any]) -> str:
    """`given` as messages show it: "name=value, ..." in name order."""
    if isinstance(given, Arguments):
        return " and ".join(f"{part} ({_shown(values)})" for part, values in given.items())
    parts = []
    for name in sorted(given, key=str):
        value = given[name]
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            text = aval_text(value)
        else:
            text = repr(value)
            if len(text) > _SHOWN_CHARS:
                text = text[:_SHOWN_CHARS - 3] + "..."
        parts.append(f"{name}={text}")
    return ", ".join(parts) or "nothing"


def call(fn: Callable[..., Any], *args: Any, what: str, given: Mapping[str, Any], fix: str,
         **kwargs: Any) -> Any:
    """`fn(*args, **kwargs)`, with an error it raises named; `what`: its role ("grid(meta)"),
    `given`: the values it can read, `fix`: what it must do."""
    try:
        return fn(*args, **kwargs)
    except Exception as err:  # noqa: BLE001  (the user's code: anything it raises is named)
        key = err.args[0] if isinstance(err, KeyError) and len(err.args) == 1 else None
        if isinstance(key, str):
            parts = isinstance(given, Arguments)
            holders = [part for part, values in given.items() if key in values] if parts else []
            if not holders if parts else key not in given:
                raise ValueError(
                    f"{what} ({describe(fn)}) read {key!r}, which is not among the values it is "
                    f"given: {_shown(given)}. {fix}") from err
            if parts and len(holders) < len(given):
                raise ValueError(
                    f"{what} ({describe(fn)}) raised KeyError: {key!r}; it was given "
                    f"{_shown(given)}: {key!r} is in {' and '.join(holders)} only. {fix}"
                ) from err
        raise ValueError(f"{what} ({describe(fn)}) raised {type(err).__name__}: {err}; it was "
                         f"given {_shown(given)}. {fix}") from err
