"""The package's structure in figures: modules, lines, import floors and cycles, and the path of
one call from `triton_call` to its custom call. Runs on a CPU.

    python tools/structure.py                      this checkout
    python tools/structure.py --before /work/main  another checkout beside this one

Static figures read the source with `ast` (no import): every `import` of a package module
counts (the package itself, its `__init__`, included), at module level or inside a function (a
deferred import still closes a cycle), under `if TYPE_CHECKING:` too (a reader follows it). An import of a subpackage's module also runs the subpackage's
`__init__`, which counts only when it defines more than a docstring. Floors: the longest chain
of imports, a module that imports no package module being floor 1 (modules of one cycle count
as one floor). Imports up a layer: imports from a subpackage to one above it in `LAYERS` (or to
a top-level entry point). `importlib` loads: calls of `importlib.import_module` in the package.

The dynamic figures come from a child process (with the checkout first on `sys.path`) that
lowers a jitted add for sm_90 on the CPU under `target_arch`, with `sys.setprofile` on: the
package modules whose functions run, the calls that cross from one package module to
another, and the distinct package functions that run (comprehensions, lambdas and the
dataclasses' generated methods included; "of them written with def" leaves those out).
"cold" is the first lowering in the process (the kernel compiles); "warm" lowers the same
function again after `jax.clear_caches()` (the package's own caches kept); "new shape" then
lowers it for twice the elements (a new grid, the same kernel binary).

Per phase of one cold call in a fresh process (the trace: `jax.jit(add).trace`, `triton_call`
to `bind`; the lowering on jaxlib's route; the lowering on XLA's route), counting every call
event into the package (`sys.setprofile`; a generator resumed is a call too): the package
functions that run (distinct; comprehensions, lambdas and a dataclass's generated methods
included), the package files they are in (generated code counts as its module's file), and the
switches back to a file: a call into a package file the phase has already run in, from a frame
in another file (a package file, JAX, Triton or the standard library), whether or not the file
still has a frame on the stack. A top-down function that calls one step in each of eight files
scores 0; each call back into a file the phase has left, or out of it and back (a memo checked
inside the main path, a callback from `ast` or JAX), scores 1. What the installed jaxlib plugin
reads is found once before the phases (`backends._vendors`, cached), so the figures are the
same with or without the plugin. `--details` lists each file's switches; `--functions` lists each
phase's functions in the order they first run, with each switch back.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile

PACKAGE = "jax_triton_rocm"
# The layers, top down (docs/design.md, "Layout"); modules outside every subpackage are the entry points.
LAYERS = (("cli", "compat"), ("api",), ("routes",), ("checks",), ("backends",), ("compile",),
          ("plan",), ("kernel",), ("base",))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _modules(root: str) -> dict[str, str]:
    """Dotted module name (without the package) -> file, for every module of the package."""
    found = {}
    base = os.path.join(root, PACKAGE)
    for folder, _, files in os.walk(base):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                parts = os.path.relpath(path, base)[:-3].split(os.sep)
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                found[".".join(parts)] = path
    return found


def _substantial_init(path: str) -> bool:
    """Whether a subpackage's `__init__` runs more than a docstring."""
    with open(path) as file:
        body = ast.parse(file.read()).body
    return any(not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)) for s in body)


def _imports(name: str, path: str, modules: dict[str, str]) -> tuple[set[str], int]:
    """The package modules `name` imports, and its `importlib.import_module` calls."""
    with open(path) as file:
        tree = ast.parse(file.read())
    is_package = path.endswith("__init__.py")
    here = name.split(".") if name else []
    targets: set[str] = set()
    dynamic = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("import_module"):
            dynamic += 1
        if isinstance(node, ast.Import):
            dotted = [a.name for a in node.names]
            pairs = [(d, None) for d in dotted]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = here if is_package else here[:-1]
                anchor = anchor[:len(anchor) - node.level + 1]
                dotted_base = ".".join([PACKAGE, *anchor] + ([node.module] if node.module else []))
            else:
                dotted_base = node.module or ""
            pairs = [(dotted_base, a.name) for a in node.names]
        else:
            continue
        for base, item in pairs:
            if base != PACKAGE and not base.startswith(PACKAGE + "."):
                continue
            inner = base[len(PACKAGE) + 1:]
            if item is not None and (f"{inner}.{item}".strip(".") in modules):
                targets.add(f"{inner}.{item}".strip("."))
                continue
            if inner in modules and (inner == "" or not os.path.basename(
                    modules[inner]) == "__init__.py" or _substantial_init(modules[inner])):
                targets.add(inner)
    targets.discard(name)
    return targets, dynamic


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in graph[node]:
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for node in graph:
        if node not in index:
            visit(node)
    return found


