"""Test-session setup shared by every test directory: tests/cpu, tests/gpu and tests/process, by
where the tests run (their helpers in tests/support, the fixtures they share in tests/conftest.py).

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
With JAX_TRITON_ROCM_TEST_ROUTE_COUNTS set, the session counts the routes its lowerings took.
With `--differential=PATH`, every GPU call is also compared bitwise with the same kernel launched
by Triton's own launcher from PyTorch (`tests/support/differential.py`).

A test that starts Python processes of its own (a fresh interpreter to check start-up, import,
fork or command-line behaviour) carries the `process` mark: `-m "not process"` leaves them out
of the quick run (the README's test command), and the run fails a test without the mark that
starts one (an autouse fixture of tests/conftest.py). Fixtures of a wider scope may share one
interpreter among many tests.
"""

import atexit
import collections
import glob
import json
import logging
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
_SESSION_OWNER_VARIABLE = "JTR_TEST_SESSION_OWNER"
if _SESSION_TMP_VARIABLE not in os.environ:
    os.environ[_SESSION_TMP_VARIABLE] = tempfile.mkdtemp(prefix="jax_triton_rocm_tests_")
    os.environ[_SESSION_OWNER_VARIABLE] = str(os.getpid())
    os.environ["TMPDIR"] = os.environ[_SESSION_TMP_VARIABLE]
    tempfile.tempdir = None  # computed again, from TMPDIR
SESSION_TMP = os.environ[_SESSION_TMP_VARIABLE]
# Only the process that made the folder checks and removes it: a pytest that a test starts
# inherits the folder and must leave it to the run around it.
OWNS_SESSION_TMP = os.environ.get(_SESSION_OWNER_VARIABLE) == str(os.getpid())

# Tests written in tests/support (and what they call): asserts explained as in a test file.
pytest.register_assert_rewrite("tests.support.every_route", "tests.support.moe_checks")
from tests.support.gpu_utils import gpu_devices, gpu_platform  # noqa: E402  (after the environment)

# A file to write, at the end of the session, how many lowerings took each route (xla, jaxlib,
# jaxlib legacy, interpreter) and how many distinct kernels did, from the package's route log
# (`routes._primitive.log_route`); unset: nothing is counted. Under pytest-xdist each worker writes
# FILE.<worker>.json and the controller sums them into FILE. Lowerings in child processes that
# tests start are not counted.
ENV_ROUTE_COUNTS = "JAX_TRITON_ROCM_TEST_ROUTE_COUNTS"


