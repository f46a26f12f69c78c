"""Lowering a compiled kernel again at a new shape: what is redone, and what jaxlib's call carries
(XLA's: `test_xla_route`)."""

import jax
import jax.numpy as jnp
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env, _state
from jax_triton_rocm.kernel import _layout
from tests.support import kernels
from tests.support.lowering_utils import capture_one, lower_one, spec

def _copy(x, n):
    return jtr.triton_call(x, n, kernel=kernels.copy_kernel, out_shape=x, grid=(4,), BLOCK=256)


@pytest.fixture
def layouts(monkeypatch):
    """Counts the argument layouts `triton_call` runs to check a call, none checked or kept
    before."""
    laid_out = []
    original = _layout.lay_out_arguments  # what the lowering and the call's check both run

    def counting(jit_fn, backend, **kwargs):
        laid_out.append(kwargs["positional"])
        return original(jit_fn, backend, **kwargs)

    monkeypatch.setattr(_layout, "lay_out_arguments", counting)
    for cache in ("CHECKED_CALLS", "CALL_LAYOUTS"):
        monkeypatch.setattr(_state, cache,
                            _state.BoundedCache(_env.ENV_CALL_CACHE_SIZE))
    return laid_out


def test_a_call_at_a_new_length_is_not_checked_again(layouts):
    for length in (1000, 1003):
        jax.make_jaxpr(lambda x, n=length: _copy(x, n))(jnp.ones((length,), jnp.float32))
    assert len(layouts) == 1


def test_a_scalar_of_another_type_is_checked_again(layouts):
    x = jnp.ones((1024,), jnp.float32)
    jax.make_jaxpr(lambda x: _copy(x, 1000))(x)
    jax.make_jaxpr(lambda x: _copy(x, 2**40 + 1))(x)  # i64 now, not i32 (neither is "D")
    jax.make_jaxpr(lambda x: _copy(x, 1))(x)  # 1 becomes a constexpr
    assert len(layouts) == 3


def test_a_new_length_keeps_the_kernel_and_carries_the_new_grid_and_length():
    def lowered(length):
        x = spec((length,), jnp.float32)
        return lower_one(lambda x, y: kernels.add(x, y), x, x,
                         platform="cuda").message.kernel_call

    compiles = _state.COMPILED_KERNELS.stats["compiles"]
    first, second = lowered(8192), lowered(8208)
    # The first may compile, never both.
    assert _state.COMPILED_KERNELS.stats["compiles"] <= compiles + 1
    assert second.kernel == first.kernel
    assert (first.grid_0, second.grid_0) == (32, 33)
    assert [p.i32 for p in second.parameters if p.WhichOneof("value") == "i32"] == [8208]


def test_a_new_length_gives_the_call_it_would_give_in_a_fresh_process():
    x = spec((8224,), jnp.float32)
    lowered = capture_one(lambda x, y: kernels.add(x, y), spec((8192,), jnp.float32),
                          spec((8192,), jnp.float32), platform="cuda")
    again = capture_one(lambda x, y: kernels.add(x, y), x, x, platform="cuda")
    jtr.clear_caches()
    fresh = capture_one(lambda x, y: kernels.add(x, y), x, x, platform="cuda")
    assert again.kernels == lowered.kernels
    assert fresh.serialized == again.serialized
    assert fresh.opaque == again.opaque


SHIFT = tl.constexpr(3)


@triton.jit
def shift_kernel(x_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + SHIFT, mask=mask)


@triton.jit
def scaled_kernel(x_ptr, S: tl.constexpr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * S, mask=mask)


@triton.jit
def offset_kernel(x_ptr, k, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + k, mask=mask)


