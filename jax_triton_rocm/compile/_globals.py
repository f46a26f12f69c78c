"""What a kernel's call graph resolves to now, as the kernel key folds it in.

`graph_key` walks a `@triton.jit` function and the Triton functions it calls, as their names
resolve at this moment (a helper rebound in its module, `mod.helper = new_helper`, or a closure
variable rebound, is followed), and gives each function's own source and decorator settings and
the current values of the globals they read. Triton's `JITFunction.cache_key` cannot serve: it
is computed once per function, with the callees and global values of that moment, and never
again, so a caller keeps its first callee's key after the callee was rebound (see `graph_key`).

`stable_text` writes a constexpr or option value so that two texts are equal exactly when the
values compile alike.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from typing import Any

from jax_triton_rocm.base import _state


def stable_text(value: Any) -> str:
    """A text for a constexpr value that is equal exactly when the values compile alike; a
    Triton function by what its call graph resolves to now (`graph_digest`)."""
    if is_triton_function(value):
        return f"fn:{graph_digest(value)}"
    inner = getattr(value, "value", None)
    if type(value).__name__ == "constexpr":
        return f"constexpr:{stable_text(inner)}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({','.join(stable_text(v) for v in value)})"
    return f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"


def is_triton_function(value: Any) -> bool:
    """Whether `value` is a Triton function (`@triton.jit`, `@gluon.jit`, a constexpr function)."""
    from triton.runtime.jit import JITCallable

    return isinstance(value, JITCallable) and hasattr(value, "src")


def graph_key(jit_fn: Any) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """What decides the code of `jit_fn` and every Triton function it calls, resolved now.

    Returns (functions, globals): per function reached, `jit_fn` first and then its callees
    depth first as their names resolve now, a digest of its own source, first line and
    decorator settings (`noinline`, `debug`); and the globals they read, ((module:name, value
    text), ...) sorted. Equal in every process for the same sources and values.

    Cheap enough for every lowering: each function's references (the names and attribute paths
    it calls through, and the globals it reads) are found once per source
    (`_state.GLOBAL_REFERENCES`) and only looked up again here; a function is parsed again only
    when a callee name now resolves to another object.
    """
    functions: list[str] = []
    values: dict[tuple[str, str], str] = {}
    seen: set[int] = set()
    pending = [jit_fn]
    while pending:
        fn = pending.pop()
        fn = getattr(fn, "__func__", fn)  # a bound constexpr function: the function itself
        if id(fn) in seen or not is_triton_function(fn):
            continue
        seen.add(id(fn))
        entry = _references(fn)
        functions.append(entry.own)
        module = getattr(fn, "__module__", "") or ""
        for scope, name in entry.names:
            if name in scope:
                values[(module, name)] = stable_text(scope[name])
        pending.extend(reversed(entry.callees))
    return tuple(functions), tuple(sorted((f"{module}:{name}", text)
                                          for (module, name), text in values.items()))


def graph_digest(jit_fn: Any) -> str:
    """`graph_key` as one SHA-256 hex digest."""
    return hashlib.sha256(repr(graph_key(jit_fn)).encode()).hexdigest()


class _Entry:
    """What one function's source references, found by parsing it once.

    Attributes:
      fn, src: the function and the source it was parsed from (the entry is valid while both
        are the same objects and every path in `paths` still resolves to its recorded object).
      own: the digest of its own source, first line and decorator settings.
      settings: the decorator settings `own` covers, as read then.
      names: ((globals or nonlocals dict, name), ...) of the plain values it reads.
      paths: ((name, attribute, ...), object) per Triton function it calls through a name.
      callees: the Triton functions it calls, in the order found.
    """

    __slots__ = ("fn", "src", "own", "settings", "names", "paths", "callees")

    def __init__(self, fn: Any, names: tuple, paths: tuple, callees: tuple) -> None:
        self.fn, self.src, self.settings = fn, fn.src, _settings(fn)
        text = f"{type(fn).__name__}\n{fn.src}\n{getattr(fn, 'starting_line_number', '')}"
        self.own = hashlib.sha256(f"{text}\n{self.settings}".encode()).hexdigest()
        self.names, self.paths, self.callees = names, paths, callees

    def valid_for(self, fn: Any) -> bool:
        return (self.fn is fn and self.src is fn.src and self.settings == _settings(fn)
                and all(_resolve(fn, path) is obj for path, obj in self.paths))


def _settings(fn: Any) -> tuple:
    """The decorator settings of `fn` that change its code but not its source."""
    return getattr(fn, "noinline", None), getattr(fn, "debug", None)


def _scope(fn: Any) -> dict[str, Any]:
    """The names `fn`'s body resolves, as they are bound now: its closure's cells, then its
    module's globals (Python's own order for a function's free names)."""
    code_fn = getattr(fn, "fn", None)
    closure = getattr(code_fn, "__closure__", None) or ()
    cells = {}
    for name, cell in zip(code_fn.__code__.co_freevars if closure else (), closure):
        try:
            cells[name] = cell.cell_contents
        except ValueError:  # an empty cell
            pass
    return {**fn.__globals__, **cells} if cells else fn.__globals__


def _resolve(fn: Any, path: tuple[str, ...]) -> Any:
    """What the name and attributes `path` resolve to in `fn`'s scope now (None if nothing; a
    bound constexpr function as its function)."""
    value = _scope(fn).get(path[0])
    for attribute in path[1:]:
        value = getattr(value, attribute, None)
    return getattr(value, "__func__", value)


def _dotted(node: Any) -> tuple[str, ...] | None:
    """`a.b.c` in Python's AST as ("a", "b", "c"); None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return (node.id, *reversed(parts))


def _references(fn: Any) -> _Entry:
    """`fn`'s `_Entry`, from `_state.GLOBAL_REFERENCES` while still valid, else parsed anew."""
    entry = _state.GLOBAL_REFERENCES.get(id(fn))
    if entry is not None and entry.valid_for(fn):
        return entry
    from triton.runtime.jit import DependenciesFinder

    class ReferencesFinder(DependenciesFinder):
        """Triton's walk, with calls to other Triton functions collected, not merged (their
        recorded values would be the stale ones), and the names they are called through kept."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.callees: list[Any] = []
            self.paths: list[tuple[tuple[str, ...], Any]] = []

        def _update_hash(self, func: Any) -> None:
            self.callees.append(func)

        def _keep_path(self, node: Any, value: Any) -> Any:
            path, function = _dotted(node), getattr(value, "__func__", value)
            if path is not None and is_triton_function(function):
                self.paths.append((path, function))
            return value

        def visit_Name(self, node: Any) -> Any:
            return self._keep_path(node, super().visit_Name(node))

        def visit_Attribute(self, node: Any) -> Any:
            return self._keep_path(node, super().visit_Attribute(node))

    finder = ReferencesFinder(name=getattr(fn, "__name__", "?"), globals=fn.__globals__,
                              nonlocals=inspect.getclosurevars(fn.fn).nonlocals, src=fn.src)
    with _state.triton_language_lock():  # `ast.parse` is not safe across threads on 3.11
        finder.visit(fn.parse())
    names = tuple((scope, name) for (name, _), (_, scope) in finder.used_global_vals.items())
    entry = _Entry(fn, names, tuple(finder.paths), tuple(finder.callees))
    _state.GLOBAL_REFERENCES.put(id(fn), entry)  # the entry holds fn: its id is not reused
    return entry
