"""Test-session setup shared by every test directory.

GPU tests carry the `gpu` mark and run on whatever GPU JAX sees, NVIDIA (platform `cuda`) or AMD
(platform `rocm`); they are skipped, with the reason, where there is none. A test that only makes
sense on one vendor carries `cuda_only` or `rocm_only` as well, and says why in its own reason.
JAX does not preallocate GPU memory here, so that pytest-xdist workers can share a GPU. Triton
3.9 warns unless TRITON_DEFAULT_FP_FUSION is set; the package always passes `enable_fp_fusion`
explicitly, so the tests set it only to keep Triton quiet when they call it directly.
"""

import os

import pytest

os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
# pytest-xdist workers share the GPUs: without this, the first JAX process takes 75% of each.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from tests.gpu_utils import gpu_devices, gpu_platform  # noqa: E402  (after the environment)


def pytest_collection_modifyitems(config, items):
    del config
    needs_gpu = [item for item in items if item.get_closest_marker("gpu")]
    if not needs_gpu:
        return
    platform, count = gpu_platform(), len(gpu_devices())
    for item in needs_gpu:
        if count == 0:
            item.add_marker(pytest.mark.skip(
                reason="needs a GPU (NVIDIA with JAX's CUDA plugin, or AMD with its ROCm plugin); "
                       "none found here"))
            continue
        for vendor_mark, wanted in (("cuda_only", "cuda"), ("rocm_only", "rocm")):
            mark = item.get_closest_marker(vendor_mark)
            if mark is not None and platform != wanted:
                why = mark.kwargs.get("reason") or mark.args[0]
                item.add_marker(pytest.mark.skip(reason=f"{wanted} only ({why}); found {platform}"))
        if item.get_closest_marker("multi_gpu") and count < 2:
            item.add_marker(pytest.mark.skip(reason=f"needs 2+ GPUs; found {count}"))
