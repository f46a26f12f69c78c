"""Quiet by default: the package's own work makes Triton print no warning of its making, and a
test process says nothing while its interpreter tears down."""

import pytest

from tests.support.subprocess_utils import run_python, run_script

# Lowers a plain call, one with backend_options (which reads the backend's option names), an fp8
# one (which reads its fp8 dtypes) and one whose arguments do not line up (which asks Triton's
# front end) for both vendors, with TRITON_DEFAULT_FP_FUSION unset as on a new user's machine;
# then asks Triton's backend itself without saying whether to fuse, which Triton 3.9 warns
# about: the test sees the warning only from that last line.
LOWER_THEN_ASK_TRITON = """
import os, warnings
os.environ.pop("TRITON_DEFAULT_FP_FUSION", None)
warnings.simplefilter("always")
import jax, jax.numpy as jnp
import jax_triton_rocm as jtr
from tests.support import kernels

x = jnp.arange(1024, dtype=jnp.float32)
for platform, arch in (("cuda", "sm_90"), ("rocm", "gfx942")):
    with jtr.target_arch(**{platform: arch}):
        for options in ({}, {"backend_options": {"num_warps": 2}}):
            jax.jit(lambda x: jtr.triton_call(x, x, x.size, kernel=kernels.add_kernel,
                                              out_shape=x, grid=(4,), BLOCK=256, **options)
                    ).trace(x).lower(lowering_platforms=(platform,))
        fp8 = x.astype(jnp.float8_e5m2)
        jax.jit(lambda x: jtr.triton_call(x, x.size, kernel=kernels.copy_kernel, out_shape=x,
                                          grid=(4,), BLOCK=256)
                ).trace(fp8).lower(lowering_platforms=(platform,))
        try:  # arguments that do not line up: the package asks Triton's front end why
            jax.jit(lambda x: jtr.triton_call(x, x.size, x, kernel=kernels.add_kernel,
                                              out_shape=x, grid=(4,), BLOCK=256)
                    ).trace(x).lower(lowering_platforms=(platform,))
        except TypeError as err:
            assert "do not line up" in str(err), err
        else:
            raise AssertionError("a call whose arguments do not line up lowered")
print("LOWERED", flush=True)
import sys
print("LOWERED", file=sys.stderr, flush=True)
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
make_backend(GPUTarget("cuda", 90, 32)).parse_options({})
"""


@pytest.mark.process
def test_lowering_for_both_vendors_leaves_tritons_fp_fusion_warning_unsaid():
    import triton

    result = run_python(LOWER_THEN_ASK_TRITON)
    assert result.returncode == 0 and "LOWERED" in result.stdout, result.stderr[-3000:]
    before, after = result.stderr.split("LOWERED", 1)
    assert "TRITON_DEFAULT_FP_FUSION" not in before, before[-3000:]
    if hasattr(triton.knobs.language, "fp_fusion_enabled"):  # Triton 3.9: it does warn
        assert "TRITON_DEFAULT_FP_FUSION is unset" in after, after[-3000:]


# A test module that writes to stderr after every exit handler registered before the session's
# end ran, as nanobind's leak report does while the interpreter tears down; run by a pytest of its
# own with this checkout's conftest, in one process and with pytest-xdist's workers. pytest puts
# the original stderr back after its last hook, so what silences the teardown must come later.
TEARDOWN_NOISE = """
import atexit, os
{load}
atexit.register(os.write, 2, b"TEARDOWN NOISE\\n")


def test_nothing():
    pass
"""


@pytest.mark.process
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one process", "xdist workers"])
@pytest.mark.parametrize("load,silenced", [("import triton._C.libtriton", True), ("", False)])
def test_a_test_process_that_loaded_triton_says_nothing_while_it_tears_down(load, silenced,
                                                                             workers, tmp_path):
    (tmp_path / "test_noise.py").write_text(TEARDOWN_NOISE.format(load=load))
    (tmp_path / "run.py").write_text("import sys, pytest\nsys.exit(pytest.main(sys.argv[1:]))\n")
    result = run_script(tmp_path / "run.py", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                        *workers, "--rootdir", str(tmp_path), str(tmp_path / "test_noise.py"))
    assert result.returncode == 0 and "1 passed" in result.stdout, (result.stdout[-3000:],
                                                                    result.stderr[-3000:])
    assert ("TEARDOWN NOISE" not in result.stderr) == silenced, result.stderr[-3000:]
