"""`jax_triton_rocm.compat.install_as_jax_triton`: after it, `import jax_triton` and its
submodules give the chosen drop-in, and libraries that import `jax_triton` themselves run
unchanged; it refuses when `jax_triton` is already something else.

Each test starts and ends with no `jax_triton` in `sys.modules` (`no_jax_triton`).
"""

import importlib
import importlib.util
import sys
import types

import jax
import jax.numpy as jnp
import pytest

import jax_triton_rocm.compat
import jax_triton_rocm.compat.v0_3
from jax_triton_rocm.compat import install_as_jax_triton

LIBRARIES = ("tests.support.jax_triton_library", "tests.support.jax_triton_library_0_4")


@pytest.fixture(autouse=True)
def no_jax_triton():
    """No `jax_triton` (nor a library importing it) in `sys.modules` before the test, and none
    of those the test put there after it."""
    def ours(name):
        return (name == "jax_triton" or name.startswith("jax_triton.")
                or name.startswith(LIBRARIES))

    saved = {name: module for name, module in sys.modules.items() if ours(name)}
    for name in saved:
        del sys.modules[name]
    yield
    for name in [name for name in sys.modules if ours(name)]:
        del sys.modules[name]
    sys.modules.update(saved)


@pytest.mark.parametrize("version,drop_in,submodules", [
    ("0.3", jax_triton_rocm.compat.v0_3, {"triton_lib": "jax_triton_rocm.compat.triton_lib_0_3",
                                          "utils": "jax_triton_rocm.compat.utils_0_3",
                                          "version": "jax_triton_rocm.compat.version_0_3"}),
    ("0.4", jax_triton_rocm.compat, {"triton_lib": "jax_triton_rocm.compat.triton_lib",
                                     "version": "jax_triton_rocm.compat.version"}),
])
def test_import_jax_triton_gives_the_chosen_drop_in_and_its_submodules(version, drop_in,
                                                                       submodules):
    assert install_as_jax_triton(version) is drop_in
    import jax_triton

    assert jax_triton is drop_in
    assert jax_triton.__version__.startswith(version + ".")
    for name, module in submodules.items():
        # The drop-in's own module, not a second copy that Python would load from its folder.
        own = sys.modules[module]
        assert importlib.import_module(f"jax_triton.{name}") is own
        assert getattr(drop_in, name) is own


def test_a_library_written_for_0_3_runs_unchanged():
    install_as_jax_triton("0.3")
    import tests.support.jax_triton_library as library

    x, y = jnp.arange(200.0), jnp.ones(200)
    assert (library.scaled_add(x, y, 2.0) == 2 * x + y).all()
    grad = jax.grad(lambda x: library.scaled_add(x, y, 2.0).sum())(x)
    assert (grad == 2.0).all()
    total, peak = library.sum_and_max(x)
    assert (total, peak) == (x.sum(), 199.0)
    # BT=64 at the call, configs BT in (32, 64, 128): the BT=64 config runs.
    z = jnp.arange(1000.0)
    assert (jax.jit(library.tuned_copy)(z) == z).all()


def test_a_library_written_for_0_4_runs_unchanged():
    install_as_jax_triton("0.4")
    import tests.support.jax_triton_library_0_4 as library

    x = jnp.arange(1000.0)
    assert (jax.jit(library.add)(x, x) == 2 * x).all()


def test_a_library_for_0_3_refuses_the_0_4_drop_in_by_its_own_version_check():
    install_as_jax_triton("0.4")
    with pytest.raises(ImportError, match="needs jax-triton 0.3, not 0.4.1"):
        import tests.support.jax_triton_library  # noqa: F401


def test_installing_the_same_version_again_does_nothing():
    first = install_as_jax_triton("0.3")
    import jax_triton.utils

    assert install_as_jax_triton("0.3") is first
    assert sys.modules["jax_triton.utils"] is jax_triton.utils


def test_switching_versions_in_one_process_is_refused():
    install_as_jax_triton("0.3")
    with pytest.raises(RuntimeError, match=r"install_as_jax_triton\('0.4'\): jax_triton already "
                                           r"gives the drop-in for jax-triton 0.3 .*process of "
                                           r"its own"):
        install_as_jax_triton("0.4")
    assert sys.modules["jax_triton"] is jax_triton_rocm.compat.v0_3


def test_the_real_jax_triton_already_imported_is_refused_naming_it():
    real = types.ModuleType("jax_triton")
    real.__version__, real.__file__ = "0.3.1", "/site-packages/jax_triton/__init__.py"
    sys.modules["jax_triton"] = real
    with pytest.raises(RuntimeError, match=r"jax_triton is already imported \(jax-triton 0.3.1, "
                                           r"from /site-packages/jax_triton/__init__.py\).*"
                                           r"before anything imports jax_triton"):
        install_as_jax_triton("0.3")
    assert sys.modules["jax_triton"] is real


def test_an_unknown_version_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"version='0.5' names no drop-in; give \"0.3\" .*\"0.4\""):
        install_as_jax_triton("0.5")
    assert "jax_triton" not in sys.modules


def _suites_tool():
    from tests.support.subprocess_utils import ROOT

    loaded = importlib.util.spec_from_file_location(
        "jax_triton_suites_tool", f"{ROOT}/tools/jax_triton_suites.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def test_the_suites_tool_counts_pytests_last_summary_line():
    tool = _suites_tool()
    summary = "....x\n1 failed, 76 passed, 77 skipped, 5 xfailed, 2 errors in 458.71s (0:07:38)\n"
    assert tool.counts(summary) == {"passed": 76, "failed": 1, "skipped": 77, "xfailed": 5,
                                    "xpassed": 0, "error": 2}
    assert tool.counts("INTERNALERROR> ...\n") is None


def test_a_suite_folder_is_collected_only_when_named():
    from tests.support.jax_triton_suites import conftest as suites

    def ignored(folder, *args):
        config = types.SimpleNamespace(args=list(args))
        return suites.pytest_ignore_collect(suites.HERE / folder, config)

    assert ignored("v0_3_1", "tests") and ignored("v0_4_0", "tests/cpu")
    assert not ignored("v0_3_1", str(suites.HERE / "v0_3_1"))
    assert not ignored("v0_4_0", f"{suites.HERE / 'v0_4_0' / 'gluon_test.py'}::GluonTest")
    assert ignored("v0_4_0", str(suites.HERE / "v0_3_1"))
