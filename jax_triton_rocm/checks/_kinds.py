"""What a kernel uses each parameter as (a pointer or a scalar), read from its source, and
arguments of the wrong kind for them, refused where Triton's front end fails on them too
(`check`; docs/design.md, "Parameter kinds")."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import types
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.base import _state
from jax_triton_rocm.kernel._spec import aval_text

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction


_DEREFERENCE = {"load": "pointer", "store": "pointer", "make_block_ptr": "base",
                "make_tensor_descriptor": "base", **{f"atomic_{op}": "pointer" for op in (
                    "add", "and", "cas", "max", "min", "or", "xchg", "xor")}}
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
        return "pointer" if name in self.pointers else "scalar" if name in self.scalars else None

    def shown(self, name: str) -> str:
        if name in self.pointers:
            return f"the kernel dereferences it at {self.pointers[name]}"
        return f"the kernel counts with it at {self.scalars[name]}"


def roles(jit_fn: JITFunction, reading: set[int] | None = None) -> Roles:
    """The roles of `jit_fn`'s parameters, kept in its record; `reading`: the functions being
    read (its callers)."""
    return _state.KERNEL_RECORDS.derived(
        jit_fn, "roles", lambda: _read(jit_fn, set() if reading is None else reading))


def _read(jit_fn: JITFunction, reading: set[int]) -> Roles:
    reading.add(id(jit_fn))
    with _state.LOCKS.triton_language:  # `ast.parse` is not safe across threads on 3.11
        tree = jit_fn.parse()
    scope = dict(jit_fn.__globals__)  # the names the body resolves
    try:
        scope.update(inspect.getclosurevars(jit_fn.fn).nonlocals)
    except (TypeError, ValueError):
        pass
    raw = getattr(jit_fn, "raw_src", None) or [""]
    offset = ([i for i, line in enumerate(raw) if line.strip().startswith("def ")] or [0])[0]
    names = list(jit_fn.arg_names)
    reader = _Reader(set(names), scope, reading,
                     jit_fn.fn.__code__.co_filename.rsplit("/", 1)[-1],
                     getattr(jit_fn, "starting_line_number", 1) + offset,
                     {name: {name} for name in names}, {}, {})
    for _ in range(2):  # twice: a loop may assign a pointer that an earlier line dereferences
        reader.visit(tree.body[0])
    reading.discard(id(jit_fn))
    pointers, scalars = dict(reader.pointers), dict(reader.scalars)
    for param in jit_fn.params:  # an annotation says the role too: `x: "*fp32"`, `n: tl.int32`
        annotation = getattr(param, "annotation_type", "") or ""
        if isinstance(annotation, str) and annotation:
            found = pointers if annotation.startswith("*") else scalars
            found.setdefault(param.name, f"{reader.file}:{reader.first_line}: {param.name}: "
                                         f"{param.annotation}")
    both = set(pointers) & set(scalars)
    return Roles({k: v for k, v in pointers.items() if k not in both},
                 {k: v for k, v in scalars.items() if k not in both})


@dataclasses.dataclass
class _Reader:
    """One walk of a kernel's body, gathering evidence for each parameter's role; `env`: the
    parameters each local may derive from."""

    params: set[str]
    scope: dict[str, Any]
    reading: set[int]
    file: str
    first_line: int
    env: dict[str, set[str]]
    scalars: dict[str, str]
    pointers: dict[str, str]

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
            return self.roots(node.body) | self.roots(node.orelse)
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

    def visit(self, node: ast.AST) -> None:
        """Reads `node`, then each node under it: one function, not `ast`'s dispatch per kind."""
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
            func, function = node.func, self.function(node.func)
            keywords = {k.arg: k.value for k in node.keywords if k.arg}
            if (isinstance(func, ast.Attribute) and func.attr in ("load", "store")
                    and self.roots(func.value)):  # `desc.load(...)`, `block.store(...)`
                self.access("pointer", func.value, node)
            if isinstance(function, str) and function in _DEREFERENCE:
                self.access("pointer", node.args[0] if node.args
                            else keywords.get(_DEREFERENCE[function]), node)
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
        for child in ast.iter_child_nodes(node):
            self.visit(child)

    def access(self, kind: str, node: ast.AST | None, evidence: ast.AST) -> None:
        """Records the parameters `node` derives from as pointers, or `node` itself as a
        scalar (`kind`)."""
        if kind == "scalar":
            recorded = self.scalars
            names = [node.id] if isinstance(node, ast.Name) and node.id in self.params else []
        else:
            recorded = self.pointers
            names = [] if node is None else self.roots(node)
        found = [name for name in names if name not in recorded]
        if not found:
            return
        text = ast.unparse(evidence)
        if len(text) > _SHOWN_CHARS:
            text = text[:_SHOWN_CHARS - 3] + "..."
        where = f"{self.file}:{self.first_line + evidence.lineno - 1}: {text}"
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
        """Evidence from a `@triton.jit` function the kernel calls (not again inside itself)."""
        if id(callee) in self.reading:
            return
        bound = dict(zip(callee.arg_names, node.args))
        bound.update((k, v) for k, v in keywords.items() if k in callee.arg_names)
        inner = roles(callee, self.reading)
        for name, arg in bound.items():
            if (role := inner.of(name)) is not None:
                self.access(role, arg, node)


def front_end(jit_fn: JITFunction, bound: Any, probes: Sequence[tuple[str, tuple]],
              ttir: bool = False) -> tuple[str | None, Exception | None]:
    """(the TTIR of Triton's first stage where `ttir`, else None; the `CompilationError` its
    front end raises, or None) for `jit_fn` as `bound` lays it out, built for the first of
    `probes` (backend, `GPUTarget` arguments) installed; (None, None) where none is."""
    from triton.backends import backends
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.compiler.errors import CompilationError
    from triton._C.libtriton import ir

    # Front-end type errors do not depend on the target; any installed backend's will do.
    probe = next((target for name, target in probes if name in backends), None)
    if probe is None:
        return None, None
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
            module = source.make_ir(target, options, backend.get_codegen_implementation(options),
                                    backend.get_module_map(), context)
        except CompilationError as err:
            return None, err
        if not ttir:
            return None, None
        stages: dict[str, Any] = {}
        backend.add_stages(stages, options, source.language)
        return str(stages["ttir"](module, {})), None


def check(jit_fn: JITFunction, bound: Any, in_avals: tuple, out_avals: tuple, kernel: str,
          probes: Sequence[tuple[str, tuple]], failed: Exception | None = None) -> None:
    """Raises TypeError where `bound` puts a value of the wrong kind on a top-level parameter
    and Triton's front end fails on it as laid out (its error chained). `failed`: the error a
    GPU route's compile of the call raised; only a `CompilationError` is looked into (a kernel
    that builds has nothing to refuse, so a lowering that compiles reads no kernel's source)."""
    from triton.compiler.errors import CompilationError

    if jit_fn.is_gluon() or (failed is not None and not isinstance(failed, CompilationError)):
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
    if not wrong or (err := front_end(jit_fn, bound, probes)[1]) is None:
        return
    raise TypeError(
        f"Kernel {kernel}: the call's arguments do not line up with its parameters: "
        f"{'; '.join(wrong)}. Triton's front end fails on the kernel as called (its error "
        f"follows). Give the kernel arrays where it takes pointers and scalars where it takes "
        f"values, in its parameter order: the positional arguments fill the parameters first, "
        f"the outputs fill the non-constexpr parameters left unfilled, in order, and a "
        f"parameter can be given by name (a keyword with out_type=, or operands={{...}}).") \
        from err

