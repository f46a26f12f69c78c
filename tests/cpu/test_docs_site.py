"""The documentation as a whole: the front page, the site's pages and nav, the API reference (one
block per public name, each with a docstring), the repository's address, the changelog, and the
site's strict build (where the `docs` extra is installed, as in CI's full lane).
"""

import ast
import inspect
import os
import re
import tomllib

import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm import _version
from tests.support import docs_files
from tests.support.subprocess_utils import ROOT

PACKAGE = os.path.join(ROOT, "jax_triton_rocm")


def _pyproject() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as file:
        return tomllib.load(file)


def test_the_readme_is_a_front_page_of_at_most_400_lines():
    assert docs_files.read("README.md").count("\n") <= 400


def test_the_nav_lists_every_page_of_the_site_once():
    nav = re.findall(r"^\s+- [^:]+: (\S+\.md)$", docs_files.read("mkdocs.yml"), re.M)
    pages = [path.removeprefix("docs/") for path in docs_files.doc_files()[1:]]
    assert sorted(nav) == sorted(pages)


# The package's public submodules, each documented as a module of its own.
PUBLIC_MODULES = ["compat"]


def test_the_api_page_has_one_block_per_public_name():
    blocks = re.findall(r"^::: jax_triton_rocm\.(\w+)$", docs_files.read("docs/api.md"), re.M)
    assert sorted(blocks) == sorted(jtr.__all__ + PUBLIC_MODULES)


def _defining_module(name: str) -> str:
    """The package module (a path) that assigns `name` at its top level."""
    for folder, _, files in os.walk(PACKAGE):
        for file in files:
            if file.endswith(".py"):
                path = os.path.join(folder, file)
                with open(path) as source:
                    if re.search(rf"^{re.escape(name)}\b[^=\n]*=", source.read(), re.M):
                        return path
    raise AssertionError(f"no module of the package assigns {name}")


def attribute_docstring(name: str) -> str | None:
    """The string literal right after the top-level assignment of `name` (an attribute
    docstring, which the API reference renders), or None."""
    with open(_defining_module(name)) as source:
        body = ast.parse(source.read()).body
    for statement, following in zip(body, body[1:]):
        targets = (statement.targets if isinstance(statement, ast.Assign)
                   else [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            if (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
                    and isinstance(following.value.value, str)):
                return following.value.value
    return None


@pytest.mark.parametrize("name", sorted(jtr.__all__))
def test_every_public_name_has_a_docstring_of_its_own(name):
    value = getattr(jtr, name)
    if inspect.isfunction(value) or inspect.isclass(value):
        doc = value.__dict__.get("__doc__") if inspect.isclass(value) else value.__doc__
    else:  # a value: its type's docstring is not its own
        doc = attribute_docstring(name)
    assert doc and len(doc.strip()) > 20, f"jax_triton_rocm.{name} has no docstring"


def test_the_docstring_check_sees_a_value_without_one():
    assert attribute_docstring("ENV_KERNEL_CACHE_SIZE") is None


def test_the_readme_public_api_table_lists_every_public_name():
    readme = docs_files.read("README.md")
    table = readme.split("## Public API", 1)[1]
    names = set(re.findall(r"^\| `(\w+)", table, re.M))
    assert names == set(jtr.__all__)


def test_the_repository_url_is_the_same_everywhere():
    url = _pyproject()["project"]["urls"]["Repository"]
    assert url == "https://github.com/jax-triton-rocm/jax_triton_rocm"
    clones = re.findall(r"^git clone (\S+)$", docs_files.all_text(), re.M)
    assert clones and set(clones) == {url}
    assert re.search(r"^repo_url: (\S+)$", docs_files.read("mkdocs.yml"), re.M).group(1) == url


def test_the_docs_extra_pins_mkdocs_and_its_plugins():
    docs = _pyproject()["project"]["optional-dependencies"]["docs"]
    assert {re.match(r"[\w-]+", d).group(0) for d in docs} >= {
        "mkdocs", "mkdocs-material", "mkdocstrings"}
    assert all(re.fullmatch(r"[\w\[\]-]+==[\d.]+", d) for d in docs), docs


def test_the_changelog_has_unreleased_above_the_current_release():
    with open(os.path.join(ROOT, "CHANGELOG.md")) as file:
        headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d{2}-\d{2}))?$", file.read(), re.M)
    assert headings[0] == ("Unreleased", "")
    version, date = headings[1]
    assert version == _version.__version__ == _pyproject()["project"]["version"] and date


def test_the_testing_page_names_the_pinned_docs_tools():
    pins = dict(d.replace("[python]", "").split("==")
                for d in _pyproject()["project"]["optional-dependencies"]["docs"])
    page = " ".join(docs_files.read("docs/testing.md").split("## The documentation site")[1]
                    .split("\n## ")[0].split())
    named = dict(re.findall(r"([a-z][\w-]+) (\d+(?:\.\d+)+)", page))
    assert named == pins


@pytest.mark.parametrize("name", sorted(jtr.__all__))
def test_public_docstrings_link_pages_instead_of_naming_their_files(name):
    doc = inspect.getdoc(getattr(jtr, name)) or ""
    assert not re.findall(r"(?<!\]\()docs/[\w-]+\.md", doc), doc


def test_clear_caches_docstring_names_no_internal_name():
    assert not re.search(r"\bCACHES\b|on_clear|_state", jtr.clear_caches.__doc__)


def test_the_sentinel_is_shown_in_signatures_as_it_prints():
    pytest.importorskip("griffe", reason="griffe comes with the docs extra")
    from jax_triton_rocm.checks import _arguments
    from tools import griffe_not_given

    assert griffe_not_given.SHOWN == repr(_arguments.NOT_GIVEN) == "<not given>"
    assert griffe_not_given.SENTINEL_NAME in dir(_arguments)
