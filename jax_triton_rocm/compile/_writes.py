"""What a compiled kernel reads and writes through each of its parameters, read from the IR
Triton made for that call (TTIR, or Gluon's TTGIR), each access's pointer traced back to the
parameters it may point into; docs/design.md, "What a kernel writes".
"""

from __future__ import annotations

import dataclasses
import inspect
import linecache
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

# What each op does through its first operand, the pointer.
_FIRST_POINTER = {
    **dict.fromkeys(("tt.store", "tt.descriptor_store", "tt.descriptor_scatter"), "store"),
    **dict.fromkeys(("tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_reduce"), "atomic"),
    **dict.fromkeys(("tt.load", "tt.descriptor_load", "tt.descriptor_gather", "tt.prefetch",
                     "ttg.async_copy_global_to_local", "amdgpu.buffer_load",
                     "amdgpu.buffer_load_to_local", "ttng.async_tma_copy_global_to_local",
                     "ttng.async_tma_gather", "ttng.async_tma_prefetch",
                     "tt.descriptor_prefetch"), "load")}
# Every pointer operand is written (the pointer is not the first operand).
_OTHER_WRITES = {"ttng.async_tma_copy_local_to_global": "store",
                 "ttng.async_tma_scatter": "store", "amdgpu.buffer_store": "store",
                 "ttng.async_tma_reduce": "atomic", "amdgpu.buffer_atomic_rmw": "atomic",
                 "amdgpu.buffer_atomic_cas": "atomic"}
# Ops whose results point where their pointer operands do.
_PASSING = {"tt.splat", "tt.addptr", "tt.broadcast", "tt.expand_dims", "tt.reshape", "tt.trans",
            "tt.cat", "tt.join", "tt.split", "tt.unsplat", "arith.select", "tt.make_tensor_ptr",
            "tt.advance", "tt.make_tensor_descriptor", "ttg.convert_layout", "tt.bitcast",
            "tt.gather"}
# Ops that move values between regions (their flows are `_Function.flows`), or call.
_PLUMBING = {"scf.for", "scf.if", "scf.while", "scf.yield", "scf.condition", "tt.call"}
_VALUE = re.compile(r"%[\w.$-]+(?:#\d+)?")
_RESULTS = re.compile(r"^((?:%[\w.$-]+(?::\d+)?)(?:, %[\w.$-]+)*) = ")
_OP = re.compile(r'^"?([a-z_]+\.[\w.]+)"?')
_ARG = re.compile(r"(%[\w.$-]+): ([^,{]*?)(?= loc\(| \{|,|\)$|\) ->|\) attributes)")
_FUNC = re.compile(r"tt\.func (?:public |private |nested )?@([\w.$-]+)\((.*?)\)(?: -> .*?)?"
                   r"(?: attributes \{.*\})? \{$")
_LOC_USE = re.compile(r" loc\((#loc\d*|\".*?\":\d+:\d+)\)\s*\{?$")
_LOC_DEF = re.compile(r"^(#loc\d*) = loc\((.*)\)$")
_SHOWN_CHARS = 70
_MOST_FRAMES = 16
_ASSIGNED = re.compile(r"[\w.\[\], ]+?\s*(?:[-+*/%&|^]|//|\*\*|<<|>>)?=(?!=)\s*")


@dataclasses.dataclass(frozen=True)
class Accesses:
    """What a kernel does through its parameters, by argument index of its IR function, each with
    where it does it first ("file.py:12: tl.store(...)"): sure `stores`, `atomics` and `loads`;
    `unsure`: arguments a pointer of unknown target may reach; `stray`: a write through a
    pointer traced to no argument (`tt.int_to_ptr`, inline asm), if any."""

    stores: Mapping[int, str]
    atomics: Mapping[int, str]
    loads: Mapping[int, str]
    unsure: Mapping[int, str]
    stray: str | None
    n_args: int


def of_launch(ir_text: str, bound: Any, renumbered: Mapping[tuple[str, int], Any] | None = None,
              jit_fn: Any = None) -> tuple[Accesses, dict[int, tuple[str, int]]] | None:
    """What the kernel compiled to `ir_text` does through each argument, and the buffer each
    pointer argument gets as `bound` lays the call out, by argument index: ("input"/"output",
    index), or `renumbered`'s for the source's (kind, index) (None: neither); None where either
    cannot be read. `jit_fn`: the kernel, read where the IR names a file that is gone."""
    accesses = read(ir_text, jit_fn)
    if accesses is None:
        return None
    sources = argument_buffers(bound.signature, bound.sources, accesses.n_args)
    if sources is None:
        return None
    buffers = {arg: ("output" if s.kind == "output" else "input", s.index) if renumbered is None
               else renumbered.get((s.kind, s.index)) for arg, s in sources.items()}
    return accesses, {arg: found for arg, found in buffers.items() if found is not None}


