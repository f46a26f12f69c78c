"""On an NVIDIA GPU: jax.vmap of triton_call, and the CPU interpreter against the GPU."""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton

import jax_triton_rocm as jtr
from tests.support import batching_kernels, kernels
from tests.support.kernels import random_normal

pytestmark = pytest.mark.gpu


def test_vmap_loop_matches_the_unbatched_calls():
    x, y = random_normal(0, (7, 5000)), random_normal(1, (5000,))
    out = jax.jit(jax.vmap(kernels.add, in_axes=(0, None)))(x, y)
    ref = jnp.stack([kernels.add(x[i], y) for i in range(7)])
    np.testing.assert_array_equal(out, ref)


def test_nested_vmap_loop_with_aliases():
    x, y = random_normal(2, (3, 4, 2048)), random_normal(3, (4, 2048))
    out = jax.jit(jax.vmap(jax.vmap(kernels.add_inplace), in_axes=(0, None)))(x, y)
    np.testing.assert_allclose(out, x + y[None], rtol=1e-6)


def test_vmap_of_matmul_over_a_non_leading_axis():
    a, b = random_normal(4, (128, 3, 64)), random_normal(5, (64, 96))
    out = jax.jit(jax.vmap(kernels.matmul, in_axes=(1, None)))(a, b)
    for i in range(3):
        assert kernels.matmul_relative_error(out[i], a[:, i], b) < 1e-2


def _launch_grid(fn, *args):
    """The grid of the one kernel launch `fn(*args)` lowers to on this GPU."""
    (call,) = jtr.kernel_calls(jax.jit(fn).trace(*args).lower())
    return call.summary()["launches"][0]["grid"]


def test_batch_grid_axis_matches_the_unbatched_calls():
    x, y = random_normal(6, (5, 3000)), random_normal(7, (5, 3000))
    fn = jax.vmap(batching_kernels.batched_add)
    ref = jnp.stack([batching_kernels.batched_add(x[i], y[i]) for i in range(5)])
    np.testing.assert_array_equal(jax.jit(fn)(x, y), ref)
    assert _launch_grid(fn, x, y) == (24, 5, 1)  # one launch, not a loop of (24, 1, 1)


def test_batch_grid_axis_nested_vmap_with_aliases_and_an_unbatched_operand():
    x, y = random_normal(8, (2, 3, 1024)), random_normal(9, (1024,))
    fn = jax.vmap(jax.vmap(batching_kernels.batched_add_inplace, in_axes=(0, None)),
                  in_axes=(0, None))
    np.testing.assert_allclose(jax.jit(fn)(x, y), x + y, rtol=1e-6)
    assert _launch_grid(fn, x, y) == (8, 6, 1)


@pytest.mark.parametrize("name", ["add", "softmax", "matmul_bf16", "scale_shift", "atomic_sum"])
def test_cpu_interpreter_gives_the_gpus_numbers(name):
    x, y = random_normal(10, (3000,)), random_normal(11, (3000,))
    m = random_normal(12, (32, 300))
    a, b = random_normal(13, (64, 48), jnp.bfloat16), random_normal(14, (48, 80), jnp.bfloat16)
    cases = {
        "add": (kernels.add, (x, y)),
        "softmax": (kernels.softmax, (m,)),
        "matmul_bf16": (lambda a, b: kernels.matmul(a, b, block_m=32, block_n=32,
                                                    block_k=16), (a, b)),
        "scale_shift": (lambda x: jtr.triton_call(
            x, 2.5, -3, True, x.size, kernel=kernels.scale_shift_kernel, out_shape=x,
            grid=(triton.cdiv(x.size, 512),), BLOCK=512), (x,)),
        "atomic_sum": (lambda x: jtr.triton_call(
            x, x.size, kernel=kernels.atomic_sum_kernel,
            out_shape=jax.ShapeDtypeStruct((1,), jnp.float32), grid=(3,), BLOCK=1024,
            zeroed_outputs=(0,)), (x,)),
    }
    fn, args = cases[name]
    cpu = jax.devices("cpu")[0]
    on_gpu = jax.jit(fn)(*args)
    on_cpu = jax.jit(fn)(*[jax.device_put(a, cpu) for a in args])
    assert on_cpu.devices() == {cpu}
    np.testing.assert_allclose(np.asarray(on_cpu, np.float32), np.asarray(on_gpu, np.float32),
                               rtol=2e-2 if name == "matmul_bf16" else 1e-5, atol=1e-5)
