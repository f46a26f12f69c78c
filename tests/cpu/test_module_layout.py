"""The package's modules: one topic each, found by a file name no other module has, and a module
docstring short enough to say what the module is for (the explanations live in docs/). The trace
of one call read top-down: tests/process/test_module_layout_processes.py. Test files: one name
each, and none imports from another."""

from __future__ import annotations

import ast
import collections
import pathlib
import re

import jax_triton_rocm

PACKAGE = pathlib.Path(jax_triton_rocm.__file__).parent
MAX_DOCSTRING_LINES = 20

def _modules() -> list[pathlib.Path]:
    return sorted(PACKAGE.rglob("*.py"))

def test_no_two_package_modules_share_a_file_name():
    by_name = collections.defaultdict(list)
    for path in _modules():
        if path.name != "__init__.py":
            by_name[path.name].append(str(path.relative_to(PACKAGE)))
    shared = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not shared, f"modules sharing a file name: {shared}"

def test_every_module_docstring_is_at_most_20_lines():
    long = {}
    for path in _modules():
        docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
        lines = len(docstring.splitlines()) if docstring else 0
        if lines > MAX_DOCSTRING_LINES:
            long[str(path.relative_to(PACKAGE))] = lines
    assert not long, (f"module docstrings over {MAX_DOCSTRING_LINES} lines (move the "
                      f"explanations to docs/): {long}")


def test_every_piece_of_state_listed_in_the_design_exists():
    import functools
    import importlib

    design = (PACKAGE.parent / "docs" / "design.md").read_text()
    section = design.split("### Process-wide state", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| `([\w.]+)` \| (.*?) \|$", section, re.M)
    assert len(rows) > 20, "docs/design.md, Process-wide state: the table of state is gone"
    missing = []
    for module, name, what in rows:
        assert what, (module, name)
        found = importlib.import_module(f"jax_triton_rocm.{module}")
        try:
            functools.reduce(getattr, name.split("."), found)
        except AttributeError:
            missing.append(f"{module}.{name}")
    assert not missing, f"listed in docs/design.md (Process-wide state) but not found: {missing}"


def _test_files() -> list[pathlib.Path]:
    tests = PACKAGE.parent / "tests"
    return sorted(path for folder in ("cpu", "gpu", "process")
                  for path in (tests / folder).glob("test_*.py"))


def test_no_two_test_files_share_a_name():
    by_name = collections.defaultdict(list)
    for path in _test_files():
        by_name[path.name].append(path.parent.name)
    shared = {name: folders for name, folders in by_name.items() if len(folders) > 1}
    assert not shared, (f"test files sharing a name (name a folder's file for its folder, "
                        f"test_..._gpu.py, test_..._processes.py): {shared}")


# An import statement, wherever it stands: in code, or in a child process's script.
IMPORT_FROM_A_TEST_FILE = re.compile(r"^\s*(?:from|import)\s+(tests\.(?:cpu|gpu|process)\S*)", re.M)


def test_no_module_of_the_tests_imports_from_a_test_file():
    # A helper two test files share lives in tests/support, so that each test file stands alone.
    tests = PACKAGE.parent / "tests"
    found = []
    for path in _test_files() + sorted((tests / "support").rglob("*.py")):
        found += [f"{path.relative_to(tests)}: {name}"
                  for name in IMPORT_FROM_A_TEST_FILE.findall(path.read_text(encoding="utf-8"))]
    assert not found, (f"imported from a test file (move what two files share to tests/support; "
                       f"a test that two folders run, as tests/support/every_route does): {found}")


def test_the_package_has_no_import_cycle():
    import importlib.util

    path = PACKAGE.parent / "tools" / "structure.py"
    spec = importlib.util.spec_from_file_location("structure", path)
    structure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(structure)
    figures = structure.static_figures(str(PACKAGE.parent))
    assert not figures["_cycles"], (f"import cycles (deferred imports included; '' is the "
                                    f"package's __init__): {figures['_cycles']}")


def test_one_module_owns_the_lowering_memos_and_no_route_imports_the_other():
    """The lowering shell (`routes/_lowering.py`) alone keys and fills the lowered-call memo and
    the plan memo; jaxlib's route and XLA's never import each other's modules."""
    memos, crossing = [], []
    for path in _modules():
        where = str(path.relative_to(PACKAGE))
        source = path.read_text()
        if where != "routes/_lowering.py" and ("LOWERED_CALLS.memo" in source
                                               or "_state.PLANS." in source):
            memos.append(where)
        other = {"routes/jaxlib": "jax_triton_rocm.routes.xla",
                 "routes/xla": "jax_triton_rocm.routes.jaxlib"}.get(str(path.parent.relative_to(
                     PACKAGE)))
        for node in ast.walk(ast.parse(source)):
            if other and isinstance(node, ast.ImportFrom) and (node.module or "").startswith(other):
                crossing.append(where)
    assert not memos, f"lowering memos used outside routes/_lowering.py: {memos}"
    assert not crossing, f"a route importing the other route's modules: {crossing}"
