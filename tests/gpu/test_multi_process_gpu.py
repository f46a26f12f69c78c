"""examples/multi_process.py: two processes joined by jax.distributed, a Triton kernel per shard.

This file holds the tests that need a GPU (mark `gpu`); the others are in
tests/process/test_multi_process.py.
"""

import pytest

from tests.support.subprocess_utils import check_both_processes_matched, run_multi_process_example


@pytest.mark.process
@pytest.mark.gpu
@pytest.mark.multi_gpu
def test_two_gpu_processes_run_the_kernel_on_their_shards():
    check_both_processes_matched(run_multi_process_example("--platform", "cuda"), "gpu")
