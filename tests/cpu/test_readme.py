"""Every ```python block of README.md and of the pages of docs/ runs as written (how a block says
how it runs: tests/support/readme_blocks.py). Also: the examples teach the public API."""

import json
import os
import re

import pytest

from tests.support import docs_files
from tests.support.readme_blocks import (BLOCKS, CPU_BLOCKS, GPU_BLOCKS, Block, block_params,
                                         run_block)
from tests.support.subprocess_utils import ROOT


def test_the_readme_has_blocks_of_both_kinds():
    assert CPU_BLOCKS and GPU_BLOCKS
    assert any(b.page == "README.md" and b.prints for b in CPU_BLOCKS)


def test_the_readme_calls_triton_call_within_its_first_80_lines():
    # A reader meets the first example before the page's first screenful of figures ends.
    first = next(b for b in BLOCKS if b.page == "README.md" and "triton_call(" in b.code)
    call_line = first.line + first.code[:first.code.index("triton_call(")].count("\n")
    assert call_line <= 80, f"README.md's first triton_call example calls it at line {call_line}"


def test_every_after_names_an_earlier_block():
    seen = set()
    for block in BLOCKS:
        assert block.after is None or (block.page, block.after) in seen, block.where
        seen.add((block.page, block.name))


def test_a_block_that_prints_something_else_fails(tmp_path, interpreter):
    block = Block(page="README.md", line=0, code="print('other')\n", prints="shown\n")
    with pytest.raises(AssertionError, match="where the page shows"):
        run_block(block, tmp_path, interpreter)


@pytest.mark.parametrize("block", block_params([b for b in CPU_BLOCKS if not b.process]))
def test_readme_block_runs_on_the_cpu(block, tmp_path, interpreter):
    run_block(block, tmp_path, interpreter)


EXAMPLES = sorted(os.listdir(os.path.join(ROOT, "examples")))
NOTEBOOKS = [name for name in EXAMPLES if name.endswith(".ipynb")]


def _notebook(name):
    with open(os.path.join(ROOT, "examples", name)) as notebook:
        return json.load(notebook)


@pytest.mark.parametrize("name", [n for n in EXAMPLES if n.endswith((".py", ".ipynb"))])
def test_examples_use_only_the_public_api(name):
    if name in NOTEBOOKS:
        code = "\n".join("".join(cell["source"]) for cell in _notebook(name)["cells"]
                         if cell["cell_type"] == "code")
    else:
        with open(os.path.join(ROOT, "examples", name)) as source:
            code = source.read()
    private = re.findall(r"jax_triton_rocm(?:\.|\s+import\s+)_\w+", code)
    assert code and not private, f"examples/{name} uses private modules: {private}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_are_kept_without_outputs(name):
    # Run, a notebook holds its outputs: they would go stale in the repository.
    notebook = _notebook(name)
    assert notebook["nbformat"] == 4
    ran = [cell.get("id") for cell in notebook["cells"] if cell["cell_type"] == "code"
           and (cell["outputs"] or cell["execution_count"] is not None)]
    assert not ran, f"examples/{name}: clear the outputs of the cells {ran} before committing"


def test_the_version_table_lists_the_ci_lanes():
    with open(os.path.join(ROOT, ".ci", "run")) as ci:
        lanes = set(re.findall(r'^\s+"([\w-]+)\|([\d.]+)\|([\d.]+)\|([\d.]+)"$', ci.read(), re.M))
    _, table = docs_files.claim_location("ci-lanes")
    rows = set(re.findall(r"^\| ([\w-]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                          table.group(1), re.M))
    assert lanes and rows == lanes