def _floors(graph: dict[str, set[str]], cycles: list[list[str]]) -> dict[str, int]:
    """Each module's floor: 1 + the highest floor it imports (a cycle is one floor)."""
    group = {m: m for m in graph}
    for cycle in cycles:
        for member in cycle:
            group[member] = cycle[0]
    floors: dict[str, int] = {}

    def floor(g: str) -> int:
        if g not in floors:
            floors[g] = 0  # a cycle member reached again counts as this floor
            members = [m for m in graph if group[m] == g]
            deps = {group[d] for m in members for d in graph[m]} - {g}
            floors[g] = 1 + max((floor(d) for d in deps), default=0)
        return floors[g]

    return {m: floor(group[m]) for m in graph}


def _layer(module: str) -> int:
    """0 for a top-level module (an entry point), else 1 + the index of its subpackage's layer."""
    top = module.split(".")[0]
    return next((i + 1 for i, layer in enumerate(LAYERS) if top in layer), 0)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    """Imports from a layer to a layer above it ("a -> b"). A top-level module that imports no
    package module (`_version`) is a leaf that any layer may read."""
    return [f"{m} -> {d}" for m in graph for d in graph[m]
            if _layer(d) < _layer(m) and not ("." not in d and not graph[d])]


def static_figures(root: str) -> dict:
    modules = _modules(root)
    graph, dynamic, lines = {}, 0, 0
    for name, path in modules.items():
        graph[name], calls = _imports(name, path, modules)
        dynamic += calls
        with open(path) as file:
            lines += sum(1 for _ in file)
    cycles = _cycles(graph)
    floors = _floors(graph, cycles)
    top = max(floors.values())
    chain = [min(m for m in graph if floors[m] == top)]
    while floors[chain[-1]] > 1:
        lower = [d for d in graph[chain[-1]] if floors[d] < floors[chain[-1]]]
        if not lower:  # the rest of the floor is the cycle this module is in
            break
        chain.append(min(lower, key=lambda d: (-floors[d], d)))
    chain = [m or "__init__" for m in chain]
    return {
        "modules": len(modules),
        "subpackages": sum(1 for p in modules.values() if p.endswith("__init__.py")) - 1,
        "lines": lines,
        "largest module (lines)": max(sum(1 for _ in open(p)) for p in modules.values()),
        "import edges": sum(len(v) for v in graph.values()),
        "import floors": top,
        "import cycles": len(cycles),
        "imports up a layer": len(_upward(graph)) if any("." in m for m in graph) else "n/a",
        "importlib.import_module calls": dynamic,
        "_cycles": cycles,
        "_chain": " -> ".join(chain),
    }


# The child processes' common start: the package on `sys.path`, a plain add and its call (on
# XLA's route where ROUTE is "xla").
_ADD = r"""
import inspect, json, os, sys
sys.path.insert(0, ROOT)
import jax, jax.numpy as jnp, triton, triton.language as tl
import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors

# What the installed jaxlib plugin reads, found once per process (cached): the path to it
# depends on what is installed (the plugin, or only jaxlib), not on the package's call path.
_vendors.plugin_features("cuda"), _vendors.assumed_features("cuda")

@triton.jit
def add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + tl.load(y_ptr + offsets, mask=mask), mask=mask)

OPTIONS = {"xla_native": True} if ROUTE == "xla" else {}

def add(x, y):
    return jtr.triton_call(x, y, x.size, kernel=add_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, 256),), BLOCK=256, **OPTIONS)
"""

