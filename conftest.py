"""Test-session setup shared by every test directory.

GPU tests carry the `gpu` mark and run on whatever GPU JAX sees, NVIDIA (platform `cuda`) or AMD
(platform `rocm`); they are skipped, with the reason, where there is none. A test that only makes
sense on one vendor carries `cuda_only` or `rocm_only` as well, and says why in its own reason.
JAX does not preallocate GPU memory here, so that pytest-xdist workers can share a GPU. Triton
3.9 warns unless TRITON_DEFAULT_FP_FUSION is set; the package always passes `enable_fp_fusion`
explicitly, so the tests set it only to keep Triton quiet when they call it directly.

The suite sets its own environment, whatever the caller's: `JAX_PLATFORMS`, `XLA_FLAGS` and
Triton's behaviour variables are removed (Triton's cache folder, home and tool paths are kept),
before JAX is imported. Every process of the run (pytest-xdist workers, the processes tests
start) uses one temporary folder of its own; at the end the run fails if anything but pytest's
own folders is left in it, and otherwise removes it.
"""

import os
import re
import shutil
import sys
import tempfile

import pytest

_KEPT_TRITON_VARIABLES = re.compile(r"TRITON_(CACHE_DIR|HOME|\w+_PATH)")
REMOVED_VARIABLES = sorted(
    name for name in os.environ
    if name in ("JAX_PLATFORMS", "XLA_FLAGS")
    or (name.startswith("TRITON_") and not _KEPT_TRITON_VARIABLES.fullmatch(name)))
for _name in REMOVED_VARIABLES:
    del os.environ[_name]
os.environ["TRITON_DEFAULT_FP_FUSION"] = "1"
# pytest-xdist workers share the GPUs: without this, the first JAX process takes 75% of each.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# The run's temporary folder: made by the first process (pytest itself), inherited by the rest.
_SESSION_TMP_VARIABLE = "JTR_TEST_SESSION_TMPDIR"
if _SESSION_TMP_VARIABLE not in os.environ:
    os.environ[_SESSION_TMP_VARIABLE] = tempfile.mkdtemp(prefix="jax_triton_rocm_tests_")
    os.environ["TMPDIR"] = os.environ[_SESSION_TMP_VARIABLE]
    tempfile.tempdir = None  # computed again, from TMPDIR
SESSION_TMP = os.environ[_SESSION_TMP_VARIABLE]

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


def pytest_report_header(config):
    del config
    removed = ", ".join(REMOVED_VARIABLES) or "none"
    return [f"temporary folder: {SESSION_TMP}; caller's variables removed: {removed}"]


def leftovers(folder: str) -> list[str]:
    """What the run left in its temporary folder, pytest's own folders apart."""
    return sorted(name for name in os.listdir(folder) if not name.startswith("pytest-of-"))


@pytest.hookimpl(trylast=True)  # after pytest-xdist has stopped its workers
def pytest_sessionfinish(session):
    if hasattr(session.config, "workerinput"):
        return  # a worker: the controlling process checks once every process has ended
    hsaco = sys.modules.get("jax_triton_rocm.backends.hip._hip_files")
    if hsaco is not None:
        hsaco.HSACO_FOLDER.remove()  # this process's own, which it would remove at exit
    left = leftovers(SESSION_TMP)
    if not left:
        shutil.rmtree(SESSION_TMP, ignore_errors=True)
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"FAILED: the tests left {len(left)} item(s) in their temporary "
                            f"folder {SESSION_TMP}: {', '.join(left)}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
