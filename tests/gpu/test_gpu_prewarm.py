"""The ROCm prewarm's launch, on whatever GPU is present.

The prewarm launches a freshly encoded kernel call from inside the lowering that produced it,
for path-delivered HSACO on hosts with several devices. On an AMD GPU these tests take that path
for real (path delivery, two devices pretended); on an NVIDIA GPU the same machinery runs from
inside the CUDA lowering: the encoded call is emitted by the same `emit`, jitted on its own and
run on the first device while the outer lowering waits; the outer computation must then run and
give the right answer.
"""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _cuda
from jax_triton_rocm.backends.hip import _hip_files
from jax_triton_rocm.base import _env
from tests.support import kernels
from tests.support.gpu_utils import gpu_platform

pytestmark = pytest.mark.gpu


@pytest.fixture
def prewarm(monkeypatch, default_route, fresh_caches):  # the prewarm is jaxlib's route's
    """Makes every new kernel call prewarm on the present GPU; yields the launches' outputs."""
    platform = gpu_platform()
    outputs = []
    launch = _hip_files.launch_for_prewarm

    def recording_launch(*args, **kwargs):
        outputs.append(launch(*args, **kwargs))
        return outputs[-1]

    monkeypatch.setattr(_hip_files, "local_device_count", lambda: 2)
    monkeypatch.setattr(_hip_files, "launch_for_prewarm", recording_launch)
    if platform == "rocm":
        monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, "path")
    else:
        def after_encode(self, lowered, ctx, emit):
            _hip_files.prewarm_once(lowered, tuple(ctx.avals_in), tuple(ctx.avals_out), emit,
                                      platform=platform)

        monkeypatch.setattr(_cuda.CudaBackend, "after_encode", after_encode)
    return outputs


def test_prewarm_launch_from_inside_a_lowering_then_the_real_call(prewarm):
    x = jax.random.normal(jax.random.key(0), (4096,))
    y = jax.random.normal(jax.random.key(1), (4096,))
    out = jax.jit(lambda a, b: kernels.add(a, b, block=512))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    assert len(prewarm) == 1
    out = jax.jit(lambda a, b: kernels.add(b, a, block=512))(x, y)  # same kernel call: no launch
    assert len(prewarm) == 1


@triton.jit
def count_up_kernel(counts_in_ptr, n, counts_ptr, BLOCK: tl.constexpr):
    """counts += 1, in place: reads its output, which aliases the input (counts_in_ptr)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(counts_ptr + offsets, tl.load(counts_ptr + offsets, mask=mask) + 1, mask=mask)


def test_prewarm_of_an_in_place_kernel_reads_zeros_through_its_alias(prewarm):
    def count_up(counts):
        return jtr.triton_call(counts, counts.size, kernel=count_up_kernel, out_shape=counts,
                               grid=(triton.cdiv(counts.size, 256),), BLOCK=256,
                               input_output_aliases={0: 0})

    counts = jnp.arange(4096, dtype=jnp.int32)
    np.testing.assert_array_equal(jax.jit(count_up)(counts), counts + 1)
    (prewarm_out,) = prewarm[0]
    np.testing.assert_array_equal(prewarm_out, np.ones(4096, np.int32))