class RouteCounter(logging.Handler):
    """Counts the route records of the "jax_triton_rocm" logger: lowerings and kernels."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lowerings: collections.Counter[str] = collections.Counter()
        self.kernels: dict[str, set[str]] = collections.defaultdict(set)

    def emit(self, record: logging.LogRecord) -> None:
        route = getattr(record, "jax_triton_rocm_route", None)
        if route is not None:
            self.lowerings[route] += 1
            self.kernels[route].add(getattr(record, "jax_triton_rocm_kernel", "?"))

    def counts(self) -> dict:
        return {"lowerings": dict(self.lowerings),
                "kernels": {route: sorted(names) for route, names in self.kernels.items()}}


_route_counter = RouteCounter()


def _xdist_worker(config) -> str | None:
    """This process's pytest-xdist worker id ("gw0"), None in the controller or without xdist
    (from the session's own config: a test's child pytest inherits the worker's environment)."""
    workerinput = getattr(config, "workerinput", None)
    return None if workerinput is None else workerinput["workerid"]


def pytest_addoption(parser):
    parser.addoption("--differential", metavar="PATH", default=None,
                     help="compare every GPU call with the same kernel launched by Triton's own "
                          "launcher from PyTorch; one JSON line per call to PATH "
                          "(tests/support/differential.py, tools/differential.py)")


def pytest_configure(config):
    from tests.support import differential

    differential.configure(config)
    path = os.environ.get(ENV_ROUTE_COUNTS)
    if path:
        if _xdist_worker(config) is None:  # workers' files of an earlier run
            for name in glob.glob(glob.escape(path) + ".*.json"):
                os.remove(name)
        logger = logging.getLogger("jax_triton_rocm")
        logger.addHandler(_route_counter)
        logger.setLevel(logging.DEBUG)


def merged_route_counts(parts: list[dict]) -> dict:
    """The sum of several `RouteCounter.counts()`, with each route's share of the lowerings."""
    lowerings: collections.Counter[str] = collections.Counter()
    kernels: dict[str, set[str]] = collections.defaultdict(set)
    for part in parts:
        lowerings.update(part["lowerings"])
        for route, names in part["kernels"].items():
            kernels[route].update(names)
    total = sum(lowerings.values())
    return {"lowerings": dict(lowerings),
            "share": {route: count / total for route, count in lowerings.items()},
            "kernels": {route: len(names) for route, names in kernels.items()},
            "kernel_names": {route: sorted(names) for route, names in kernels.items()}}


def write_route_counts(session) -> None:
    """Writes this process's route counts (a worker), or everyone's summed (the controller)."""
    path = os.environ.get(ENV_ROUTE_COUNTS)
    if not path:
        return
    worker = _xdist_worker(session.config)
    if worker is not None:
        with open(f"{path}.{worker}.json", "w") as file:
            json.dump(_route_counter.counts(), file)
        return
    parts = [_route_counter.counts()]
    for name in sorted(glob.glob(glob.escape(path) + ".*.json")):
        with open(name) as file:
            parts.append(json.load(file))
        os.remove(name)
    merged = merged_route_counts(parts)
    with open(path, "w") as file:
        json.dump(merged, file, indent=1, sort_keys=True)
    session.config.stash[_ROUTE_SUMMARY] = merged


_ROUTE_SUMMARY = pytest.StashKey[dict]()


def pytest_terminal_summary(terminalreporter, config):
    merged = config.stash.get(_ROUTE_SUMMARY, None)
    if merged is not None:
        shares = ", ".join(f"{route} {count} ({merged['share'][route]:.0%}; "
                           f"{merged['kernels'][route]} kernels)"
                           for route, count in sorted(merged["lowerings"].items()))
        terminalreporter.write_line(f"lowerings by route: {shares or 'none'} "
                                    f"(written to {os.environ[ENV_ROUTE_COUNTS]})")


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


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Past this point a process of the run only tears its interpreter down. Triton 3.9's
    extension (libtriton, built with nanobind) then reports, at random, IR objects still alive
    as leaked (4 `ir.attribute`s, with its types and functions: some 30 lines); neither Triton
    nor jaxlib lets nanobind's report be turned off, and it says nothing of the run's results.
    So a process that loaded it sends its stderr to /dev/null for the teardown, once the run's
    output is written: from an exit handler, which runs after pytest's own cleanups (its capture
    puts the original stderr back after this hook) and before the extension's report."""
    del config
    if "triton._C.libtriton" in sys.modules:
        atexit.register(_stderr_to_devnull)


def _stderr_to_devnull() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    os.close(devnull)


@pytest.hookimpl(trylast=True)  # after pytest-xdist has stopped its workers
def pytest_sessionfinish(session):
    write_route_counts(session)
    hsaco = sys.modules.get("jax_triton_rocm.backends.hip._hip_files")
    if hsaco is not None:
        # This process's own, which it would remove at exit: a worker's exit may come after
        # the owner's check below.
        hsaco.HSACO_FOLDER.remove()
    if hasattr(session.config, "workerinput") or not OWNS_SESSION_TMP:
        return  # a worker, or a pytest a test started: the owner checks once all have ended
    left = leftovers(SESSION_TMP)
    if not left:
        shutil.rmtree(SESSION_TMP, ignore_errors=True)
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"FAILED: the tests left {len(left)} item(s) in their temporary "
                            f"folder {SESSION_TMP}: {', '.join(left)}", red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
