"""`python -m jax_triton_rocm` (the demo and `info`) when JAX, a plugin or Triton is broken.

Each case runs in a fresh process, with the jaxlib GPU plugins of this venv hidden and, where a
plugin is the point, a stand-in plugin whose start-up fails as a real one does without its
libraries or its GPU. Neither command may print a traceback: each says what failed, the likely
cause and the fix, and exits with the status docs/cli.md's table documents.
"""

import pytest

from jax_triton_rocm.cli import _startup
from tests.support.subprocess_utils import (TRITON_WITHOUT_NVIDIA, WITHOUT_GPU_PLUGINS,
                                            advertised_entry_point, failing_import, run_cli,
                                            standin_plugin)

pytestmark = pytest.mark.process  # each test starts Python processes

CUDNN_MISSING = "Unable to load cuDNN. Is it installed?"
HIP_MISSING = "Unable to load libamdhip64.so.7: cannot open shared object file"


def assert_explained(result, status, *expected):
    """Exit `status`, no traceback nor JAX's raw start-up message, and each of `expected` in
    what the command printed."""
    printed = result.stdout + result.stderr
    assert result.returncode == status, printed[-3000:]
    assert "Traceback" not in printed, printed[-3000:]
    assert "Jax plugin configuration error" not in printed, printed[-3000:]  # read, then told
    for text in expected:
        assert text in printed, f"{text!r} not in:\n{printed[-3000:]}"


COMMANDS = [pytest.param((), id="demo"), pytest.param(("info",), id="info")]


@pytest.mark.parametrize("command", COMMANDS)
def test_jax_platforms_rocm_without_the_rocm_plugin_says_no_rocm_plugin(command):
    result = run_cli(*command, prelude=WITHOUT_GPU_PLUGINS, env={"JAX_PLATFORMS": "rocm"})
    assert_explained(result, _startup.EXIT_JAX_DID_NOT_START,
                     "JAX could not start: JAX_PLATFORMS='rocm' asks for rocm",
                     "likely cause: no jaxlib rocm plugin is installed",
                     "fix: install JAX for that GPU: pip install -U 'jax[rocm7-local]'")
    cause = (result.stdout + result.stderr).split("likely cause:")[1].split("fix:")[0]
    assert "cuda" not in cause.lower(), cause


@pytest.mark.parametrize("command", COMMANDS)
def test_jax_platforms_cuda_with_a_failing_cuda_plugin_says_why(command, tmp_path):
    # JAX itself ends this start-up with a bare AssertionError (no NVIDIA GPU visible) or a
    # RuntimeError (a GPU visible, but no backend registered).
    result = run_cli(*command, prelude=standin_plugin(tmp_path, "cuda", CUDNN_MISSING),
                     env={"JAX_PLATFORMS": "cuda"})
    assert_explained(result, _startup.EXIT_JAX_DID_NOT_START,
                     "JAX could not start: JAX_PLATFORMS='cuda' asks for cuda",
                     "likely cause:", "fix:", "JAX_PLATFORMS=cpu")


def test_info_after_jax_failed_to_start_still_reports_the_rest(tmp_path):
    result = run_cli("info", prelude=standin_plugin(tmp_path, "cuda", CUDNN_MISSING),
                     env={"JAX_PLATFORMS": "cuda"})
    assert_explained(result, _startup.EXIT_JAX_DID_NOT_START, "JAX start-up:\n  failed: ",
                     f"JAX's plugin jax_plugins.xla_cuda13 failed to start: RuntimeError: "
                     f"{CUDNN_MISSING}", "Triton ", "Lowering for rocm:", "JAX_PLATFORMS='cuda'")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_failing_rocm_plugin_is_explained_and_jax_goes_on_on_the_cpu(command, tmp_path):
    result = run_cli(*command, prelude=standin_plugin(tmp_path, "rocm", HIP_MISSING))
    assert_explained(result, _startup.EXIT_OK,
                     "jax_rocm7_plugin is installed, but JAX started no rocm device: the ROCm "
                     "plugin cannot load the ROCm runtime",
                     "pip uninstall -y jax-rocm7-plugin jax-rocm7-pjrt, or set JAX_PLATFORMS=cpu")


def test_a_cuda_plugin_that_does_not_import_is_named_with_the_fix(tmp_path):
    prelude = standin_plugin(tmp_path, "cuda", None, import_error="libcudart.so.13: cannot open "
                                                                  "shared object file")
    result = run_cli("info", prelude=prelude)
    assert_explained(result, _startup.EXIT_OK,
                     "problem: JAX's plugin jax_plugins.xla_cuda13 could not be imported: "
                     "ImportError: libcudart.so.13", "likely cause: the plugin does not match the "
                     "installed jaxlib or Python", "pip install -U 'jax[cuda13]'")


