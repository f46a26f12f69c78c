"""The ROCm prewarm's launch, run on an NVIDIA GPU.

The prewarm launches a freshly encoded kernel call from inside the lowering that produced it.
Nothing in that machinery is AMD-specific, so it runs here from inside a CUDA lowering: the
encoded call is emitted by the same `emit`, jitted on its own and run on the first device, while
the outer lowering waits; the outer computation must then run and give the right answer.
"""

import numpy as np
import pytest

import jax

import jax_triton_rocm as jtr
from jax_triton_rocm import _cuda, _hip
from tests import kernels

pytestmark = pytest.mark.gpu


def test_prewarm_launch_from_inside_a_lowering_then_the_real_call(monkeypatch):
    launched = []

    def after_encode(self, lowered, ctx, operands):
        launched.append(_hip.prewarm_once(lowered, tuple(ctx.avals_in), tuple(ctx.avals_out),
                                          platform="cuda"))

    monkeypatch.setattr(_hip, "local_device_count", lambda: 2)
    monkeypatch.setattr(_cuda.CudaLowering, "after_encode", after_encode)
    jtr.clear_caches()
    x = jax.random.normal(jax.random.key(0), (4096,))
    y = jax.random.normal(jax.random.key(1), (4096,))
    out = jax.jit(lambda a, b: kernels.add(a, b, block=512))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    assert launched == [True]
    out = jax.jit(lambda a, b: kernels.add(b, a, block=512))(x, y)  # same kernel call: no launch
    assert launched == [True, False]
