"""What a kernel uses each of its parameters as, read from its source: a pointer or a scalar.

Messages need it where a call's arguments do not line up with the kernel's parameters: which
parameter did the user most likely forget (a scalar, where the outputs fill pointers), and which
parameter got a scalar where the kernel dereferences it, or a pointer where it counts with it
(`_kinds`). Triton itself says only "invalid operands of type pointer<fp32> and int32".

The reading is a guess from evidence, never a verdict on its own (`_kinds` asks Triton's front
end before it refuses anything):

- pointer: the parameter is what `tl.load`, `tl.store`, `tl.atomic_*`, `tl.make_block_ptr` or
  `tl.make_tensor_descriptor` dereference, plus offsets (`tl.load(x_ptr + offsets)`, also through
  local names: `ptrs = x_ptr + offsets`); it reads `.dtype.element_ty`; a `@triton.jit` function
  it is passed to dereferences it; or it is annotated with a pointer type;
- scalar: it is compared (`offsets < n`), multiplied, divided, shifted or negated, counted over
  (`range`, `tl.range`), given to `tl.cdiv`, `tl.full`, `min` or `max`, stored, used as a
  `mask=` or `other=`; a callee counts with it; or it is annotated with a scalar type.

A parameter with evidence of both kinds, or of neither, has no role.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import types
from collections.abc import Mapping
from typing import Any

from jax_triton_rocm.base import _state

_DEREFERENCE = {"load": "pointer", "store": "pointer", "make_block_ptr": "base",
                "make_tensor_descriptor": "base", "atomic_add": "pointer",
                "atomic_and": "pointer", "atomic_cas": "pointer", "atomic_max": "pointer",
                "atomic_min": "pointer", "atomic_or": "pointer", "atomic_xchg": "pointer",
                "atomic_xor": "pointer"}
_COUNTING = {"cdiv", "range", "static_range", "minimum", "maximum", "min", "max", "abs"}
_ARITHMETIC = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
               ast.BitAnd, ast.BitOr, ast.BitXor, ast.MatMult)
_SHOWN_CHARS = 70


@dataclasses.dataclass(frozen=True)
class Roles:
    """Parameters by role, each with where the kernel shows it ("file.py:12: tl.load(...)")."""

    pointers: Mapping[str, str]
    scalars: Mapping[str, str]

    def of(self, name: str) -> str | None:
        """"pointer", "scalar", or None where the kernel shows neither (or both)."""
        return "pointer" if name in self.pointers else "scalar" if name in self.scalars else None

    def shown(self, name: str) -> str:
        """Why `name` has its role: "the kernel dereferences it at file.py:12: ..." (or "counts
        with it")."""
        if name in self.pointers:
            return f"the kernel dereferences it at {self.pointers[name]}"
        return f"the kernel counts with it at {self.scalars[name]}"


def roles(jit_fn: Any, reading: set[int] | None = None) -> Roles:
    """The roles of `jit_fn`'s parameters, kept per function (`_state.PARAMETER_ROLES`, beside
    the function and its source, so that an edited kernel is read again); `reading` holds the
    functions being read, callers of this one (a call back into one of them adds nothing)."""
    entry = _state.PARAMETER_ROLES.get(id(jit_fn))
    if entry is not None and entry[0] is jit_fn and entry[1] == jit_fn.src:
        return entry[2]
    found = _read(jit_fn, set() if reading is None else reading)
    _state.PARAMETER_ROLES.put(id(jit_fn), (jit_fn, jit_fn.src, found))
    return found


def _annotated(param: Any) -> str | None:
    annotation = getattr(param, "annotation_type", "") or ""
    if not isinstance(annotation, str) or not annotation:
        return None
    return "pointer" if annotation.startswith("*") else "scalar"


def _read(jit_fn: Any, reading: set[int]) -> Roles:
    reading.add(id(jit_fn))
    with _state.triton_language_lock():  # `ast.parse` is not safe across threads on 3.11
        tree = jit_fn.parse()
    names = list(jit_fn.arg_names)
    reader = _Reader(jit_fn, names, reading)
    for _ in range(2):  # twice: a loop may assign a pointer that an earlier line dereferences
        reader.visit(tree.body[0])
    reading.discard(id(jit_fn))
    pointers, scalars = dict(reader.pointers), dict(reader.scalars)
    for param in jit_fn.params:
        role = _annotated(param)
        if role is not None:
            found = pointers if role == "pointer" else scalars
            found.setdefault(param.name, f"{reader.file}:{reader.first_line}: {param.name}: "
                                         f"{param.annotation}")
    both = set(pointers) & set(scalars)
    return Roles({k: v for k, v in pointers.items() if k not in both},
                 {k: v for k, v in scalars.items() if k not in both})


class _Reader(ast.NodeVisitor):
    """One walk of a kernel's body, gathering evidence for each parameter's role."""

    def __init__(self, jit_fn: Any, names: list[str], reading: set[int]) -> None:
        self.jit_fn = jit_fn
        self.params = set(names)
        self.scope = dict(jit_fn.__globals__)
        try:
            self.scope.update(inspect.getclosurevars(jit_fn.fn).nonlocals)
        except (TypeError, ValueError):
            pass
        self.reading = reading
        self.env: dict[str, set[str]] = {name: {name} for name in names}
        self.pointers: dict[str, str] = {}
        self.scalars: dict[str, str] = {}
        raw = getattr(jit_fn, "raw_src", None) or [""]
        offset = next((i for i, line in enumerate(raw) if line.strip().startswith("def ")), 0)
        self.first_line = getattr(jit_fn, "starting_line_number", 1) + offset
        self.file = jit_fn.fn.__code__.co_filename.rsplit("/", 1)[-1]

    def where(self, node: ast.AST) -> str:
        text = ast.unparse(node)
        if len(text) > _SHOWN_CHARS:
            text = text[:_SHOWN_CHARS - 3] + "..."
        return f"{self.file}:{self.first_line + node.lineno - 1}: {text}"

    def roots(self, node: ast.AST) -> set[str]:
        """The parameters `node` may be a pointer derived from (plus offsets)."""
        if isinstance(node, ast.Name):
            return self.env.get(node.id, set())
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.roots(node.left) or self.roots(node.right)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            return self.roots(node.left)
        if isinstance(node, ast.Subscript) and _broadcast(node.slice):
            return self.roots(node.value)
        if isinstance(node, ast.IfExp):
            return self.roots(node.body) | self.roots(node.orelse)
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "to":
                return self.roots(func.value)
            if self.function(func) in ("multiple_of", "max_contiguous", "advance") and node.args:
                return self.roots(node.args[0])
        return set()

    def function(self, func: ast.AST) -> Any:
        """A Triton language function's name, a builtin's name, a `@triton.jit` function, or
        None, for the callee `func`."""
        if isinstance(func, ast.Attribute):
            root = func.value
            while isinstance(root, ast.Attribute):
                root = root.value
            owner = self.scope.get(root.id) if isinstance(root, ast.Name) else None
            if isinstance(owner, types.ModuleType) and owner.__name__.startswith("triton"):
                return func.attr
            return None
        if not isinstance(func, ast.Name):
            return None
        value = self.scope.get(func.id)
        if value is None:
            return func.id if func.id in ("range", "min", "max", "abs") else None
        if callable(getattr(value, "parse", None)) and hasattr(value, "arg_names"):
            return value
        module = getattr(value, "__module__", "") or ""
        return func.id if module.startswith("triton") else None

    def param(self, node: ast.AST | None) -> str | None:
        return node.id if isinstance(node, ast.Name) and node.id in self.params else None

    def pointer(self, node: ast.AST, evidence: ast.AST) -> None:
        for name in self.roots(node):
            self.pointers.setdefault(name, self.where(evidence))

    def scalar(self, node: ast.AST | None, evidence: ast.AST) -> None:
        name = self.param(node)
        if name is not None:
            self.scalars.setdefault(name, self.where(evidence))

    def visit_Assign(self, node: ast.Assign) -> None:
        roots = self.roots(node.value)
        for target in node.targets:
            if isinstance(target, ast.Name) and roots:
                self.env.setdefault(target.id, set()).update(roots)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
            self.env.setdefault(node.target.id, set()).update(self.roots(node.value))
        if isinstance(node.op, _ARITHMETIC):
            self.scalar(node.value, node)
        self.generic_visit(node)

    def visit_Compare(self, node: ast.Compare) -> None:
        operands = [node.left, *node.comparators]
        if not any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in node.ops) \
                and not any(isinstance(x, ast.Constant) and x.value is None for x in operands):
            for operand in operands:
                self.scalar(operand, node)
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, _ARITHMETIC):
            self.scalar(node.left, node)
            self.scalar(node.right, node)
        self.generic_visit(node)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> None:
        if isinstance(node.op, (ast.USub, ast.Invert)):
            self.scalar(node.operand, node)
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr == "element_ty" and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "dtype":
            self.pointer(node.value.value, node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        function = self.function(node.func)
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if isinstance(function, str) and function in _DEREFERENCE:
            target = node.args[0] if node.args else keywords.get(_DEREFERENCE[function])
            if target is not None:
                self.pointer(target, node)
            for name in ("mask", "other"):
                self.scalar(keywords.get(name), node)
            if function == "store":
                self.scalar(node.args[1] if len(node.args) > 1 else keywords.get("value"), node)
        elif isinstance(function, str) and function in _COUNTING:
            for arg in [*node.args, *keywords.values()]:
                self.scalar(arg, node)
        elif function == "full":
            self.scalar(node.args[1] if len(node.args) > 1 else keywords.get("value"), node)
        elif function is not None and not isinstance(function, str):
            self.callee(function, node, keywords)
        self.generic_visit(node)

    def callee(self, callee: Any, node: ast.Call, keywords: dict[str, ast.AST]) -> None:
        """Evidence from a `@triton.jit` function the kernel calls, by its parameters' roles."""
        if id(callee) in self.reading:
            return
        inner = roles(callee, self.reading)
        bound = dict(zip(callee.arg_names, node.args))
        bound.update((k, v) for k, v in keywords.items() if k in callee.arg_names)
        for name, arg in bound.items():
            role = inner.of(name)
            if role == "pointer":
                self.pointer(arg, node)
            elif role == "scalar":
                self.scalar(arg, node)


def _broadcast(index: ast.AST) -> bool:
    """Whether a subscript only adds axes or slices (`ptrs[:, None]`), as pointer blocks are
    indexed; an integer index picks a tuple's element instead."""
    parts = index.elts if isinstance(index, ast.Tuple) else [index]
    return all(isinstance(p, ast.Slice) or (isinstance(p, ast.Constant) and p.value is None)
               for p in parts)

