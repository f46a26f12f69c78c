"""One warning when kernels fall back to Triton's interpreter while a GPU plugin is installed.

Each case is a fresh process (the warning is once per process) running two kernels, twice each,
on the CPU. With a jaxlib GPU plugin installed (a stand-in whose start-up fails, as on a machine
without the GPU) the package's logger warns once, saying why and how to change it; with none
installed the CPU is the only choice and nothing is logged.
"""

import pytest

from tests.support.subprocess_utils import (INTERPRETER_WARNING, WITHOUT_GPU_PLUGINS,
                                            run_python, run_two_kernels_twice, standin_plugin)

pytestmark = pytest.mark.process  # each test starts Python processes

def test_a_plugin_without_its_gpu_warns_once_saying_why(tmp_path):
    stderr = run_two_kernels_twice(
        standin_plugin(tmp_path, "cuda", "Unable to load cuDNN. Is it installed?"))
    assert stderr.count(INTERPRETER_WARNING) == 1, stderr[-3000:]
    assert ("jax_triton_rocm: kernel add_kernel runs in Triton's interpreter on the CPU (slow: "
            "NumPy, one program at a time). JAX has no GPU device: jax_cuda13_plugin is "
            "installed, but JAX started no cuda device") in stderr, stderr[-3000:]


def test_jax_platforms_leaving_the_gpu_out_is_named_with_the_fix(tmp_path):
    stderr = run_two_kernels_twice(
        standin_plugin(tmp_path, "rocm", "Unable to load libamdhip64.so.7"),
        env={"JAX_PLATFORMS": "cpu"})
    assert stderr.count(INTERPRETER_WARNING) == 1, stderr[-3000:]
    assert ("jax_rocm7_plugin is installed, but JAX_PLATFORMS='cpu' leaves rocm out (add rocm "
            "to it, or unset it)") in stderr, stderr[-3000:]


@pytest.mark.parametrize("env", [None, {"JAX_PLATFORMS": "cpu"}], ids=["default", "cpu"])
def test_no_gpu_plugin_no_warning(env):
    stderr = run_two_kernels_twice(WITHOUT_GPU_PLUGINS, env=env)
    assert INTERPRETER_WARNING not in stderr and "jax_triton_rocm" not in stderr, stderr[-3000:]


def test_the_demo_says_why_itself_and_adds_no_warning(tmp_path):
    result = run_python(standin_plugin(tmp_path, "cuda", "Unable to load cuDNN. Is it installed?"),
                        "from jax_triton_rocm.__main__ import main; main(['--arch', 'sm_90'])")
    assert "\n  jax_cuda13_plugin is installed" in result.stdout, result.stderr[-3000:]
    assert "matches jnp" in result.stdout and INTERPRETER_WARNING not in result.stderr, (
        result.stderr[-3000:])
