"""examples/multi_process.py: two processes joined by jax.distributed, a Triton kernel per shard.

This file holds the tests that need a GPU (mark `gpu`); the others are in
tests/process/test_multi_process.py.
"""


import pytest

from tests.process.test_multi_process import _check_both_processes_matched, _launch


@pytest.mark.process
@pytest.mark.gpu
@pytest.mark.multi_gpu
def test_two_gpu_processes_run_the_kernel_on_their_shards():
    _check_both_processes_matched(_launch("--platform", "cuda"), "gpu")
