"""What a kernel uses each parameter as (a pointer or a scalar), read from its source, and
arguments of the wrong kind for them (`check`), where Triton says only "invalid operands of type
pointer<fp32> and int32". The reading is evidence, not a verdict: a call is refused only where
Triton's front end fails on it too. docs/design.md, "Parameter kinds".
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import operator
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.base import _state
from jax_triton_rocm.spec._spec import aval_text

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction


_DEREFERENCE = {"load": "pointer", "store": "pointer", "make_block_ptr": "base",
                "make_tensor_descriptor": "base", **{f"atomic_{op}": "pointer" for op in (
                    "add", "and", "cas", "max", "min", "or", "xchg", "xor")}}
# Calls that read or write memory through their pointer, or both (atomics).
_ACCESS = {"load": ("load",), "store": ("store",),
           **{name: ("load", "store") for name in _DEREFERENCE if name.startswith("atomic_")}}
# Calls a pointer passes through (`roots`), or that only read its type, not memory.
_POINTER_PASSING = {"make_block_ptr", "make_tensor_descriptor", "multiple_of",
                    "max_contiguous", "advance", "to", "static_assert", "static_print",
                    "device_print", "device_assert", "print", "range", "static_range",
                    "cdiv", "len", "isinstance"}
_COUNTING = {"cdiv", "range", "static_range", "minimum", "maximum", "min", "max", "abs"}
_ARITHMETIC = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
               ast.BitAnd, ast.BitOr, ast.BitXor, ast.MatMult)
_SHOWN_CHARS = 70
# What a test of an `if` may do to be read with the call's constexprs (`_Reader.static`).
_COMPARISONS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt,
                ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
                ast.Is: operator.is_, ast.IsNot: operator.is_not,
                ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_UNKNOWN = object()


@dataclasses.dataclass(frozen=True)
class Roles:
    """Parameters by role, each with where the kernel shows it ("file.py:12: tl.load(...)").
    `escapes`: handed where the reading cannot follow (their accesses are unknown); `deciding`:
    those whose values choose the branch Triton compiles (`if FLAG:`)."""

    pointers: Mapping[str, str]
    scalars: Mapping[str, str]
    loads: Mapping[str, str] = dataclasses.field(default_factory=dict)
    stores: Mapping[str, str] = dataclasses.field(default_factory=dict)
    escapes: Mapping[str, str] = dataclasses.field(default_factory=dict)
    deciding: frozenset[str] = frozenset()

    def of(self, name: str) -> str | None:
        return "pointer" if name in self.pointers else "scalar" if name in self.scalars else None

    def shown(self, name: str) -> str:
        if name in self.pointers:
            return f"the kernel dereferences it at {self.pointers[name]}"
        return f"the kernel counts with it at {self.scalars[name]}"


def roles(jit_fn: JITFunction, reading: set[int] | None = None,
          constexprs: Mapping[str, Any] | None = None, record: dict | None = None) -> Roles:
    """The roles of `jit_fn`'s parameters, kept in its record; `reading`: the functions being
    read (its callers). A branch that `constexprs` rule out is not read."""
    reading = set() if reading is None else reading
    if record is None:  # fetched once, for both readings
        record = _state.KERNEL_RECORDS.record(jit_fn)
    if (found := record.get("roles")) is None:
        found = record["roles"] = _read(jit_fn, reading, {})
    known = tuple(sorted([(k, v) for k, v in (constexprs or {}).items() if k in found.deciding]))
    if not known:
        return found
    try:
        hash(known)
    except TypeError:  # a value that cannot key the record: read each time
        return _read(jit_fn, reading, dict(known))
    if (chosen := record.get(("roles", known))) is None:
        chosen = record[("roles", known)] = _read(jit_fn, reading, dict(known))
    return chosen


def _read(jit_fn: JITFunction, reading: set[int], known: dict[str, Any]) -> Roles:
    reading.add(id(jit_fn))
    with _state.LOCKS.triton_language:  # `ast.parse` is not safe across threads on 3.11
        tree = jit_fn.parse()
    rebound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
               and isinstance(n.ctx, ast.Store)}  # a constexpr the body assigns is not the call's
    scope = dict(jit_fn.__globals__)  # the names the body resolves
    try:
        scope.update(inspect.getclosurevars(jit_fn.fn).nonlocals)
    except (TypeError, ValueError):
        pass
    raw = getattr(jit_fn, "raw_src", None) or [""]
    offset = ([i for i, line in enumerate(raw) if line.strip().startswith("def ")] or [0])[0]
    names = list(jit_fn.arg_names)
    reader = _Reader(set(names), {k: v for k, v in known.items() if k not in rebound}, scope,
                     reading, jit_fn.fn.__code__.co_filename.rsplit("/", 1)[-1],
                     getattr(jit_fn, "starting_line_number", 1) + offset,
                     {name: {name} for name in names}, set(), {},
                     {"pointer": {}, "load": {}, "store": {}, "escape": {}})
    for _ in range(2):  # twice: a loop may assign a pointer that an earlier line dereferences
        reader.visit(tree.body[0])
    reading.discard(id(jit_fn))
    pointers, scalars = dict(reader.accesses["pointer"]), dict(reader.scalars)
    for param in jit_fn.params:  # an annotation says the role too: `x: "*fp32"`, `n: tl.int32`
        annotation = getattr(param, "annotation_type", "") or ""
        if isinstance(annotation, str) and annotation:
            found = pointers if annotation.startswith("*") else scalars
            found.setdefault(param.name, f"{reader.file}:{reader.first_line}: {param.name}: "
                                         f"{param.annotation}")
    both = set(pointers) & set(scalars)
    return Roles({k: v for k, v in pointers.items() if k not in both},
                 {k: v for k, v in scalars.items() if k not in both},
                 dict(reader.accesses["load"]), dict(reader.accesses["store"]),
                 dict(reader.accesses["escape"]), frozenset(reader.deciding))


@dataclasses.dataclass
class _Reader:
    """One walk of a kernel's body, gathering evidence for each parameter's role; `known`: the
    constexprs that pick the branches read; `env`: the parameters each local may derive from."""

    params: set[str]
    known: dict[str, Any]
    scope: dict[str, Any]
    reading: set[int]
    file: str
    first_line: int
    env: dict[str, set[str]]
    deciding: set[str]
    scalars: dict[str, str]
    accesses: dict[str, dict[str, str]]

    def roots(self, node: ast.AST) -> set[str]:
        """The parameters `node` may be a pointer derived from."""
        if isinstance(node, ast.Name):
            return self.env.get(node.id, set())
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.roots(node.left) or self.roots(node.right)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
            return self.roots(node.left)
        if isinstance(node, ast.Subscript):
            # Only axes added or slices (`ptrs[:, None]`), as pointer blocks are indexed; an
            # integer index picks a tuple's element instead.
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if all(isinstance(p, ast.Slice) or (isinstance(p, ast.Constant) and p.value is None)
                   for p in parts):
                return self.roots(node.value)
        if isinstance(node, ast.IfExp):
            return set().union(*[self.roots(branch) for branch in self.branches(node)])
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "to":
                return self.roots(func.value)
            function = self.function(func)
            if function in ("multiple_of", "max_contiguous", "advance") and node.args:
                return self.roots(node.args[0])
            if function in ("make_block_ptr", "make_tensor_descriptor"):
                base = node.args[0] if node.args else next(
                    (k.value for k in node.keywords if k.arg == "base"), None)
                return self.roots(base) if base is not None else set()
        return set()

    def static(self, node: ast.AST) -> Any:
        """`node`'s value as Triton decides a constexpr `if`, or `_UNKNOWN`."""
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return self.known.get(node.id, _UNKNOWN)
        parts = ([node.operand] if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
                 else node.values if isinstance(node, ast.BoolOp)
                 else [node.left, *node.comparators] if isinstance(node, ast.Compare)
                 and all(type(op) in _COMPARISONS for op in node.ops) else None)
        values = [self.static(part) for part in parts or ()]
        if parts is None or any(value is _UNKNOWN for value in values):
            return _UNKNOWN
        try:
            if isinstance(node, ast.Compare):
                return all(_COMPARISONS[type(op)](a, b)
                           for op, a, b in zip(node.ops, values, values[1:]))
            return not values[0] if isinstance(node, ast.UnaryOp) else (
                all if isinstance(node.op, ast.And) else any)(values)
        except Exception:  # noqa: BLE001  (values that do not compare: read both branches)
            return _UNKNOWN

    def branches(self, node: ast.If | ast.IfExp) -> list[Any]:
        self.deciding.update(n.id for n in ast.walk(node.test)
                             if isinstance(n, ast.Name) and n.id in self.params)
        taken = self.static(node.test)
        try:
            return [node.body if taken else node.orelse] if taken is not _UNKNOWN else [
                node.body, node.orelse]
        except Exception:  # noqa: BLE001  (a value without truth: read both branches)
            return [node.body, node.orelse]

    def visit(self, node: ast.AST) -> None:
        """Reads `node`, then each node under it: one function, not `ast`'s dispatch per kind."""
        if isinstance(node, (ast.If, ast.IfExp)):
            self.visit(node.test)
            for branch in self.branches(node):
                for part in branch if isinstance(branch, list) else [branch]:
                    self.visit(part)
            return
        if isinstance(node, ast.Assign):
            roots = self.roots(node.value)
            for target in node.targets:
                if isinstance(target, ast.Name) and roots:
                    self.env.setdefault(target.id, set()).update(roots)
        elif isinstance(node, ast.AugAssign):
            if isinstance(node.target, ast.Name) and isinstance(node.op, ast.Add):
                self.env.setdefault(node.target.id, set()).update(self.roots(node.value))
            if isinstance(node.op, _ARITHMETIC):
                self.access("scalar", node.value, node)
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if not any([isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn))
                        for op in node.ops]) and not any(
                    [isinstance(x, ast.Constant) and x.value is None for x in operands]):
                for operand in operands:
                    self.access("scalar", operand, node)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
            self.access("scalar", node.left, node)
            self.access("scalar", node.right, node)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert)):
            self.access("scalar", node.operand, node)
        elif (isinstance(node, ast.Attribute) and node.attr == "element_ty"
              and isinstance(node.value, ast.Attribute) and node.value.attr == "dtype"):
            self.access("pointer", node.value.value, node)
        elif isinstance(node, ast.Call):
            # A pointer handed to a call that neither accesses memory through it nor passes
            # it on (`roots`) escapes; a callee's own accesses are read (`callee`).
            func, function = node.func, self.function(node.func)
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            args = [*node.args, *[k.value for k in node.keywords]]
            method = (func.attr if isinstance(func, ast.Attribute) and self.roots(func.value)
                      else None)
            if method in _ACCESS:  # `desc.load(...)`, `block.store(...)`
                for kind in _ACCESS[method]:
                    self.access(kind, func.value, node)
            elif method is not None and method not in _POINTER_PASSING:
                self.access("escape", func.value, node)
            if isinstance(function, str) and function in _ACCESS:
                target = node.args[0] if node.args else keywords.get("pointer")
                for kind in _ACCESS[function]:
                    self.access(kind, target, node)
                args = [arg for arg in args if arg is not target]
            if function is None or (isinstance(function, str)
                                    and function not in _POINTER_PASSING):
                for arg in args:
                    self.access("escape", arg, node)
            if isinstance(function, str) and function in _DEREFERENCE:
                target = node.args[0] if node.args else keywords.get(_DEREFERENCE[function])
                if target is not None:
                    self.access("pointer", target, node)
                for name in ("mask", "other"):
                    self.access("scalar", keywords.get(name), node)
                if function == "store":
                    self.access("scalar", node.args[1] if len(node.args) > 1
                                else keywords.get("value"), node)
            elif isinstance(function, str) and function in _COUNTING:
                for arg in [*node.args, *keywords.values()]:
                    self.access("scalar", arg, node)
            elif function == "full":
                self.access("scalar", node.args[1] if len(node.args) > 1
                            else keywords.get("value"), node)
            elif function is not None and not isinstance(function, str):
                self.callee(function, node, keywords)
        elif isinstance(node, ast.Return):
            self.access("escape", node.value, node)
        elif isinstance(node, ast.Tuple):
            for element in node.elts:
                self.access("escape", element, node)
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def access(self, kind: str, node: ast.AST | None, evidence: ast.AST) -> None:
        """Records the parameters `node` derives from under `kind` ("scalar": `node` itself)."""
        if kind == "scalar":
            recorded = self.scalars
            names = [node.id] if isinstance(node, ast.Name) and node.id in self.params else []
        else:
            recorded = self.accesses[kind]
            names = [] if node is None else self.roots(node)
        found = [name for name in names if name not in recorded]
        if not found:
            return
        text = ast.unparse(evidence)
        if len(text) > _SHOWN_CHARS:
            text = text[:_SHOWN_CHARS - 3] + "..."
        settled = ", ".join([f"{k}={v!r}" for k, v in self.known.items()])
        where = f"{self.file}:{self.first_line + evidence.lineno - 1}: {text}" + (
            f" (compiled with {settled})" if settled else "")
        for name in found:
            recorded[name] = where

    def function(self, func: ast.AST) -> Any:
        """A Triton function's or builtin's name, a `@triton.jit` function, or None."""
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

    def callee(self, callee: Any, node: ast.Call, keywords: dict[str, ast.AST]) -> None:
        """Evidence from a `@triton.jit` function the kernel calls; a recursion escapes."""
        bound = dict(zip(callee.arg_names, node.args))
        bound.update((k, v) for k, v in keywords.items() if k in callee.arg_names)
        if id(callee) in self.reading:
            for arg in [*node.args, *keywords.values()]:
                self.access("escape", arg, node)
            return
        deciding = {name: bound[name] for name in roles(callee, self.reading).deciding
                    if name in bound}  # the callee's branches, chosen by what the call passes
        self.deciding.update(self.params & {arg.id for arg in deciding.values()
                                            if isinstance(arg, ast.Name)})
        inner = roles(callee, self.reading, {name: value for name, arg in deciding.items()
                                             if (value := self.static(arg)) is not _UNKNOWN})
        for name, arg in bound.items():
            if (role := inner.of(name)) is not None:
                self.access(role, arg, node)
            for kind, found in (("load", inner.loads), ("store", inner.stores),
                                ("escape", inner.escapes)):
                if name in found:
                    self.access(kind, arg, node)
        for arg in node.args[len(callee.arg_names):]:  # more than it takes
            self.access("escape", arg, node)


