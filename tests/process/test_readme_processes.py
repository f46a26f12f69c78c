"""The ```python blocks of README.md and docs/ marked `process` (tests/support/readme_blocks.py
says how a block is marked): each runs as written, in a fresh Python process of its own."""

import pytest

from tests.support.readme_blocks import CPU_BLOCKS, block_params, run_block


@pytest.mark.parametrize("block", block_params([b for b in CPU_BLOCKS if b.process]))
def test_readme_block_runs_on_the_cpu(block, tmp_path, interpreter):
    run_block(block, tmp_path, interpreter)
