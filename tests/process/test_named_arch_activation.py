"""Naming an architecture is enough to lower for its platform, on any machine.

Each test runs in a fresh process, so nothing registered by another test helps it. The
`WITHOUT_GPU_PLUGINS` prelude hides the jaxlib GPU plugins that the dev and CI venvs have, as on
a machine where only jax and Triton are installed.
"""

import textwrap

import pytest

from tests.support.subprocess_utils import (WITHOUT_GPU_PLUGINS, advertised_entry_point, last_line,
                                            run_python)

pytestmark = pytest.mark.process  # each test starts Python processes

# Lowers the shared add kernel for each GPU platform and prints, per platform, either the
# compute capability the emitted call carries or the first line of the error.
LOWER_FOR_BOTH_PLATFORMS = """
import jax, jax.numpy as jnp
import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from tests.support.kernels import add

def lower(platform):
    x = jax.ShapeDtypeStruct((1024,), jnp.float32)
    try:
        lowered = jax.jit(add).trace(x, x).lower(lowering_platforms=(platform,))
    except Exception as err:
        return f"{type(err).__name__}: {str(err).splitlines()[0]}"
    (call,) = jtr.kernel_calls(lowered)
    return f"cc={call.summary()['launches'][0]['compute_capability']}"

assert _vendors.installed_gpu_platforms() == (), "the prelude must hide the GPU plugins"
"""


def run_without_plugins(code: str, *, lowering_helpers: bool = True, env=None, prelude=""):
    prelude += WITHOUT_GPU_PLUGINS + (LOWER_FOR_BOTH_PLATFORMS if lowering_helpers else "")
    return run_python(prelude + textwrap.dedent(code), env=env)


def test_the_environment_variable_alone_lowers_for_both_platforms_without_plugins():
    result = run_without_plugins("""
        print(lower("cuda"), lower("rocm"))
    """, env={"JAX_TRITON_ROCM_TARGET_ARCH": "cuda=sm_90,rocm=gfx942"})
    assert last_line(result) == "cc=90 cc=94", result.stderr[-3000:]


def test_target_arch_alone_lowers_for_its_platform_without_plugins():
    result = run_without_plugins("""
        with jtr.target_arch(rocm="gfx950"):
            print(lower("rocm"))
    """)
    assert last_line(result) == "cc=95", result.stderr[-3000:]


def test_nothing_named_and_no_plugin_gives_the_packages_error_for_each_platform():
    result = run_without_plugins("""
        for platform in ("cuda", "rocm"):
            print(lower(platform))
    """, env={"JAX_TRITON_ROCM_TARGET_ARCH": ""})
    lines = result.stdout.strip().splitlines()[-2:]
    assert len(lines) == 2, result.stderr[-3000:]
    for platform, example, line in zip(("cuda", "rocm"), ("sm_90", "gfx942"), lines):
        assert line.startswith(f"RuntimeError: Lowering triton_call for platform '{platform}'"), line
        assert "not installed" in line, line
        assert f"target_arch({platform}='{example}')" in line, line
        assert f"JAX_TRITON_ROCM_TARGET_ARCH='{platform}={example}'" in line, line
        assert "MLIR translation rule" not in line, line


def test_jax_start_up_registers_both_platforms_without_plugins(tmp_path):
    result = run_without_plugins("""
        import jax
        jax.devices()  # starts the backends, which runs the package's initialize()
        import jax_triton_rocm as jtr
        print(jtr.registered_platforms())
    """, lowering_helpers=False, prelude=advertised_entry_point(tmp_path))
    assert last_line(result) == "('cuda', 'rocm')", result.stderr[-3000:]