@triton.heuristics({"BLOCK": lambda meta: 256 if meta["n"] < 5000 else 512})
@triton.jit
def block_by_length_kernel(x_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def _by_length(kernel, length, *scalars, **metaparams):
    """The `LoweredCall` of `kernel` on float32[length] with `scalars`, then the length."""
    def call(x):  # jaxlib's route: a length of 1 is a constexpr, which XLA's would take
        return jtr.triton_call(x, *scalars, x.size, kernel=kernel, out_shape=x,
                               grid=lambda meta: (triton.cdiv(meta["n"], meta["BLOCK"]),),
                               xla_native=False, **metaparams)

    return capture_one(call, spec((length,), jnp.float32), platform="cuda")


def test_a_callable_grid_sees_the_new_length():
    first, second = (_by_length(kernels.copy_kernel, n, BLOCK=256) for n in (4096, 4352))
    assert second.kernels == first.kernels
    assert (first.calls[0].grid, second.calls[0].grid) == ((16, 1, 1), (17, 1, 1))


@pytest.mark.parametrize("lengths", [(4096, 4100), (4096, 1)],
                         ids=["divisible by 16 or not", "equal to 1 (a constexpr)"])
def test_a_length_that_compiles_otherwise_gets_its_own_kernel(lengths):
    first, second = (_by_length(kernels.copy_kernel, n, BLOCK=256) for n in lengths)
    assert second.kernels[0].key != first.kernels[0].key


def test_a_scalar_of_another_type_gets_its_own_kernel_at_a_new_shape():
    first = _by_length(offset_kernel, 4096, 5, BLOCK=256)
    second = _by_length(offset_kernel, 4112, 2**40 + 3, BLOCK=256)  # i64, and not "D" either
    assert second.kernels[0].key != first.kernels[0].key
    assert [p.kind for p in second.calls[0].params] == ["array", "i64", "i32", "array"]


def test_a_positional_constexpr_gets_its_own_kernel_at_a_new_shape():
    first = _by_length(scaled_kernel, 4096, 2.0, BLOCK=256)
    second = _by_length(scaled_kernel, 4112, 3.0, BLOCK=256)
    assert "3.000000e+00" in second.kernels[0].ttir and second.kernels != first.kernels


def test_a_rebound_global_gets_its_own_kernel_at_a_new_shape():
    global SHIFT
    first = _by_length(shift_kernel, 4096, BLOCK=256)
    old, SHIFT = SHIFT, tl.constexpr(5)
    try:
        second = _by_length(shift_kernel, 4112, BLOCK=256)
    finally:
        SHIFT = old
    assert second.kernels[0].key != first.kernels[0].key


def test_a_heuristic_that_reads_the_length_is_asked_again_at_a_new_shape():
    first, second = (_by_length(block_by_length_kernel, n) for n in (4096, 8192))
    assert (first.calls[0].grid, second.calls[0].grid) == ((16, 1, 1), (16, 1, 1))
    assert second.kernels[0].key != first.kernels[0].key  # BLOCK 256, then 512


def test_a_new_length_reuses_the_plan_and_makes_no_compile_job(monkeypatch):
    from jax_triton_rocm.compile import _compile

    def lowered(length):
        x = spec((length,), jnp.float32)
        return capture_one(lambda x, y: kernels.add(x, y), x, x, platform="cuda")

    first = lowered(8192)
    jobs = []
    original = _compile.make_job
    monkeypatch.setattr(_compile, "make_job", lambda *a, **k: jobs.append(a) or original(*a, **k))
    second = lowered(8224)
    assert jobs == []  # no kernel key computed, no layout, no image: the plan's
    assert second.calls[0].kernel is first.calls[0].kernel
    jtr.clear_caches()  # the plan forgotten: the same call is planned again, by the lowering
    monkeypatch.setenv(_env.ENV_EARLY_COMPILE, "0")  # not by the trace too
    lowered(8256)
    assert len(jobs) == 1


@pytest.mark.parametrize("xla_native", ["0", "1"], ids=["jaxlib", "xla"])
def test_a_new_length_asks_the_backend_nothing_and_keeps_its_launch_limits(monkeypatch,
                                                                           xla_native):
    from jax_triton_rocm.backends import _cuda

    monkeypatch.setenv("JAX_TRITON_ROCM_XLA_NATIVE", xla_native)

    def lowered(length):  # the programs along grid axis 1, whose limit on sm_90 is 65535
        x = spec((length,), jnp.float32)
        return lower_one(lambda x, y: jtr.triton_call(
            x, y, x.size, kernel=kernels.add_kernel, out_shape=x,
            grid=(1, triton.cdiv(x.size, 256)), BLOCK=256), x, x, platform="cuda")

    lowered(8192)
    asked = []
    original = _cuda.CudaBackend.target
    monkeypatch.setattr(_cuda.CudaBackend, "target",
                        lambda self, target: asked.append(target.arch) or original(self, target))
    lowered(8448)
    with pytest.raises(ValueError, match="dimension 1 has 65536 programs and sm_90 launches at "
                                         "most 65535"):
        lowered(65536 * 256)
    assert asked == []  # the plan kept the limits it was made with