def test_an_unknown_jax_platform_is_named():
    result = run_cli("info", prelude=WITHOUT_GPU_PLUGINS, env={"JAX_PLATFORMS": "bogus"})
    assert_explained(result, _startup.EXIT_JAX_DID_NOT_START,
                     "likely cause: 'bogus' is not a platform this JAX knows")


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("error,expected", [
    ("ModuleNotFoundError", "jax_triton_rocm needs Triton, which is not installed. Install it "
                            "with: pip install 'triton>="),
    ("RuntimeError", "Triton is installed but does not import: RuntimeError: simulated: built "
                     "for another LLVM"),
])
def test_a_missing_or_broken_triton_is_explained(command, error, expected):
    prelude = WITHOUT_GPU_PLUGINS + failing_import("triton", error,
                                                   "simulated: built for another LLVM")
    result = run_cli(*command, prelude=prelude)
    assert_explained(result, _startup.EXIT_NO_TRITON, expected)


def test_the_demo_without_tritons_nvidia_backend_cross_compiles_for_amd():
    result = run_cli("--cross", prelude=(WITHOUT_GPU_PLUGINS, *TRITON_WITHOUT_NVIDIA))
    assert_explained(result, _startup.EXIT_OK, "warning: not cross-compiling for sm_90",
                     "gfx942  vector add")


def test_a_failing_package_hook_is_reported_by_info(tmp_path):
    prelude = advertised_entry_point(tmp_path) + WITHOUT_GPU_PLUGINS + """
from jax_triton_rocm.routes import _primitive
def broken(*args, **kwargs):
    raise RuntimeError("simulated: broken install")
_primitive.ensure_registered = broken  # what JAX's plugin hook calls
"""
    result = run_cli("info", prelude=prelude)
    assert_explained(result, _startup.EXIT_OK,
                     "problem: jax_triton_rocm's plugin hook failed: RuntimeError: simulated: "
                     "broken install", "Lowering rules registered for: none")


BUG_IN_THE_DEMO = WITHOUT_GPU_PLUGINS + """
import jax_triton_rocm.__main__ as cli
def broken(targets):
    raise ValueError("simulated bug")
cli.show_cross_compiled = broken
"""


def test_an_unexpected_error_in_the_demo_is_one_message_and_status_1():
    result = run_cli("--cross", prelude=BUG_IN_THE_DEMO)
    assert_explained(result, _startup.EXIT_DEMO_FAILED,
                     "error: the demo failed: ValueError: simulated bug", "--traceback")


def test_traceback_flag_shows_the_traceback():
    result = run_cli("--cross", "--traceback", prelude=BUG_IN_THE_DEMO)
    assert result.returncode != 0 and "Traceback" in result.stderr, result.stderr[-2000:]



@pytest.mark.parametrize("command", COMMANDS)
def test_traceback_flag_shows_the_traceback_of_a_jax_start_up_failure(command):
    result = run_cli(*command, "--traceback", prelude=WITHOUT_GPU_PLUGINS,
                     env={"JAX_PLATFORMS": "rocm"})
    assert result.returncode == _startup.EXIT_JAX_DID_NOT_START, result.stderr[-3000:]
    assert "Traceback (most recent call last)" in result.stderr, result.stderr[-3000:]
    assert ("JAX could not start: JAX_PLATFORMS='rocm' asks for rocm"
            in result.stdout + result.stderr)


def test_traceback_flag_shows_the_traceback_of_a_broken_triton():
    prelude = WITHOUT_GPU_PLUGINS + failing_import("triton", "RuntimeError",
                                                   "simulated: built for another LLVM")
    result = run_cli("--traceback", prelude=prelude)
    assert result.returncode == _startup.EXIT_NO_TRITON, result.stderr[-3000:]
    assert "Traceback (most recent call last)" in result.stderr, result.stderr[-3000:]
    assert "RuntimeError: simulated: built for another LLVM" in result.stderr


@pytest.mark.parametrize("name,value", [("JAX_TRITON_ROCM_PREWARM", "maybe"),
                                        ("JAX_TRITON_ROCM_KERNEL_CACHE_SIZE", "²"),
                                        ("JAX_TRITON_ROCM_TARGET_ARCH", "cuda=sm_1")])
def test_the_demo_on_the_cpu_refuses_a_bad_variable_as_a_usage_error(name, value):
    result = run_cli(prelude=WITHOUT_GPU_PLUGINS, env={name: value})
    assert_explained(result, _startup.EXIT_USAGE, f"error: {name}=")
    assert "a bug in jax_triton_rocm" not in result.stderr, result.stderr[-3000:]
