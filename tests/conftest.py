"""The fixtures the tests share, wherever they run (tests/cpu, tests/gpu, tests/process); the
session's setup (its environment, its options, the `gpu` mark's skips) is the repository's
`conftest.py`. Like it, this module imports JAX, Triton and the package only where a fixture
runs: pytest-xdist's controller loads it too, and runs no test.

`route` and the `routes` mark: a test on every route (`tests.support.routes.every_route`) is
written once, in tests/support/every_route; a file of tests/gpu imports it and runs it on the GPU
routes (marked `gpu`), a file of tests/cpu imports it and runs it on Triton's interpreter.
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tempfile

import pytest

from tests.support.subprocess_utils import ROOT, SharedInterpreter, is_shared_interpreter

TESTS = pathlib.Path(__file__).parent


@pytest.hookimpl(trylast=True)  # after the `parametrize` marks: the route is the id's last part
def pytest_generate_tests(metafunc):
    """Parametrises the `route` of a test marked `routes(*names)` with those of its folder's
    routes (`tests.support.routes.routes_of_the_folder`)."""
    mark = metafunc.definition.get_closest_marker("routes")
    if mark is not None:
        from tests.support.routes import routes_of_the_folder

        folder = pathlib.Path(metafunc.definition.path).relative_to(TESTS).parts[0]
        metafunc.parametrize("route", routes_of_the_folder(mark.args, folder), indirect=True)


@pytest.fixture
def route(request, monkeypatch, fresh_lowerings):
    """The route of a test parametrised by `route_name`; checks, after it, that every call took
    that route. JAX's caches are cleared on both sides (`fresh_lowerings`): a call another test
    lowered for another route must be lowered again."""
    from jax_triton_rocm.base import _env
    from jax_triton_rocm.routes.cpu import _interpret
    from jax_triton_rocm.routes.jaxlib import _jaxlib_call
    from jax_triton_rocm.routes.xla import _xla_native
    from tests.support.routes import Route, counting

    current = Route(request.param)
    if current.name == "default":
        monkeypatch.delenv(_env.ENV_XLA_NATIVE, raising=False)
        monkeypatch.delenv(_env.ENV_CALL_TARGET, raising=False)
    elif current.on_gpu:
        monkeypatch.setenv(_env.ENV_XLA_NATIVE, "1" if current.name == "xla" else "0")
        monkeypatch.setenv(_env.ENV_CALL_TARGET,
                           "legacy" if current.name == "legacy" else "ffi")
    monkeypatch.setattr(_jaxlib_call, "emit", counting(current, "jaxlib", _jaxlib_call.emit))
    monkeypatch.setattr(_xla_native, "emit", counting(current, "xla", _xla_native.emit))
    monkeypatch.setattr(_interpret, "lower", counting(current, "interpreter", _interpret.lower))
    yield current
    if problem := current.problem():
        pytest.fail(problem)


@pytest.fixture
def fresh_lowerings():
    """JAX's caches emptied before and after the test, the package's kept: a route, a target or
    a plugin's features are decided when a call is lowered, and JAX would otherwise serve a
    lowering made under another test's settings."""
    import jax

    jax.clear_caches()
    yield
    jax.clear_caches()


@pytest.fixture
def default_route(monkeypatch):
    """The route left to the package's default: a JAX_TRITON_ROCM_XLA_NATIVE that forces one
    for the whole run (`tools/differential.py` runs the GPU tests once per route) is unset, for
    the tests that check what the default does."""
    monkeypatch.delenv("JAX_TRITON_ROCM_XLA_NATIVE", raising=False)


@pytest.fixture
def fresh_caches():
    """Every cache emptied before and after the test, the package's and JAX's
    (`jax_triton_rocm.clear_caches`): for tests that count compiles or see what a cold lowering
    does, or that change what no cache key covers (a choices folder, a device kind, a temporary
    folder), so that neither they nor the tests after them are served another setting's kernels.
    Request it after `monkeypatch`: its teardown then runs before the patches are undone."""
    import jax_triton_rocm as jtr

    jtr.clear_caches()
    yield
    jtr.clear_caches()


