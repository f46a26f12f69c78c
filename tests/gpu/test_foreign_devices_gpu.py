"""`triton_call(..., compute_capability=...)` where the devices are of another architecture.

A binary loads only on its own architecture, and PTX on its own and newer ones (unless it uses
an architecture's own features, `sm_90a`). So a call compiled for another architecture than its
devices' carries its PTX, which jaxlib's ptxas builds for the devices, or is refused at lowering
where not even the PTX can run there. The devices are those named by `target_arch`, else the
computation's (stood in here, on the CPU, by patching the context's device lookup), except for
`jax.export`, whose result runs elsewhere.

This file holds the tests that need a GPU (mark `gpu`); the others are in
tests/cpu/test_foreign_devices.py.
"""


import jax
import jax.numpy as jnp
import pytest

from tests.support import kernels


@pytest.mark.gpu
@pytest.mark.cuda_only(reason="compute_capability names a CUDA architecture")
@pytest.mark.parametrize("add,route", [(kernels.add, {}), (kernels.sized_add, {}),
                                       (kernels.sized_add, {"xla_native": True})],
                         ids=["runtime length", "constexpr length", "constexpr length, XLA's call"])
@pytest.mark.usefixtures("fresh_caches")
def test_a_call_compiled_for_an_older_gpu_runs_on_this_one(add, route):
    import numpy as np

    from tests.support.gpu_utils import gpu_devices

    capability = int(float(gpu_devices()[0].compute_capability) * 10)
    if capability <= 80:
        pytest.skip(f"needs a GPU newer than sm_80; this one is sm_{capability}")
    x = jax.random.normal(jax.random.key(0), (4096,), jnp.float32)
    out = jax.jit(lambda a: add(a * 2, a, compute_capability=80, **route))(x)  # made in the jit
    np.testing.assert_allclose(out, 3 * x, rtol=1e-6)
