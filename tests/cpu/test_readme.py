"""Every ```python block of README.md and of the pages of docs/ runs as written (how a block says
how it runs: tests/support/readme_blocks.py). Also: the examples teach the public API."""

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


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(os.path.join(ROOT, "examples"))
                                         if n.endswith(".py")))
def test_examples_use_only_the_public_api(name):
    with open(os.path.join(ROOT, "examples", name)) as source:
        private = re.findall(r"jax_triton_rocm(?:\.|\s+import\s+)_\w+", source.read())
    assert not private, f"examples/{name} uses private modules: {private}"


def test_the_version_table_lists_the_ci_lanes():
    with open(os.path.join(ROOT, ".ci", "run")) as ci:
        lanes = set(re.findall(r'^\s+"([\w-]+)\|([\d.]+)\|([\d.]+)\|([\d.]+)"$', ci.read(), re.M))
    _, table = docs_files.claim_location("ci-lanes")
    rows = set(re.findall(r"^\| ([\w-]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \|$",
                          table.group(1), re.M))
    assert lanes and rows == lanes
