"""bfloat16 and fp8 in Triton's interpreter (the CPU route): values computed as the GPU
computes them, checked against ml_dtypes bit for bit; arithmetic on fp8 refused by name, as
Triton's compiler refuses it. `test_gpu_interpret_floats.py` runs the same kernels on a GPU."""

import ml_dtypes
import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.routes.cpu import _interpret_host
from tests.support import low_precision_kernels as lp
from tests.support.low_precision_kernels import bits

CPU = jax.devices("cpu")[0]
BF16 = jnp.bfloat16
FP8_TYPES = [jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.float8_e4m3fnuz, jnp.float8_e5m2fnuz,
             jnp.float8_e4m3b11fnuz]


def _rounded(values, dtype):
    """ml_dtypes' round to nearest even of float32 `values` into `dtype`."""
    return np.asarray(values, np.float32).astype(jnp.dtype(dtype))


def _saturated(values, dtype):
    """`values` rounded into an fp8 `dtype`, saturating to its largest finite value."""
    largest = float(ml_dtypes.finfo(jnp.dtype(dtype)).max)
    return _rounded(np.clip(values, -largest, largest), dtype)


def test_bf16_add_rounds_the_sum_of_the_values():
    x, y = lp.normal_values(1, BF16), lp.normal_values(2, BF16)
    x[0] = y[0] = 0.668  # issue 44: the interpreter added the bits, giving 7.1e37
    out = lp.run(lp.add_kernel, x, y, out_dtype=BF16, device=CPU)
    np.testing.assert_array_equal(bits(out), bits(_rounded(x.astype(np.float32) + y, BF16)))


def test_bf16_multiply_rounds_the_product_of_the_values():
    x, y = lp.normal_values(3, BF16), lp.normal_values(4, BF16)
    out = lp.run(lp.mul_kernel, x, y, out_dtype=BF16, device=CPU)
    np.testing.assert_array_equal(bits(out), bits(_rounded(x.astype(np.float32) * y, BF16)))


def test_bf16_maximum_across_signs():
    x, y = lp.normal_values(5, BF16), lp.normal_values(6, BF16)
    out = lp.run(lp.maximum_kernel, x, y, out_dtype=BF16, device=CPU)
    np.testing.assert_array_equal(bits(out), bits(np.maximum(x, y)))


def test_bf16_comparison_across_signs():
    x, y = lp.normal_values(7, BF16), lp.normal_values(8, BF16)
    out = lp.run(lp.less_kernel, x, y, out_dtype=jnp.int8, device=CPU)
    np.testing.assert_array_equal(out, (x.astype(np.float32) < y).astype(np.int8))


def test_bf16_negation():
    x = lp.normal_values(9, BF16)
    np.testing.assert_array_equal(bits(lp.run(lp.negate_kernel, x, out_dtype=BF16, device=CPU)),
                                  bits(-x))


def test_bf16_sum_of_ones_is_their_count():
    # 1024 ones: adding the bits gave -1.04e34, and adding in bfloat16 one at a time stops at 256.
    ones = np.ones(1024, BF16)
    out = lp.run(lp.sum_kernel, ones, out_dtype=BF16, out_size=1, device=CPU)
    assert out.tolist() == [1024]


def test_bf16_sum_of_values_rounds_their_exact_sum():
    # Accumulated in float32 and rounded once (the GPU adds in bfloat16, in a tree).
    x = (np.random.default_rng(10).integers(-64, 64, lp.N) / 4).astype(BF16)
    out = lp.run(lp.sum_kernel, x, out_dtype=BF16, out_size=1, device=CPU)
    assert bits(out).tolist() == [int(bits(_rounded(np.sum(x.astype(np.float64)), BF16)))]


def test_bf16_max_of_negative_values_is_the_one_nearest_zero():
    x = -np.abs(lp.normal_values(11, BF16))
    out = lp.run(lp.max_kernel, x, out_dtype=BF16, out_size=1, device=CPU)
    assert bits(out).tolist() == [int(bits(x.max()))]


def test_bf16_cumsum_adds_values():
    x = lp.unit_steps(12)
    out = lp.run(lp.cumsum_kernel, x, out_dtype=BF16, device=CPU)
    np.testing.assert_array_equal(out.astype(np.float32), np.cumsum(x.astype(np.float32)))


def test_bf16_atomic_add_rounds_each_addition_in_order():
    # Programs run one after another on the CPU: each rounds its addition into the output.
    x = lp.normal_values(13, BF16)
    out = lp.run(lp.atomic_add_kernel, x, out_dtype=BF16, grid=(3,), device=CPU)
    expected = np.zeros(lp.N, BF16)
    for _ in range(3):
        expected = _rounded(expected.astype(np.float32) + x, BF16)
    np.testing.assert_array_equal(bits(out), bits(expected))