def read(ir_text: str, jit_fn: Any = None) -> Accesses | None:
    """The accesses of the one public function of `ir_text`, or None where the text is not read
    (no such function, an unbalanced region). `jit_fn`: the kernel compiled, whose lines are
    read for a location in a file of its file's name that is gone (`_moved`)."""
    module = _Module(ir_text, jit_fn)
    public = [f for f in module.functions.values() if f.public]
    return None if module.failed or len(public) != 1 else module.accesses(public[0].name, set())


@dataclasses.dataclass
class _Op:
    name: str
    results: list[str]
    operands: list[str]
    where: str
    callee: str | None = None


@dataclasses.dataclass
class _Function:
    name: str
    public: bool
    args: list[str]
    pointer_args: list[int]
    ops: list[_Op] = dataclasses.field(default_factory=list)
    flows: list[tuple[str, str]] = dataclasses.field(default_factory=list)  # (to, from)


class _Module:
    """The functions of one IR module as ops and value flows, parsed from its text."""

    def __init__(self, text: str, jit_fn: Any = None) -> None:
        self.failed = False
        self.jit_fn = jit_fn
        self.functions: dict[str, _Function] = {}
        self.memo: dict[str, Accesses | None] = {}
        lines = text.splitlines()
        self.locations = {found.group(1): found.group(2) for line in lines
                          if (found := _LOC_DEF.match(line.strip())) is not None}
        self.shown: dict[str, str] = {}
        self.frames: dict[str, list[tuple[str, int, int]]] = {}
        try:
            self._parse(lines)
        except (ValueError, IndexError, KeyError):
            self.failed = True

    def _parse(self, lines: list[str]) -> None:
        function: _Function | None = None
        frames: list[dict[str, Any]] = []  # the regions open: their op's kind and values
        for raw in lines:
            line = raw.strip()
            if not line or line.startswith("#loc") or line.startswith("//"):
                continue
            if (found := _FUNC.match(line)) is not None:
                args = _ARG.findall(found.group(2))
                function = _Function(
                    found.group(1), "tt.func public" in line, [a for a, _ in args],
                    [j for j, (_, t) in enumerate(args) if "!tt.ptr" in t or "tensordesc" in t])
                self.functions[function.name] = function
                frames.append({"kind": "func"})
                continue
            if function is None:
                continue
            if line.startswith("}"):
                if line.startswith(("} else {", "} do {")):
                    frames[-1]["region"] = frames[-1].get("region", 0) + 1
                    continue
                frames.pop()
                if not frames:
                    function = None
                continue
            if line.startswith("^"):  # a block's arguments: a while's after-region
                if frames and frames[-1]["kind"] == "scf.while" and frames[-1].get("region"):
                    frames[-1]["after"] = _VALUE.findall(line.split(")", 1)[0])
                continue
            self._op(function, frames, line)

    def _op(self, function: _Function, frames: list[dict[str, Any]], line: str) -> None:
        results: list[str] = []
        body = line
        if (found := _RESULTS.match(line)) is not None:
            body = line[found.end():]
            for result in found.group(1).split(", "):
                name, _, count = result.partition(":")
                results += [f"{name}#{k}" for k in range(int(count))] if count else [name]
        op = _OP.match(body)
        name = op.group(1) if op else body.split(" ", 1)[0]
        opens = body.rstrip().endswith("{")
        where = self._where(body)
        if name in ("scf.for", "scf.while"):
            # Each value the loop carries and its initial value; a for's results start as it.
            inits = (body.partition("iter_args(")[2] if name == "scf.for"
                     else body.split(")", 1)[0])
            pairs = re.findall(r"(%[\w.$-]+) = (%[\w.$-]+(?:#\d+)?)", inits)
            function.flows += pairs + ([(results[k], init) for k, (_, init) in enumerate(pairs)]
                                       if name == "scf.for" else [])
            frames.append({"kind": name, "results": results, "carried": [a for a, _ in pairs]})
            return
        operands = _VALUE.findall(_operand_text(body[len(name):] if op else body))
        if name in ("scf.yield", "scf.condition"):
            frame = frames[-1]
            values = operands[1:] if name == "scf.condition" else operands
            # Where they go: an if's or a for's results (and the for's next round), a while's
            # next round (yield), or its after-region and results (condition).
            places = {"scf.if": ("results",), "scf.for": ("results", "carried"),
                      "scf.while": ("carried",) if name == "scf.yield" else ("after", "results")}
            for place in places.get(frame["kind"], ()):
                function.flows += list(zip(frame.get(place, ()), values))
            return
        if opens:
            frames.append({"kind": name, "results": results})
        callee = re.match(r"tt\.call @([\w.$-]+)", body) if name == "tt.call" else None
        function.ops.append(_Op(name, results, operands, where, callee and callee.group(1)))

    def _where(self, body: str) -> str:
        """Where an op is in the kernel's source: the innermost frame with the caller's line
        after it for a helper's op ("file.py:7: tl.store(p, v) (called at file.py:21)")."""
        found = _LOC_USE.search(body)
        if found is None:
            return ""
        key = found.group(1)
        if key not in self.shown:
            frames = [f for f in self._frames(key, 0) if not f[0].startswith("<")]
            self.shown[key] = "" if not frames else _shown(frames, self.jit_fn)
        return self.shown[key]

    def _frames(self, key: str, depth: int) -> list[tuple[str, int, int]]:
        """(file, line, column) per frame of a location, the innermost first: each location
        resolved once, and at most `_MOST_FRAMES` (the text may come from a cache anyone
        could have written)."""
        if depth > _MOST_FRAMES:
            return []
        if key not in self.frames:
            self.frames[key] = self._resolved(key, depth)[:_MOST_FRAMES]
        return self.frames[key]

    def _resolved(self, key: str, depth: int) -> list[tuple[str, int, int]]:
        text = self.locations.get(key, key) if key.startswith("#") else key
        if (file_line := re.fullmatch(r'"(.*?)":(\d+):(\d+)', text)) is not None:
            return [(file_line.group(1), int(file_line.group(2)), int(file_line.group(3)))]
        if (named := re.fullmatch(r'".*?"\((#loc\d*)\)', text)) is not None:
            return self._frames(named.group(1), depth + 1)
        if (call := re.fullmatch(r"callsite\((#loc\d*) at (#loc\d*)\)", text)) is not None:
            return self._frames(call.group(1), depth + 1) + self._frames(call.group(2), depth + 1)
        if text.startswith("fused["):
            inner = re.findall(r"#loc\d*", text)
            return self._frames(inner[0], depth + 1) if inner else []
        return []

    def accesses(self, name: str, reading: set[str]) -> Accesses | None:
        """The accesses of function `name`, its calls to functions of the module read through
        (a recursive call makes its pointers unsure)."""
        if name in self.memo:
            return self.memo[name]
        function = self.functions[name]
        if (points := _points(function)) is None:
            return None
        found = _Found()
        for op in function.ops:
            pointed = [points.get(v, frozenset()) for v in op.operands]
            if (kind := _FIRST_POINTER.get(op.name)) is not None:
                found.access(kind, pointed[0] if pointed else frozenset(), op.where)
                found.escape(pointed[1:], op.where)
            elif op.name in _OTHER_WRITES:
                for targets in [p for p in pointed if p] or [frozenset()]:
                    found.access(_OTHER_WRITES[op.name], targets, op.where)
            elif op.name == "tt.call":
                inner = (None if op.callee is None or op.callee in reading
                         or op.callee not in self.functions
                         else self.accesses(op.callee, reading | {name}))
                found.call(inner, pointed, op.where)
            elif op.name not in _PASSING and op.name not in _PLUMBING:
                found.escape(pointed, op.where)  # handed where this reading does not follow
        self.memo[name] = accesses = found.accesses(len(function.args))
        return accesses


