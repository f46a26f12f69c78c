"""The ```python blocks of README.md and docs/ marked `gpu` (tests/support/readme_blocks.py says
how a block is marked): each runs as written, on the GPU."""

import pytest

from tests.support.readme_blocks import GPU_BLOCKS, block_ids, run_block


@pytest.mark.gpu
@pytest.mark.parametrize("block", GPU_BLOCKS, ids=block_ids(GPU_BLOCKS))
def test_readme_block_runs_on_the_gpu(block, tmp_path, interpreter):
    run_block(block, tmp_path, interpreter)