def front_end_error(jit_fn: JITFunction, bound: Any,
                    probes: Sequence[tuple[str, tuple]]) -> Exception | None:
    """The `CompilationError` Triton's front end raises building `jit_fn` as `bound` lays it
    out, or None; on the first of `probes` (backend, `GPUTarget` arguments) installed."""
    from triton.backends import backends
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.compiler.errors import CompilationError
    from triton._C.libtriton import ir

    # Front-end type errors do not depend on the target; any installed backend's will do.
    probe = next((target for name, target in probes if name in backends), None)
    if probe is None:
        return None
    target = GPUTarget(*probe)
    backend = make_backend(target)
    # Saying whether to fuse: Triton 3.9 warns (TRITON_DEFAULT_FP_FUSION) when not told.
    options = backend.parse_options({"enable_fp_fusion": True})
    source = ASTSource(jit_fn, bound.signature, constexprs=bound.constexprs, attrs=bound.attrs)
    with _state.LOCKS.triton_language:  # the front end is not safe across threads
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        try:
            source.make_ir(target, options, backend.get_codegen_implementation(options),
                           backend.get_module_map(), context)
        except CompilationError as err:
            return err
    return None


def check(jit_fn: JITFunction, bound: Any, in_avals: tuple, out_avals: tuple, kernel: str,
          probes: Sequence[tuple[str, tuple]]) -> None:
    """Raises TypeError where `bound` puts a value of the wrong kind on a top-level parameter
    and Triton's front end fails on it as laid out (its error chained)."""
    if jit_fn.is_gluon():
        return
    found, names, wrong = roles(jit_fn), list(jit_fn.arg_names), []
    for source in bound.sources:
        name = names[source.position]
        role = found.of(name)
        if source.path or role is None:
            continue
        if source.kind == "scalar" and role == "pointer":
            wrong.append(f"parameter {name!r} gets the scalar {source.scalar.value!r} "
                         f"({source.scalar.triton_type}), but {found.shown(name)}")
        elif source.kind in ("input", "output") and role == "scalar":
            aval = (in_avals if source.kind == "input" else out_avals)[source.index]
            what = "operand" if source.kind == "input" else "output"
            wrong.append(f"parameter {name!r} gets {what} {source.index} ({aval_text(aval)}), "
                         f"a pointer, but {found.shown(name)}")
    if wrong and bound.zero_d_pointers:
        wrong.append(bound.zero_d_hint().rstrip("."))
    if not wrong or (err := front_end_error(jit_fn, bound, probes)) is None:
        return
    raise TypeError(
        f"Kernel {kernel}: the call's arguments do not line up with its parameters: "
        f"{'; '.join(wrong)}. Triton's front end fails on the kernel as called (its error "
        f"follows). Give the kernel arrays where it takes pointers and scalars where it takes "
        f"values, in its parameter order: the positional arguments fill the parameters first, "
        f"the outputs fill the non-constexpr parameters left unfilled, in order, and a "
        f"parameter can be given by name (a keyword with out_type=, or operands={{...}}).") \
        from err


def check_failed(err: Exception, jit_fn: JITFunction, bound: Any, in_avals: tuple,
                 out_avals: tuple, kernel: str, probes: Sequence[tuple[str, tuple]]) -> None:
    """`check`, where a GPU route's compile of the call failed with `err`: a kernel that builds
    has nothing `check` would refuse, so a lowering that compiles reads no kernel's source."""
    from triton.compiler.errors import CompilationError

    if isinstance(err, CompilationError):
        check(jit_fn, bound, in_avals, out_avals, kernel, probes)