@pytest.fixture
def temp_root(tmp_path, monkeypatch, fresh_caches):
    """A private folder for the package's temporary folders (Python's `tempfile.tempdir`), to
    see what is left in it; every cache empty, so that nothing made in another folder is
    served."""
    del fresh_caches
    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


_PYTHON_PROGRAM = re.compile(r"python[\d.]*")


def _starts_python(command) -> bool:
    program = command if isinstance(command, (str, bytes, os.PathLike)) else command[0]
    program = os.fsdecode(program).split()[0] if program else ""
    return (_PYTHON_PROGRAM.fullmatch(os.path.basename(program)) is not None
            or os.path.realpath(program) == os.path.realpath(sys.executable))


@pytest.fixture(autouse=True)
def _python_processes_carry_the_process_mark(request, monkeypatch):
    """Fails a test that starts a Python process (through `subprocess`, or a fork) without the
    `process` mark, so that the quick run stays quick. A `SharedInterpreter`, one process for
    the tests of a module, is not counted."""
    if request.node.get_closest_marker("process") is not None:
        yield
        return
    started = []
    popen_init, fork = subprocess.Popen.__init__, os.fork

    def checked_init(self, args, *rest, **kwargs):
        if _starts_python(args) and not is_shared_interpreter(args):
            started.append(args if isinstance(args, str) else " ".join(map(str, args[:2])))
        popen_init(self, args, *rest, **kwargs)

    def checked_fork():
        started.append("os.fork()")
        return fork()

    monkeypatch.setattr(subprocess.Popen, "__init__", checked_init)
    monkeypatch.setattr(os, "fork", checked_fork)
    yield
    assert not started, (f"{request.node.nodeid} starts Python processes ({started[0][:200]}, "
                         f"{len(started)} in all): mark it @pytest.mark.process")


# tests/cpu/test_autotune_choices.py and tests/process/test_autotune_choices_processes.py
@pytest.fixture
def choices_dir(tmp_path, monkeypatch, fresh_caches):
    """A private folder of choices, a stand-in GPU to lower for, and nothing remembered."""
    from jax_triton_rocm.base import _env
    from jax_triton_rocm.routes import _arch
    from tests.support import autotune_utils as au

    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))
    monkeypatch.setattr(_arch, "device_kind", lambda platform, context: au.STAND_IN_DEVICE)
    return tmp_path


# tests/cpu/test_battery_tool.py and tests/process/test_battery_tool_processes.py
@pytest.fixture(scope="module")
def battery():
    """tools/battery's `__main__`, loaded as a module."""
    path = os.path.join(ROOT, "tools", "battery", "__main__.py")
    spec = importlib.util.spec_from_file_location("battery_main", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# tests/cpu/test_binary_identity.py and tests/process/test_binary_identity_processes.py
@pytest.fixture
def delivery(request, monkeypatch, fresh_caches):
    """(platform, ROCm delivery) of an indirect parameter, the delivery set; skipped where this
    jaxlib cannot embed the binary the test asks to embed."""
    from jax_triton_rocm.base import _compat, _env

    platform, mode = request.param
    monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, mode)
    if mode == "embedded" and not _embeds(platform):
        pytest.skip(f"the jaxlib here ({_compat.jaxlib_version()}) predates module_image")
    return platform, mode


# tests/cpu/test_cache_damage.py and tests/process/test_cache_damage_processes.py
@pytest.fixture
def cache_dir(tmp_path, monkeypatch, fresh_caches):
    """A private, empty TRITON_CACHE_DIR, and no kernel compiled in this process yet."""
    folder = tmp_path / "triton-cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    return folder


# test_readme.py (tests/cpu), test_readme_gpu.py, test_readme_processes.py
@pytest.fixture(scope="module")
def interpreter(tmp_path_factory):
    """One `SharedInterpreter` for the documentation blocks of a module."""
    shared = SharedInterpreter(tmp_path_factory.mktemp("blocks") / "interpreter.log")
    yield shared
    shared.close()


def _embeds(platform: str) -> bool:
    """Whether this jaxlib's kernel call carries a binary (`module_image`) for `platform`."""
    from jax_triton_rocm.backends import _vendors

    features = _vendors.plugin_features(platform) or _vendors.assumed_features(platform)
    return features.module_image