_TRACE = _ADD + r"""
x = jax.ShapeDtypeStruct((4096,), jnp.float32)

def traced():
    modules, crossings, functions, named = set(), 0, set(), set()
    def profile(frame, event, arg):
        nonlocal crossings
        if event != "call":
            return
        name = frame.f_globals.get("__name__", "")
        if not name.startswith("jax_triton_rocm") or frame.f_code.co_name == "<module>":
            return
        modules.add(name)
        code = frame.f_code
        functions.add((name, code.co_qualname, code.co_firstlineno))
        # A function written with `def` (no comprehension, lambda, class body or dataclass method).
        if (not code.co_name.startswith("<") and code.co_flags & inspect.CO_OPTIMIZED
                and "__create_fn__" not in code.co_qualname):
            named.add((name, code.co_qualname, code.co_firstlineno))
        caller = frame.f_back
        while caller is not None and caller.f_code.co_name.startswith("<"):
            caller = caller.f_back
        outer = caller.f_globals.get("__name__", "") if caller is not None else ""
        if outer.startswith("jax_triton_rocm") and outer != name:
            crossings += 1
    with jtr.target_arch(cuda="sm_90"):
        sys.setprofile(profile)
        try:
            lowered = jax.jit(add).trace(x, x).lower(lowering_platforms=("cuda",))
        finally:
            sys.setprofile(None)
    assert len(jtr.kernel_calls(lowered)) == 1
    return sorted(modules), crossings, len(functions), len(named)

cold = traced()
jax.clear_caches()
warm = traced()
x = jax.ShapeDtypeStruct((8192,), jnp.float32)
new_shape = traced()
print(json.dumps({"cold": cold, "warm": warm, "new shape": new_shape}))
"""


_PHASES = _ADD + r"""
PACKAGE_FOLDER = os.path.join(ROOT, "jax_triton_rocm") + os.sep

# The package file a frame runs in, or None; generated code (a dataclass's `__init__`) counts
# as its module's file.
def package_file(frame):
    path = frame.f_code.co_filename
    if path.startswith("<"):
        path = frame.f_globals.get("__file__") or path
    return path[len(PACKAGE_FOLDER):] if path.startswith(PACKAGE_FOLDER) else None

def measured(run):
    functions, named, seen, back, order = set(), set(), set(), [], []
    def profile(frame, event, arg):
        code = frame.f_code
        if event != "call" or code.co_name == "<module>":
            return
        here = package_file(frame)
        if here is None:
            return
        key = (here, code.co_qualname, code.co_firstlineno)
        if key not in functions:
            order.append(f"{here}:{code.co_firstlineno} {code.co_qualname}")
        functions.add(key)
        if (not code.co_name.startswith("<") and code.co_flags & inspect.CO_OPTIMIZED
                and not code.co_filename.startswith("<")):
            named.add(key)
        if here in seen and here != package_file(frame.f_back):
            back.append(here)
            order.append(f"  <- back to {here} ({code.co_qualname})")
        seen.add(here)
    sys.setprofile(profile)
    try:
        result = run()
    finally:
        sys.setprofile(None)
    return result, {"functions": len(functions), "def": len(named), "files": sorted(seen),
                    "back": back, "order": order}

x = jax.ShapeDtypeStruct((4096,), jnp.float32)
with jtr.target_arch(cuda="sm_90"):
    traced, trace = measured(lambda: jax.jit(add).trace(x, x))
    lowered, lower = measured(lambda: traced.lower(lowering_platforms=("cuda",)))
calls = jtr.kernel_calls(lowered)
assert len(calls) == 1, calls
print(json.dumps({"trace": trace, "lower": lower}))
"""

PHASES = ("trace", "lowering, jaxlib", "lowering, xla")


