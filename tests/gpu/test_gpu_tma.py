"""Tensor descriptors as TMA on NVIDIA sm_90+ (the H200): a host-side `TensorDescriptor` becomes
a tensor map that jaxlib's CUDA plugin (jax 0.11.1+) encodes at launch, and a descriptor built
inside the kernel uses Triton's global scratch memory, which jaxlib 0.11.1+ allocates. The same
calls on other GPUs (plain parameters, no scratch) are in test_operand_routes.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _compat, _env
from tests.support import idiom_kernels as ik
from tests.support.lowering_utils import tma_block_shapes
from tests.support.surface_kernels import (desc_block_kernel, device_desc_copy_kernel,
                                           gluon_tma_copy_kernel)

pytestmark = [pytest.mark.gpu,
              pytest.mark.cuda_only("TMA is NVIDIA's tensor memory accelerator (sm_90+)")]


@pytest.fixture(autouse=True)
def sm90_or_newer():
    capability = float(jax.devices()[0].compute_capability)
    if capability < 9.0:
        pytest.skip(f"TMA needs sm_90 or newer; this GPU is sm_{int(capability * 10)}")


def descriptor_copy(base, **fields):
    """Rows 16..31 of a 20-row view of `base` (4 read, 12 padded)."""
    desc = jtr.TensorDescriptor(base, (20, base.shape[1]), (base.shape[1], 1),
                                (16, base.shape[1]), **fields)
    return jtr.triton_call(desc, kernel=desc_block_kernel, grid=1, M=16, N=base.shape[1],
                           out_type=jax.ShapeDtypeStruct((16, base.shape[1]), base.dtype))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16, jnp.float8_e5m2, jnp.uint16])
def test_a_host_descriptor_travels_as_a_tma_map(dtype):
    n = 64 if np.dtype(dtype).itemsize > 1 else 128
    base = jax.random.normal(jax.random.key(0), (40, n)).astype(dtype)
    fn = jax.jit(lambda b: descriptor_copy(b * 1))
    [call] = jtr.kernel_calls(fn.lower(base))
    assert call.summary()["launches"][0]["parameters"][0] == "tensor_descriptor"
    out = np.asarray(fn(base)).astype(np.float32)
    np.testing.assert_array_equal(out[:4], np.asarray(base[16:20]).astype(np.float32))
    np.testing.assert_array_equal(out[4:], 0)


def test_tma_rounds_float32_to_tf32_when_asked():
    base = jax.random.normal(jax.random.key(1), (40, 64), jnp.float32)
    out = jax.jit(lambda b: descriptor_copy(b * 1, round_f32_to_tf32=True, padding="nan"))(base)
    expected = jax.lax.reduce_precision(base[16:20], exponent_bits=8, mantissa_bits=10)
    assert not np.array_equal(expected, base[16:20])
    np.testing.assert_array_equal(out[:4], expected)
    assert np.isnan(np.asarray(out[4:])).all()


@pytest.mark.parametrize("shape", [(32, 32), (8, 64), (16, 128)])
def test_a_descriptor_built_in_the_kernel_gets_global_scratch(shape):
    x = jax.random.uniform(jax.random.key(2), shape)
    fn = jax.jit(lambda x: jtr.triton_call(x + 0, kernel=device_desc_copy_kernel,
                                           out_type=x, grid=1,
                                           M=shape[0], N=shape[1]))
    [call] = jtr.kernel_calls(fn.lower(x))
    assert call.message.kernel_call.kernel.global_scratch_size > 0
    np.testing.assert_array_equal(fn(x), x)


@pytest.mark.parametrize("shape,swizzle", [((16, 32), 128), ((16, 16), 64), ((16, 8), 32)])
def test_a_gluon_kernel_copies_through_tma(shape, swizzle):
    from triton.experimental.gluon import language as gl

    x = jax.random.uniform(jax.random.key(3), shape)
    layout = gl.NVMMASharedLayout(swizzle, element_bitwidth=32, rank=2)
    out = jax.jit(lambda x: jtr.triton_call(
        jtr.TensorDescriptor.from_array(x + 0, list(shape), layout=layout),
        kernel=gluon_tma_copy_kernel, out_type=x, grid=1, M=shape[0], N=shape[1],
        num_warps=4))(x)
    np.testing.assert_array_equal(out, x)


def _matmul_operands():
    """fp16 matrices whose K (160) is no multiple of the configs' BLOCK_K: TMA pads the tail."""
    a = jax.random.normal(jax.random.key(4), (256, 160)).astype(jnp.float16)
    b = jax.random.normal(jax.random.key(5), (160, 192)).astype(jnp.float16)
    return a, b, np.asarray(a, np.float32) @ np.asarray(b, np.float32)


def test_a_descriptor_matmul_autotuned_with_pre_hooks_runs_each_config_with_its_blocks(
        tmp_path, monkeypatch):
    """jaxlib's autotuner times every config, each launching with the block shapes its
    pre_hook set; the operands are computed in the same program."""
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))  # no choice remembered
    a, b, expected = _matmul_operands()
    fn = jax.jit(lambda a, b: ik.desc_matmul(a * 1, b + 0))
    [call] = jtr.kernel_calls(fn.lower(a, b))
    configs = call.message.autotuned_kernel_call.configs
    assert [tma_block_shapes(c.kernel_call) for c in configs] == [
        [(m, k), (k, n)] for m, n, k in ik.MATMUL_TILES]
    np.testing.assert_allclose(fn(a, b), expected, rtol=1e-3, atol=1e-2)


def test_autotune_remembers_a_descriptor_matmuls_config_with_its_blocks(tmp_path, monkeypatch,
                                                                         fresh_caches):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))
    a, b, expected = _matmul_operands()
    program = lambda a, b: ik.desc_matmul(a * 1, b + 0)  # noqa: E731
    np.testing.assert_allclose(jtr.autotune(program, a, b), expected, rtol=1e-3, atol=1e-2)
    [call] = jtr.kernel_calls(jax.jit(program).lower(a, b))
    assert call.target == _compat.FFI_CALL_NAME  # the chosen config alone, a plain kernel call
    assert tma_block_shapes(call.message.kernel_call) in [
        [(m, k), (k, n)] for m, n, k in ik.MATMUL_TILES]
    np.testing.assert_allclose(jax.jit(program)(a, b), expected, rtol=1e-3, atol=1e-2)