def _points(function: _Function) -> dict[str, frozenset[int]] | None:
    """The arguments each value of `function` may point into, loop-carried values followed
    until nothing changes (None where that does not settle)."""
    points: dict[str, frozenset[int]] = {
        function.args[j]: frozenset([j]) for j in function.pointer_args}
    flows = list(function.flows) + [(r, o) for op in function.ops if op.name in _PASSING
                                    for r in op.results for o in op.operands]
    for _ in range(len(flows) + 1):
        changed = False
        for to, source in flows:
            if (extra := points.get(source)) and not extra <= points.get(to, frozenset()):
                points[to] = points.get(to, frozenset()) | extra
                changed = True
        if not changed:
            return points
    return None


class _Found:
    """One function's accesses as they are found: each kind by argument, with where."""

    def __init__(self) -> None:
        self.kinds: dict[str, dict[int, str]] = {kind: {} for kind in (
            "store", "atomic", "load", "unsure")}
        self.stray: str | None = None

    def access(self, kind: str, targets: frozenset[int], where: str) -> None:
        """A write traced to one argument is sure, to several unsure, to none stray; a load
        of any is a load."""
        if len(targets) == 1 or (kind == "load" and targets):
            for target in targets:
                self.kinds[kind].setdefault(target, where)
        elif targets:
            self.escape([targets], where)
        elif kind != "load" and self.stray is None:
            self.stray = where

    def escape(self, pointed: list[frozenset[int]], where: str) -> None:
        for targets in pointed:
            for target in targets:
                self.kinds["unsure"].setdefault(target, where)

    def call(self, inner: Accesses | None, pointed: list[frozenset[int]], where: str) -> None:
        """A call to a function kept out of line: its accesses through each argument are the
        caller's through what it passes (all unsure where the callee is not read)."""
        if inner is None or inner.n_args != len(pointed):
            self.escape(pointed, where)
            return
        for j, targets in enumerate(pointed):
            for kind, seen in (("store", inner.stores), ("atomic", inner.atomics),
                               ("load", inner.loads)):
                if j in seen:
                    self.access(kind, targets, seen[j])
            if j in inner.unsure:
                self.escape([targets], inner.unsure[j])
        if inner.stray is not None and self.stray is None:
            self.stray = inner.stray

    def accesses(self, n_args: int) -> Accesses:
        kinds = self.kinds
        return Accesses(kinds["store"], kinds["atomic"], kinds["load"], kinds["unsure"],
                        self.stray, n_args)


