"""The documentation's checkable claims, read from README.md and docs/ and checked against the
code.

Each claim sits after an HTML comment `<!-- readme-check: NAME -->`, on one page: what `info`
prints on a machine without a GPU (its lines, labels and sections; versions, paths and values that
differ between installs are left out of the comparison;
`python -m tests.support.docs_files refresh-info` writes it anew), the table of how scalars are
typed, and the command line's exit statuses. The
declared versions are checked against `pyproject.toml`.
"""

from __future__ import annotations

import os
import re
import sys

import numpy as np
import pytest

import jax_triton_rocm.__main__ as cli
from jax_triton_rocm.cli import _startup
from jax_triton_rocm.kernel import _spec
from tests.support import docs_files
from tests.support.docs_files import claim, info_shape, without_startup_notes
from tests.support.subprocess_utils import ROOT


def table_rows(text: str) -> list[list[str]]:
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.strip().splitlines()]
    return rows[2:]  # past the header and its rule


def test_only_the_start_up_section_is_set_aside():
    text = "Devices:\nJAX start-up:\n  cuda: skipped\nEnvironment:\n  X unset\n"
    assert without_startup_notes(text) == "Devices:\nEnvironment:\n  X unset\n"


def test_the_info_comparison_sees_a_changed_value_format():
    shown = claim("info-without-gpu")
    assert "module_image read: yes" in shown
    assert info_shape(shown) != info_shape(shown.replace("read: yes", "read: True"))


def _scalar_rows():
    return [(row[0], re.findall(r"`([^`]+)`", row[1]), row[2])
            for row in table_rows(claim("scalar-types"))]


@pytest.mark.parametrize("argument,examples,triton_type", _scalar_rows(),
                         ids=[row[0] for row in _scalar_rows()])
def test_scalars_are_typed_as_the_readme_table_says(argument, examples, triton_type):
    assert examples, argument
    for example in examples:
        value = eval(example, {"np": np})  # noqa: S307  (the page's own literals)
        if triton_type.startswith("refused"):
            with pytest.raises(TypeError):
                _spec.scalar(value, what="argument 0")
        else:
            expected = re.match(r"`(\w+)`", triton_type).group(1)
            assert _spec.scalar(value, what="argument 0").triton_type == expected, example


def test_the_scalar_table_covers_every_numpy_scalar_the_code_takes():
    shown = {e.split("(")[0].removeprefix("np.") for _, examples, _ in _scalar_rows()
             for e in examples}
    assert set(_spec._NUMPY_SCALARS) - {"bool"} <= shown


def test_the_exit_status_table_lists_the_command_lines_statuses():
    documented = {int(row[0]) for row in table_rows(claim("exit-statuses"))}
    in_code = {value for name, value in vars(_startup).items() if name.startswith("EXIT_")}
    assert documented == in_code == {0, 1, 2, 3, 4}
    assert ("(0 done, 1 the demo failed, 2 bad argument, 3 JAX could not start, 4 Triton "
            "missing or broken)") in " ".join(cli.__doc__.split())


# The lanes of .ci/run that install what pip picks by itself on each supported Python.
PIP_PICKS_LANES = ("py313", "newest", "py311")


def test_the_readme_says_which_jax_each_python_gets_as_ci_installs_it():
    with open(os.path.join(ROOT, ".ci", "run")) as ci:
        lanes = {name: (python, jax, triton.rsplit(".", 1)[0]) for name, python, jax, triton
                 in re.findall(r'^\s+"([\w-]+)\|([\d.]+)\|([\d.]+)\|([\d.]+)"$', ci.read(),
                               re.M)}
    picked = {(python, f"jax {jax}, Triton {triton}")
              for python, jax, triton in (lanes[name] for name in PIP_PICKS_LANES)}
    shown = {(python.strip(), row[1]) for row in table_rows(claim("python-jax"))
             for python in row[0].split(",")}
    assert shown == picked


def test_the_release_is_one_version_everywhere():
    """pyproject.toml's version is the package's `__version__`, what `info` reports, its sample
    in the docs, and the newest release in CHANGELOG.md, under `[Unreleased]`."""
    import tomllib

    import jax_triton_rocm
    from jax_triton_rocm.cli import _info

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as pyproject:
        version = tomllib.load(pyproject)["project"]["version"]
    with open(os.path.join(ROOT, "CHANGELOG.md")) as changelog:
        headings = re.findall(r"^## \[([^\]]+)\]( - \d{4}-\d{2}-\d{2})?$", changelog.read(), re.M)
    assert headings[0] == ("Unreleased", "") and headings[1][0] == version and headings[1][1]
    assert jax_triton_rocm.__version__ == version
    assert _info.collect(_startup.start())["jax_triton_rocm"] == version
    assert claim("info-without-gpu").splitlines()[0] == f"jax_triton_rocm {version}"


def test_the_declared_versions_are_pyprojects():
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as pyproject:
        project = tomllib.load(pyproject)["project"]
    bounds = {re.match(r"[\w-]+", d).group(0): d[len(re.match(r"[\w-]+", d).group(0)):]
              for d in project["dependencies"]}
    declared = re.search(r"Declared: Python >= ([\d.]+), jax/jaxlib `([^`]+)`, Triton "
                         r"`([^`]+)`", docs_files.all_text())
    assert declared, "the documentation has no 'Declared: ...' sentence"
    assert project["requires-python"] == ">=" + declared.group(1)
    assert bounds["jax"] == bounds["jaxlib"] == declared.group(2)
    assert bounds["triton"] == declared.group(3)
    assert sys.version_info >= (3, 11)
