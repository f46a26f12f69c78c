"""Test-session setup shared by every test directory.

GPU tests carry the `gpu` mark and are skipped, with the reason, where no NVIDIA GPU with JAX's
CUDA plugin is present. JAX does not preallocate GPU memory here, so that pytest-xdist workers
can share a GPU. Triton 3.9 warns unless TRITON_DEFAULT_FP_FUSION is set; the package
always passes `enable_fp_fusion` explicitly, so the tests set it only to keep Triton quiet when
they call it directly.
"""

import functools
import os

import pytest

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
# pytest-xdist workers share the GPUs: without this, the first JAX process takes 75% of each.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


@functools.cache
def cuda_gpu_count() -> int:
    import jax

    try:
        return len(jax.devices("cuda"))
    except RuntimeError:
        return 0


def pytest_collection_modifyitems(config, items):
    del config
    needs_gpu = [item for item in items if item.get_closest_marker("gpu")]
    if not needs_gpu:
        return
    count = cuda_gpu_count()
    for item in needs_gpu:
        if count == 0:
            item.add_marker(pytest.mark.skip(
                reason="needs an NVIDIA GPU with JAX's CUDA plugin; none found here"))
        elif item.get_closest_marker("multi_gpu") and count < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2+ GPUs; found {count}"))