def _operand_text(text: str) -> str:
    """An op's text without its types and location: where its operands are."""
    text = re.sub(r" loc\(.*$", "", text)
    depth = 0
    for k, char in enumerate(text):
        depth += char in "<([{"
        depth -= char in ">)]}"
        if char == ":" and depth == 0 and text[k - 1] == " ":
            return text[:k]
    return text


def _moved(jit_fn: Any, file: str, line: int) -> str | None:
    """The kernel's file now, where `file` (gone) has its name and `line` is one of the kernel's:
    Triton's cache, which may have been filled from another folder or environment, keys a kernel
    by its source and first line, so its lines there are the ones compiled."""
    try:
        lines, first = inspect.getsourcelines(jit_fn.fn)
        now = jit_fn.fn.__code__.co_filename
    except (AttributeError, OSError, TypeError):
        return None
    same = os.path.basename(now) == os.path.basename(file) and first <= line < first + len(lines)
    return now if same else None


def _loaded(file: str) -> bool:
    """Whether `file` is the source of a module this process imported."""
    return any(getattr(module, "__file__", None) == file for module in list(sys.modules.values()))


def _shown(frames: list[tuple[str, int, int]], jit_fn: Any = None) -> str:
    """"file.py:12: tl.store(...)": the innermost frame's file, line and statement, then the
    lines it is called at."""
    file, line, _ = frames[0]
    # The statement without what it assigns to (Triton's column may be inside the call). The IR
    # may come from anyone's cache: only a source Python holds (a kernel's, which Triton read, a
    # notebook's cell) or a module it loaded is read, never a file only the IR names.
    known = file in linecache.cache or _loaded(file)
    if not known and jit_fn is not None and (now := _moved(jit_fn, file, line)) is not None:
        file, known = now, True
    text = linecache.getline(file, line).strip() if known else ""
    if (target := _ASSIGNED.match(text)) is not None:
        text = text[target.end():]
    if len(text) > _SHOWN_CHARS:
        text = text[:_SHOWN_CHARS - 3] + "..."
    shown = f"{file.rsplit('/', 1)[-1]}:{line}" + (f": {text}" if text else "")
    if len(frames) > 1:
        shown += " (called at " + ", ".join(
            f"{f.rsplit('/', 1)[-1]}:{n}" for f, n, _ in frames[1:]) + ")"
    return shown


def argument_buffers(signature: Mapping[str, Any], sources: Any,
                     n_args: int) -> dict[int, Any] | None:
    """The source (`_layout.ArgSource`) of each IR argument that is a buffer's pointer or a
    descriptor's, by argument index, for a kernel laid out with `signature` and `sources`; None
    where the IR has another number of arguments (`n_args`) than the layout gives."""
    by_place = {(s.position, tuple(s.path)): s for s in sources}
    found: dict[int, Any] = {}
    count = 0

    def walk(position: int, path: tuple[int, ...], kind: Any) -> None:
        nonlocal count
        if isinstance(kind, tuple):
            for j, element in enumerate(kind):
                walk(position, (*path, j), element)
            return
        if kind == "constexpr":
            return
        source = by_place.get((position, path))
        if source is not None and source.kind in ("input", "output", "descriptor"):
            found[count] = source
        count += 1
        if isinstance(kind, str) and kind.startswith("tensordesc<"):
            count += 2 * len(kind.split("[", 1)[1].split("]", 1)[0].split(","))

    for position, kind in enumerate(signature.values()):
        walk(position, (), kind)
    return found if count == n_args else None
