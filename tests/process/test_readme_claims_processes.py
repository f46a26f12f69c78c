"""The documentation's checkable claims, read from README.md and docs/ and checked against the
code.

Each claim sits after an HTML comment `<!-- readme-check: NAME -->`, on one page: what `info`
prints on a machine without a GPU (its lines, labels and sections; versions, paths and values that
differ between installs are left out of the comparison;
`python -m tests.support.docs_files refresh-info` writes it anew), the table of how scalars are
typed, and the command line's exit statuses. The
declared versions are checked against `pyproject.toml`.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_readme_claims.py.
"""

from __future__ import annotations

import re

import pytest

from tests.support import docs_files
from tests.support.docs_files import claim, info_shape
from tests.support.subprocess_utils import WITHOUT_GPU_PLUGINS, run_cli


@pytest.mark.process
def test_info_prints_what_the_readme_shows_on_a_machine_without_a_gpu():
    assert info_shape(docs_files.info_without_gpu()) == info_shape(claim("info-without-gpu"))


@pytest.mark.process
def test_info_marks_a_refused_variable_as_the_page_shows():
    shown = claim("invalid-variable-in-info").strip("\n")
    name, value = re.match(r"\s+(\w+)='([^']*)'", shown).groups()
    result = run_cli("info", prelude=WITHOUT_GPU_PLUGINS, env={name: value})
    assert shown in result.stdout.splitlines(), result.stdout[-3000:]