def phase_figures(root: str) -> dict:
    """Per phase of one cold call, on each route (a fresh process each): the package functions
    run, the package files they are in, and the switches back to a file already visited."""
    root = os.path.abspath(root)  # compared with the frames' absolute file names
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("JAX_TRITON_ROCM_XLA_NATIVE", None)
    found = {}
    with tempfile.TemporaryDirectory() as folder:
        for route in ("jaxlib", "xla"):
            script = os.path.join(folder, f"phases_{route}.py")
            with open(script, "w") as file:
                file.write(_PHASES.replace("ROOT", repr(root)).replace("ROUTE", repr(route)))
            result = subprocess.run([sys.executable, script], capture_output=True, text=True,
                                    env={**env, "TRITON_CACHE_DIR": os.path.join(folder, "tc")},
                                    cwd=root, timeout=600)
            if result.returncode:
                raise RuntimeError(f"phases in {root} failed:\n{result.stderr[-3000:]}")
            data = json.loads(result.stdout.strip().splitlines()[-1])
            if route == "jaxlib":
                found["trace"] = data["trace"]
            found[f"lowering, {route}"] = data["lower"]
    figures = {}
    for phase, data in found.items():
        if not data["functions"]:
            raise RuntimeError(f"{phase} in {root} ran no function of the package's files")
        figures[f"{phase}: functions"] = data["functions"]
        figures[f"{phase}:   of them written with def"] = data["def"]
        figures[f"{phase}: files"] = len(data["files"])
        figures[f"{phase}: switches back to a file"] = len(data["back"])
        figures[f"_{phase} files"] = data["files"]
        figures[f"_{phase} back"] = data["back"]
        figures[f"_{phase} order"] = data["order"]
    return figures


def dynamic_figures(root: str) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "trace_one_call.py")  # Triton reads kernels from files
        with open(script, "w") as file:
            file.write(_TRACE.replace("ROOT", repr(root)).replace("ROUTE", repr("jaxlib")))
        result = subprocess.run([sys.executable, script], capture_output=True, text=True,
                                env=env, cwd=root, timeout=600)
    if result.returncode:
        raise RuntimeError(f"tracing in {root} failed:\n{result.stderr[-3000:]}")
    data = json.loads(result.stdout.strip().splitlines()[-1])
    return {
        "modules a cold call runs in": len(data["cold"][0]),
        "cross-module calls, cold": data["cold"][1],
        "functions a cold call runs": data["cold"][2],
        "  of them written with def, cold": data["cold"][3],
        "modules a warm call runs in": len(data["warm"][0]),
        "cross-module calls, warm": data["warm"][1],
        "functions a warm call runs": data["warm"][2],
        "modules a new-shape call runs in": len(data["new shape"][0]),
        "cross-module calls, new shape": data["new shape"][1],
        "functions a new-shape call runs": data["new shape"][2],
        "  of them written with def, new shape": data["new shape"][3],
        "_cold modules": data["cold"][0],
        "_warm modules": data["warm"][0],
        "_new-shape modules": data["new shape"][0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="another checkout to measure beside this one")
    parser.add_argument("--details", action="store_true", help="cycles, chain, modules run")
    parser.add_argument("--functions", action="store_true",
                        help="each phase's functions in the order first run, and each switch back")
    args = parser.parse_args()
    roots = [("before", args.before)] if args.before else []
    roots.append(("this checkout", ROOT))
    figures = {label: {**static_figures(root), **dynamic_figures(root), **phase_figures(root)}
               for label, root in roots}
    keys = [k for k in figures[roots[-1][0]] if not k.startswith("_")]
    width = max(map(len, keys))
    print(f"{'':{width}}  " + "  ".join(f"{label:>14}" for label, _ in roots))
    for key in keys:
        print(f"{key:{width}}  " + "  ".join(f"{figures[label][key]:>14}" for label, _ in roots))
    if args.details:
        for label, _ in roots:
            print(f"\n[{label}] longest chain: {figures[label]['_chain']}")
            for cycle in figures[label]["_cycles"]:
                print(f"[{label}] cycle: {' -> '.join(cycle)}")
            print(f"[{label}] modules a cold call runs in: "
                  f"{', '.join(figures[label]['_cold modules'])}")
            print(f"[{label}] modules a warm call runs in: "
                  f"{', '.join(figures[label]['_warm modules'])}")
            print(f"[{label}] modules a new-shape call runs in: "
                  f"{', '.join(figures[label]['_new-shape modules'])}")
            for phase in PHASES:
                print(f"[{label}] {phase} ran in: {', '.join(figures[label][f'_{phase} files'])}")
                back = figures[label][f"_{phase} back"]
                counts = ", ".join(f"{f} {back.count(f)}" for f in sorted(set(back)))
                print(f"[{label}] {phase} switched back to: {counts or '-'}")
    if args.functions:
        for label, _ in roots:
            for phase in PHASES:
                print(f"\n[{label}] {phase}, in the order first run:")
                print("\n".join(figures[label][f"_{phase} order"]))


if __name__ == "__main__":
    main()
