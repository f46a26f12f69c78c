"""The documentation as a whole: the front page, the site's pages and nav, the API reference (one
block per public name, each with a docstring), the repository's address, the changelog, and the
site's strict build (where the `docs` extra is installed, as in CI's full lane).

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_docs_site.py.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from tests.support import docs_files
from tests.support.subprocess_utils import ROOT


def build_site(tmp_path, broken_link: str | None = None) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of the site as CI runs it (not -q), into `tmp_path`; with
    `broken_link`, of a copy of docs/ whose command-line page ends with that link."""
    if importlib.util.find_spec("mkdocs") is None:
        pytest.skip("mkdocs is not installed (pip install '.[docs]')")
    config = os.path.join(ROOT, "mkdocs.yml")
    if broken_link is not None:
        shutil.copytree(os.path.join(ROOT, "docs"), tmp_path / "docs")
        with open(tmp_path / "docs" / "cli.md", "a", encoding="utf-8") as page:
            page.write(f"\nSee [elsewhere]({broken_link}).\n")
        config = tmp_path / "mkdocs.yml"
        config.write_text(docs_files.read("mkdocs.yml")
                          .replace("docs_dir: docs", f"docs_dir: {tmp_path / 'docs'}")
                          .replace("paths: [.]", f"paths: [{ROOT}]")
                          .replace("!relative $config_dir/", f"{ROOT}/"))
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f",
                           os.fspath(config), "-d", os.fspath(tmp_path / "site")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site as CI builds it: (the build's result, its folder)."""
    folder = tmp_path_factory.mktemp("site")
    return build_site(folder), folder / "site"


@pytest.mark.process
def test_the_site_builds_strictly_without_a_warning(site):
    built, _ = site
    assert built.returncode == 0, built.stderr[-3000:]
    assert "WARNING" not in built.stderr, built.stderr[-3000:]


@pytest.mark.process
def test_the_api_page_shows_triton_calls_public_signature(site):
    built, folder = site
    assert built.returncode == 0, built.stderr[-3000:]
    page = re.sub(r"<[^>]+>", "", (folder / "api" / "index.html").read_text())
    assert "out_type: Any = &lt;not given&gt;, out_shape: Any = &lt;not given&gt;" in page
    assert "NOT_GIVEN" not in page and "_arguments" not in page


@pytest.mark.process
def test_the_api_pages_links_to_other_pages_work_on_the_site(site):
    built, folder = site
    assert built.returncode == 0, built.stderr[-3000:]
    page = (folder / "api" / "index.html").read_text()
    assert '<a href="../porting/">Porting from jax-triton</a>' in page
    assert "docs/porting.md" not in re.sub(r"<[^>]+>", "", page)


@pytest.mark.process
@pytest.mark.parametrize("link", ["missing.md", "routes.md#no-such-heading"])
def test_a_broken_link_fails_the_strict_build(tmp_path, link):
    built = build_site(tmp_path, broken_link=link)
    assert built.returncode != 0
    assert link.split("#")[-1] in built.stderr, built.stderr[-3000:]
