"""Only base/_env.py reads the environment, and only it spells the package's variables' names:
every other module calls a variable's reader there, or names the variable by its constant there
(`_env.ENV_...` at the use site, never an alias of it)."""

from __future__ import annotations

import ast
import pathlib

import pytest

import jax_triton_rocm
from jax_triton_rocm.base import _env

PACKAGE = pathlib.Path(jax_triton_rocm.__file__).parent
READER = pathlib.Path("base", "_env.py")
OS_MODULES = ("os", "posix", "nt")
ENVIRONMENT = ("environ", "environb", "getenv", "getenvb")
PREFIX = "JAX_TRITON_ROCM_"


def _modules() -> dict[pathlib.Path, ast.Module]:
    return {path.relative_to(PACKAGE): ast.parse(path.read_text(), str(path))
            for path in sorted(PACKAGE.rglob("*.py"))}


def environment_reads(tree: ast.Module) -> list[str]:
    """Each place `tree` touches the environment (`os.environ`, `os.environb`, `os.getenv`,
    through any name of the os module, `getattr` on it, or `from os import environ`)."""
    os_names = {alias.asname or alias.name for node in ast.walk(tree)
                if isinstance(node, ast.Import) for alias in node.names
                if alias.name in OS_MODULES}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in ENVIRONMENT
                and isinstance(node.value, ast.Name) and node.value.id in os_names):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module in OS_MODULES:
            found += [f"line {node.lineno}: from {node.module} import {alias.name}"
                      for alias in node.names if alias.name in ENVIRONMENT + ("*",)]
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "getattr" and len(node.args) >= 2
              and isinstance(node.args[0], ast.Name) and node.args[0].id in os_names
              and isinstance(node.args[1], ast.Constant) and node.args[1].value in ENVIRONMENT):
            found.append(f"line {node.lineno}: getattr({node.args[0].id}, "
                         f"{node.args[1].value!r})")
    return found


def variable_names(tree: ast.Module) -> list[str]:
    """Each string in `tree`'s code that spells a package variable (or the prefix); docstrings
    and other strings standing as statements are documentation, not code, and are left out."""
    documentation = {id(node.value) for node in ast.walk(tree)
                     if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)}
    return [f"line {node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and PREFIX in node.value and id(node) not in documentation]


def aliases_of_env(tree: ast.Module) -> list[str]:
    """Each top-level name bound to something of `_env` (`X = _env.X`, `from ..._env import X`)."""
    found = []
    for node in tree.body:
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Attribute)
                and isinstance(node.value.value, ast.Name) and node.value.value.id == "_env"):
            found.append(f"line {node.lineno}: = _env.{node.value.attr}")
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").endswith("base._env"):
            found.append(f"line {node.lineno}: from {node.module} import "
                         f"{', '.join(alias.name for alias in node.names)}")
    return found


def test_no_module_but_base_env_reads_the_environment():
    reads = {str(path): found for path, tree in _modules().items()
             if path != READER and (found := environment_reads(tree))}
    assert not reads, f"read the environment outside {READER} (call a reader there): {reads}"


def test_base_env_does_read_it():  # the check above looks at the right file
    assert environment_reads(_modules()[READER])


def test_no_module_but_base_env_spells_a_package_variable():
    spelled = {str(path): found for path, tree in _modules().items()
               if path != READER and (found := variable_names(tree))}
    assert not spelled, (f"name the package's variables by their constants in {READER} "
                         f"(`_env.ENV_...`): {spelled}")


def test_base_env_spells_each_package_variable_once_as_a_constant():
    tree = _modules()[READER]
    constants = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str) and PREFIX in node.value.value):
            [target] = node.targets
            constants[target.id] = node.value.value
    assert sorted(constants.values()) == sorted(set(constants.values()))
    assert set(constants.values()) == set(_env.PACKAGE_ENV_VARS) | {PREFIX}
    assert {getattr(_env, name) for name in constants} == set(constants.values())
    # Nowhere else in its code: messages name a variable by its constant.
    assert len(variable_names(tree)) == len(constants)


def test_no_module_aliases_what_base_env_defines():
    aliases = {str(path): found for path, tree in _modules().items()
               if (found := aliases_of_env(tree))}
    assert not aliases, f"use `_env.NAME` at the use site, not an alias: {aliases}"


def test_base_env_imports_nothing_of_the_package_above_base():
    imported = {node.module for node in ast.walk(_modules()[READER])
                if isinstance(node, ast.ImportFrom) and node.module}
    assert {module for module in imported if module.startswith("jax_triton_rocm")} <= {
        "jax_triton_rocm.base"}


@pytest.mark.parametrize("source", [
    "import os\nos.environ.get('X')",
    "import os\nx = os.environ['X']",
    "import os\nos.getenv('X')",
    "import os as system\nsystem.environb",
    "from os import environ",
    "from os import getenv as read",
    "import os\ngetattr(os, 'environ')",
    "import os\n'X' in os.environ",
])
def test_the_check_finds_each_way_of_reading_the_environment(source):
    assert environment_reads(ast.parse(source))


def test_the_check_leaves_other_uses_of_os_alone():
    assert not environment_reads(ast.parse("import os\nos.path.join('a', 'b')\nos.cpu_count()"))


def test_the_check_finds_a_variable_spelled_in_code_but_not_in_a_docstring():
    source = ('def f():\n    """Reads JAX_TRITON_ROCM_PREWARM."""\n'
              '    raise ValueError(f"JAX_TRITON_ROCM_PREWARM={1}")\n')
    assert [found.split(":")[0] for found in variable_names(ast.parse(source))] == ["line 3"]


def test_the_check_finds_an_alias():
    source = "from jax_triton_rocm.base import _env\nENV_PREWARM = _env.ENV_PREWARM\n"
    assert aliases_of_env(ast.parse(source)) == ["line 2: = _env.ENV_PREWARM"]
