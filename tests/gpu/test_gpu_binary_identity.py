"""Same-named kernels with different binaries each run their own code, in one process.

jaxlib keys loaded modules by kernel name and the `ptx` field, not by the binary. The CUDA and
ROCm encodings are one and the same (binary in `module_image`, `ptx` a digest of it), so these
launches on any GPU check the encoding ROCm uses.
"""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support import kernels

pytestmark = pytest.mark.gpu

N = 4096


def _inputs(seed):
    x = jax.random.normal(jax.random.key(seed), (N,), jnp.float32)
    return x, jax.random.normal(jax.random.key(seed + 1), (N,), jnp.float32)


def _call(kernel, x, y, **kwargs):
    return jax.jit(lambda x, y: jtr.triton_call(
        x, y, x.size, kernel=kernel, out_shape=x, grid=(triton.cdiv(N, 256),), BLOCK=256,
        **kwargs))(x, y)


def test_two_kernels_with_one_name_and_different_bodies_each_run_their_own():
    plus, minus = kernels.elementwise_kernel("x + y"), kernels.elementwise_kernel("x - y")
    assert plus.__name__ == minus.__name__
    x, y = _inputs(0)
    np.testing.assert_allclose(_call(plus, x, y), x + y, rtol=1e-6)
    np.testing.assert_allclose(_call(minus, x, y), x - y, rtol=1e-6)


@triton.jit
def scaled_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * SCALE + tl.load(y_ptr + offsets, mask=mask), mask=mask)


SCALES = (1, 3, 5)
# x * SCALE + y is one fused multiply-add on the GPU: an ulp from the separate ops of the
# reference, and far from the result of another SCALE.
FMA_TOLERANCE = dict(rtol=1e-5, atol=1e-6)

tuned_scaled_kernel = triton.autotune(
    configs=[triton.Config({"SCALE": s}, num_warps=4) for s in SCALES], key=["n"],
)(scaled_kernel)


def test_constexpr_variants_of_one_kernel_each_run_their_own():
    x, y = _inputs(2)
    for scale in (5, 1, 3):
        np.testing.assert_allclose(_call(scaled_kernel, x, y, SCALE=scale), x * scale + y,
                                   **FMA_TOLERANCE)


def test_autotune_configs_with_different_results_each_run_their_own():
    x, y = _inputs(4)
    # jaxlib runs every config of the autotuned call, loading each one's module, and keeps one:
    # its result is one config's own.
    tuned = np.asarray(_call(tuned_scaled_kernel, x, y, serialized_metadata=b"tuned-scale"))
    matches = [s for s in SCALES if np.allclose(tuned, x * s + y, **FMA_TOLERANCE)]
    assert len(matches) == 1, "the autotuned result is no config's own"
    # The same binaries, launched one by one after the autotuner loaded them all.
    for scale in (3, 5, 1):
        np.testing.assert_allclose(_call(scaled_kernel, x, y, SCALE=scale), x * scale + y,
                                   **FMA_TOLERANCE)
