"""Kernels written as Triton's tutorials write them (issue 27), on whichever GPU JAX sees: a
softmax with a `num_stages` parameter filled through `constexprs=`, and an attention forward
whose configs are pruned on its keyword sequence length, each fed operands computed in the same
program and compared with jax.numpy. The descriptor matmul with pre_hooks needs TMA (sm_90+):
it is in test_gpu_tma.py. The CPU twins of these tests are in test_idioms.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env
from tests.support import idiom_kernels as ik

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("num_stages", [1, 3])
def test_a_softmax_with_a_num_stages_parameter_matches_jnp(num_stages):
    x = jax.random.normal(jax.random.key(0), (512, 1000))
    out = jax.jit(lambda x: ik.softmax(x * 2, num_stages=num_stages, programs=64))(x)
    np.testing.assert_allclose(out, jax.nn.softmax(x * 2, axis=1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n_ctx", [80, 256])
def test_attention_pruned_on_its_keyword_sequence_length_matches_jnp(n_ctx, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))  # no choice remembered
    keys = jax.random.split(jax.random.key(1), 3)
    q, k, v = [jax.random.normal(key, (4, n_ctx, 64)).astype(jnp.float16) for key in keys]
    fn = jax.jit(lambda q, k, v: ik.attention(q * 1, k, v, 0.125))
    [call] = jtr.kernel_calls(fn.lower(q, k, v))
    kept = [c.description for c in call.message.autotuned_kernel_call.configs]
    assert kept == [str(c) for c in ik.ATTENTION_CONFIGS if c.kwargs["BLOCK_M"] <= n_ctx]
    out = np.asarray(fn(q, k, v), np.float32)
    np.testing.assert_allclose(out, ik.attention_reference(q, k, v, 0.125), atol=2e-2)