@triton.jit
def atomic_add_old_kernel(x_ptr, total_ptr, old_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    old = tl.atomic_add(total_ptr + o, tl.load(x_ptr + o))
    tl.store(old_ptr + tl.program_id(0) * BLOCK + o, old)


def test_bf16_atomic_add_returns_the_value_each_addition_found():
    x = lp.normal_values(14, BF16)
    out_shape = [jax.ShapeDtypeStruct((lp.N,), BF16), jax.ShapeDtypeStruct((3 * lp.N,), BF16)]
    total, old = jax.jit(lambda x: jtr.triton_call(
        x, kernel=atomic_add_old_kernel, out_shape=out_shape, grid=(3,), zeroed_outputs=(0,),
        BLOCK=lp.N))(jax.device_put(x, CPU))
    found = [np.zeros(lp.N, BF16)]
    for _ in range(2):
        found.append(_rounded(found[-1].astype(np.float32) + x, BF16))
    np.testing.assert_array_equal(bits(old), bits(np.concatenate(found)))
    np.testing.assert_array_equal(bits(total), bits(_rounded(found[-1].astype(np.float32) + x,
                                                             BF16)))


def test_float32_stored_into_bf16_rounds_to_nearest_even():
    x = lp.ties(BF16)
    x[-4:] = [1.00390625, 1.01171875, -1.968, 3e38]
    out = lp.run(lp.store_kernel, x, out_dtype=BF16, device=CPU)
    np.testing.assert_array_equal(bits(out), bits(_rounded(x, BF16)))
    # Ties go to the even neighbour: 1 + 2**-8 to 1, 1 + 3 * 2**-8 to 1 + 2**-6.
    assert out[-4:-2].tolist() == [1.0, 1.015625]


def test_float32_converted_to_bf16_toward_zero_when_the_kernel_asks():
    x = lp.ties(BF16)
    x[-3:] = [3.4e38, -3.4e38, np.inf]
    out = lp.run(lp.toward_zero_kernel, x, out_dtype=BF16, device=CPU)
    truncated = (x.view(np.uint32) >> 16).astype(np.uint16)  # dropping bits rounds toward zero
    np.testing.assert_array_equal(bits(out), truncated)


def test_float32_stored_into_e4m3fn_rounds_to_nearest_even():
    # issue 44: -1.968 became -1.0 (the rounding's carry was lost); the GPU gives -2.0.
    x = lp.ties(jnp.float8_e4m3fn)
    x[-4:] = [-1.968, 1.968, 0.3, 300.0]
    out = lp.run(lp.store_kernel, x, out_dtype=jnp.float8_e4m3fn, device=CPU)
    np.testing.assert_array_equal(bits(out), bits(_rounded(x, jnp.float8_e4m3fn)))
    assert out[-4:-2].astype(np.float32).tolist() == [-2.0, 2.0]


@pytest.mark.parametrize("dtype", FP8_TYPES, ids=lambda d: jnp.dtype(d).name)
def test_float32_stored_into_fp8_rounds_to_nearest_even(dtype):
    x = np.concatenate([lp.ties(dtype, lp.N // 2),
                        lp.normal_values(14, np.float32, lp.N // 2, scale=4.0)])
    out = lp.run(lp.store_kernel, x, out_dtype=dtype, device=CPU)
    np.testing.assert_array_equal(bits(out), bits(_rounded(x, dtype)))


@pytest.mark.parametrize("dtype", [jnp.float8_e4m3fn, jnp.float8_e5m2],
                         ids=lambda d: jnp.dtype(d).name)
def test_float32_beyond_fp8s_range_saturates_as_on_the_gpu(dtype):
    # ml_dtypes gives NaN (e4m3fn) or infinity (e5m2); NVIDIA's and AMD's conversions saturate.
    x = np.float32([500.0, -500.0, 1e6, -1e6, np.inf, -np.inf, 60000.0, 448.0])
    out = lp.run(lp.store_kernel, x, out_dtype=dtype, out_size=x.size, device=CPU)
    np.testing.assert_array_equal(bits(out), bits(_saturated(x, dtype)))


def test_float32_converted_to_e5m2_toward_zero_when_the_kernel_asks():
    x = lp.ties(jnp.float8_e5m2)
    x[-2:] = [1e6, -1e6]
    out = lp.run(lp.toward_zero_kernel, x, out_dtype=jnp.float8_e5m2, device=CPU)
    magnitude = np.abs(x)
    down = _saturated(magnitude, jnp.float8_e5m2)
    down = np.where(down.astype(np.float32) > magnitude, bits(down) - 1, bits(down))
    np.testing.assert_array_equal(bits(out), down.astype(np.uint8) | np.where(x < 0, 0x80, 0))


@pytest.mark.parametrize("dtype", [jnp.float8_e4m3fn, jnp.float8_e5m2],
                         ids=lambda d: jnp.dtype(d).name)
def test_fp8_add_through_float32_rounds_the_sum(dtype):
    x, y = lp.normal_values(15, dtype), lp.normal_values(16, dtype)
    out = lp.run(lp.add_through_float32_kernel, x, y, out_dtype=dtype, device=CPU)
    np.testing.assert_array_equal(bits(out), bits(_saturated(x.astype(np.float32) + y, dtype)))


def test_fp8_add_is_refused_naming_the_dtype_the_line_and_the_fix():
    x = lp.normal_values(17, jnp.float8_e5m2)
    with pytest.raises(Exception) as caught:
        lp.run(lp.add_kernel, x, x, out_dtype=jnp.float8_e5m2, device=CPU)
    message = str(caught.value)
    assert "Kernel add_kernel computes add on float8_e5m2 values (Triton's fp8e5)" in message
    assert "low_precision_kernels.py" in message and "tl.load(x_ptr + o) + tl.load" in message
    assert "refuses this kernel for every GPU" in message
    assert "x.to(tl.float32)" in message


@pytest.mark.parametrize("kernel", [lp.maximum_kernel, lp.less_kernel],
                         ids=["maximum", "comparison"])
def test_fp8_maximum_and_comparison_are_refused(kernel):
    x = lp.normal_values(18, jnp.float8_e4m3fn)
    with pytest.raises(Exception, match=r"on float8_e4m3fn values"):
        lp.run(kernel, x, x, out_dtype=jnp.float8_e4m3fn, device=CPU)


def test_fp8_where_abs_and_max_move_values_as_the_gpu_does():
    x = lp.normal_values(19, jnp.float8_e4m3fn)
    selected = lp.run(lp.select_abs_kernel, x, out_dtype=jnp.float8_e4m3fn, device=CPU)
    np.testing.assert_array_equal(bits(selected), np.where(np.arange(lp.N) % 2 == 0,
                                                           bits(np.abs(x)), bits(x)))
    largest = lp.run(lp.max_kernel, x, out_dtype=jnp.float8_e4m3fn, out_size=1, device=CPU)
    assert bits(largest).tolist() == [int(bits(x.max()))]


@pytest.mark.parametrize("dtype", [BF16, jnp.float8_e4m3fn, jnp.float8_e5m2],
                         ids=lambda d: jnp.dtype(d).name)
def test_dot_multiplies_values(dtype):
    a = lp.normal_values(20, dtype, 16 * 32).reshape(16, 32)
    b = lp.normal_values(21, dtype, 32 * 16).reshape(32, 16)
    out = lp.run(lp.dot_kernel, a, b, out_dtype=jnp.float32, out_size=256, device=CPU,
                 M=16, N=16, K=32)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out.reshape(16, 16), expected, rtol=1e-5, atol=1e-5)


@triton.jit
def _int_to_bf16_kernel(out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, (o * 257 - 30000).to(tl.bfloat16))


def test_integers_converted_to_bf16_round_to_nearest_even():
    out = lp.run(_int_to_bf16_kernel, out_dtype=BF16, device=CPU, BLOCK=lp.N)
    np.testing.assert_array_equal(bits(out), bits(_rounded(np.arange(lp.N) * 257 - 30000, BF16)))


def test_encode_rounds_ties_to_even_and_saturates_fp8():
    x = np.float32([1.0625, 1.1875, 1000.0, -np.inf, np.nan])
    e4m3 = _interpret_host.encode(x, "fp8e4nv")
    assert e4m3[:4].view(jnp.float8_e4m3fn).astype(np.float32).tolist() == [1.0, 1.25, 448.0,
                                                                             -448.0]
    assert np.isnan(e4m3[4:].view(jnp.float8_e4m3fn).astype(np.float32)).all()


def test_bf16_argmax_across_signs():
    x = lp.normal_values(22, BF16)
    out = lp.run(lp.argmax_kernel, x, out_dtype=jnp.int32, out_size=1, device=CPU)
    assert out.tolist() == [int(np.argmax(x.astype(np.float32)))]


def test_bf16_fma_rounds_the_result():
    x, y = lp.normal_values(23, BF16), lp.normal_values(24, BF16)
    out = lp.run(lp.fma_kernel, x, y, out_dtype=BF16, device=CPU)
    exact = x.astype(np.float64) * y + x  # exact: 16-bit products plus a bfloat16 value
    np.testing.assert_array_equal(bits(out), bits(exact.astype(BF16)))


def test_bf16_clamp_across_signs():
    x, y = lp.normal_values(25, BF16), lp.normal_values(26, BF16)
    out = lp.run(lp.clamp_kernel, x, y, out_dtype=BF16, device=CPU)
    bound = np.abs(y.astype(np.float32))
    np.testing.assert_array_equal(bits(out), bits(np.clip(x.astype(np.float32), -bound,
                                                          bound).astype(BF16)))


def test_device_print_shows_bf16_values(capfd):
    x = np.array([1.5, -2.25, 0.5, 3.0], BF16)
    lp.run(lp.print_kernel, x, out_dtype=BF16, out_size=4, device=CPU)
    printed = capfd.readouterr().out
    assert "[ 1.5  -2.25  0.5   3.  ]" in printed


def test_float_adaptations_are_undone_after_the_run():
    from triton.runtime import interpreter

    owners = (interpreter, interpreter.InterpreterBuilder, interpreter.ReduceOps,
              interpreter.ScanOps)
    before = [dict(vars(owner)) for owner in owners]
    lp.run(lp.add_kernel, *lp.normal_values(27, BF16).reshape(2, -1), out_dtype=BF16,
           out_size=lp.N // 2, device=CPU)
    assert [dict(vars(owner)) for owner in owners] == before
