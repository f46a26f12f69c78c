"""Where XLA puts the package's calls, and that both places give the same bits.

By default a plain call is jaxlib's `triton_kernel_call_ffi`, which XLA records into its command
buffers (on CUDA with XLA's default flags); `JAX_TRITON_ROCM_COMMAND_BUFFERS=0` emits the same
opaque under the package's registration of jaxlib's handler, which XLA must launch by itself
while its own kernels around it stay where XLA puts them. A chain of softmaxes on an operand
computed earlier in the same jit, with XLA's own kernels between them, read back from the
program XLA compiled (`compiled.as_text()`, after XLA's command-buffer pass). The reader of that
text runs on the CPU too."""

import functools
import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_triton_rocm.base import _compat, _env
from tests.support import kernels
from tests.support.gpu_utils import gpu_platform

CALLS = 8
_HEAD = re.compile(r"^(?:ENTRY\s+)?%?([\w.\-]+)\s.*\{\s*$")
_TARGET = re.compile(r'custom_call_target="([^"]+)"')


def _chain(x, softmax):
    y = jnp.tanh(x) * 3.0
    for _ in range(CALLS):
        y = softmax(y * 4.0 - 1.0)
    return y


def computations_of_calls(hlo_text: str) -> dict[str, list[str]]:
    """For each custom-call target in an HLO module's text, the computation of each call."""
    found: dict[str, list[str]] = {}
    current = "?"
    for line in hlo_text.splitlines():
        head = _HEAD.match(line)
        if head:
            current = head.group(1)
            continue
        target = _TARGET.search(line)
        if target:
            found.setdefault(target.group(1), []).append(current)
    return found


def test_computations_of_calls_reads_an_hlo_module():
    text = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[4]{0}}

%command_buffer (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %c = f32[4]{0} custom-call(%p), custom_call_target="triton_kernel_call_ffi"
}

ENTRY %main.3 (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  %d = f32[4]{0} custom-call(%x), custom_call_target="jax_triton_rocm_kernel_call_ffi"
  ROOT %r = f32[4]{0} call(%d), to_apply=%command_buffer
}
"""
    assert computations_of_calls(text) == {"triton_kernel_call_ffi": ["command_buffer"],
                                           "jax_triton_rocm_kernel_call_ffi": ["main.3"]}


def _compiled(setting: str, monkeypatch, x):
    monkeypatch.setenv(_env.ENV_COMMAND_BUFFERS, setting)
    jax.clear_caches()  # JAX's lowering cache does not see the variable
    compiled = jax.jit(functools.partial(_chain, softmax=kernels.softmax)).lower(x).compile()
    return compiled, computations_of_calls(compiled.as_text())


@pytest.mark.gpu
def test_turned_off_the_calls_run_outside_command_buffers_with_the_same_bits(
        monkeypatch, default_route, fresh_caches):
    x = jax.random.normal(jax.random.key(11), (256, 512), jnp.float32)
    poison = jnp.full((1 << 24,), jnp.nan, jnp.float32).block_until_ready()
    del poison  # freed memory holds NaNs: a kernel that reads what it did not write shows it

    buffered, where_on = _compiled("1", monkeypatch, x)
    on = np.asarray(buffered(x))
    unbuffered, where_off = _compiled("0", monkeypatch, x)
    off = np.asarray(unbuffered(x))
    kept = unbuffered(x)  # the last result kept alive while the next runs, as a training loop
    again = np.asarray(unbuffered(x))
    del kept

    assert where_off.get(_compat.FFI_CALL_NAME) is None
    assert len(where_off[_compat.UNBUFFERED_CALL_NAME]) == CALLS
    assert not [c for c in where_off[_compat.UNBUFFERED_CALL_NAME]
                if c.startswith("command_buffer")], where_off
    assert len(where_on[_compat.FFI_CALL_NAME]) == CALLS
    if gpu_platform() == "cuda" and "command_buffer" not in os.environ.get("XLA_FLAGS", ""):
        # XLA's default on CUDA records typed-FFI calls marked compatible, as jaxlib's are.
        assert any(c.startswith("command_buffer") for c in where_on[_compat.FFI_CALL_NAME]), \
            where_on
    np.testing.assert_array_equal(off, on)
    np.testing.assert_array_equal(again, on)
    np.testing.assert_allclose(on, _chain(x, functools.partial(jax.nn.softmax, axis=-1)),
                               rtol=1e-5, atol=1e-6)
