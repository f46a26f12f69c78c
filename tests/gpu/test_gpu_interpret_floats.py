"""Issue 44 on the GPU: the kernels of `test_interpret_floats.py`, run on the GPU through the
package and in Triton's interpreter on the CPU, on the same inputs, give the same bits; fp8
arithmetic is refused on both."""

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.support import low_precision_kernels as lp
from tests.support.gpu_utils import gpu_devices, gpu_platform
from tests.support.low_precision_kernels import bits

pytestmark = pytest.mark.gpu

CPU = jax.devices("cpu")[0]
BF16, E4M3, E5M2 = jnp.bfloat16, jnp.float8_e4m3fn, jnp.float8_e5m2


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    kernel: object
    inputs: Callable[[], tuple]
    out_dtype: object
    out_size: int = lp.N
    grid: tuple = (1,)
    constexprs: dict = dataclasses.field(default_factory=dict)


def _normal(*seeds, dtype=BF16):
    return lambda: tuple(lp.normal_values(seed, dtype) for seed in seeds)


def _quarters(seed, size=lp.N):
    """Multiples of 1/4 in [-16, 16): sums of three, and dot products of 32, are exact."""
    return (np.random.default_rng(seed).integers(-64, 64, size) / 4).astype(np.float32)


def _with(values, tail):
    def inputs():
        x = values()
        x[-len(tail):] = tail
        return (x,)
    return inputs


CASES = [
    Case("bf16 add", lp.add_kernel, _normal(1, 2), BF16),
    Case("bf16 multiply", lp.mul_kernel, _normal(3, 4), BF16),
    Case("bf16 maximum across signs", lp.maximum_kernel, _normal(5, 6), BF16),
    Case("bf16 comparison", lp.less_kernel, _normal(7, 8), jnp.int8),
    Case("bf16 negation", lp.negate_kernel, _normal(9), BF16),
    Case("bf16 fma", lp.fma_kernel, _normal(23, 24), BF16),
    Case("bf16 clamp", lp.clamp_kernel, _normal(25, 26), BF16),
    Case("bf16 argmax", lp.argmax_kernel, _normal(22), jnp.int32, out_size=1),
    Case("bf16 max", lp.max_kernel, _normal(11), BF16, out_size=1),
    Case("bf16 sum of ones", lp.sum_kernel, lambda: (np.ones(1024, BF16),), BF16, out_size=1),
    Case("bf16 exact sum", lp.sum_kernel, lambda: (lp.unit_steps(10),), BF16, out_size=1),
    Case("bf16 cumsum", lp.cumsum_kernel, lambda: (lp.unit_steps(12),), BF16),
    Case("bf16 atomic add", lp.atomic_add_kernel, lambda: (_quarters(13).astype(BF16),), BF16,
         grid=(3,)),
    Case("bf16 dot", lp.dot_kernel,
         lambda: (_quarters(20, 16 * 32).astype(BF16), _quarters(21, 32 * 16).astype(BF16)),
         jnp.float32, constexprs={"M": 16, "N": 16, "K": 32}),
    Case("float32 stored into bf16", lp.store_kernel,
         _with(lambda: lp.ties(BF16), [1.00390625, 1.01171875, -1.968, 3e38]), BF16),
    Case("float32 to bf16 toward zero", lp.toward_zero_kernel,
         _with(lambda: lp.ties(BF16), [3.4e38, -3.4e38]), BF16),
    Case("float32 stored into e4m3fn", lp.store_kernel,
         _with(lambda: lp.ties(E4M3), [-1.968, 1.968, 0.3, 300.0]), E4M3),
    Case("float32 stored into e5m2", lp.store_kernel, lambda: (lp.ties(E5M2),), E5M2),
    Case("float32 beyond e4m3fn's range", lp.store_kernel,
         _with(lambda: lp.ties(E4M3), [500.0, -500.0, 1e6, -1e6, 448.0, 464.0]), E4M3),
    Case("float32 beyond e5m2's range", lp.store_kernel,
         _with(lambda: lp.ties(E5M2), [1e6, -1e6, 60000.0, 61440.0, 57344.0]), E5M2),
    Case("infinity into e4m3fn", lp.store_kernel,
         _with(lambda: lp.ties(E4M3), [np.inf, -np.inf]), E4M3),
    Case("infinity into e5m2", lp.store_kernel,
         _with(lambda: lp.ties(E5M2), [np.inf, -np.inf]), E5M2),
    Case("float32 to e5m2 toward zero", lp.toward_zero_kernel,
         _with(lambda: lp.ties(E5M2), [1e6, -1e6]), E5M2),
    Case("e4m3fn add through float32", lp.add_through_float32_kernel,
         _normal(15, 16, dtype=E4M3), E4M3),
    Case("e5m2 add through float32", lp.add_through_float32_kernel,
         _normal(15, 16, dtype=E5M2), E5M2),
    Case("e4m3fn where and abs", lp.select_abs_kernel, _normal(19, dtype=E4M3), E4M3),
    Case("e5m2 max", lp.max_kernel, _normal(19, dtype=E5M2), E5M2, out_size=1),
]


def _on_both(case: Case) -> list[np.ndarray]:
    """`case` run on the GPU, then on the CPU."""
    inputs = case.inputs()
    return [lp.run(case.kernel, *inputs, out_dtype=case.out_dtype, out_size=case.out_size,
                   grid=case.grid, device=device, **case.constexprs)
            for device in (gpu_devices()[0], CPU)]


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_gpu_and_the_cpu_interpreter_give_the_same_bits(case):
    on_gpu, on_cpu = _on_both(case)
    np.testing.assert_array_equal(bits(on_cpu) if on_cpu.dtype.itemsize < 4 else on_cpu,
                                  bits(on_gpu) if on_gpu.dtype.itemsize < 4 else on_gpu)


@pytest.mark.parametrize("dtype", [jnp.float8_e4m3fnuz, jnp.float8_e5m2fnuz],
                         ids=lambda d: jnp.dtype(d).name)
def test_float32_stored_into_fnuz_fp8_gives_the_same_bits_on_an_amd_gpu(dtype):
    if gpu_platform() != "rocm":
        pytest.skip("Triton compiles the fnuz fp8 dtypes for AMD GPUs only")
    x = np.concatenate([lp.ties(dtype, lp.N // 2),
                        lp.normal_values(14, np.float32, lp.N // 2, scale=4.0)])
    on_gpu, on_cpu = (lp.run(lp.store_kernel, x, out_dtype=dtype, device=device)
                      for device in (gpu_devices()[0], CPU))
    np.testing.assert_array_equal(bits(on_cpu), bits(on_gpu))


def test_fp8_add_is_refused_on_the_gpu_as_on_the_cpu():
    x = lp.normal_values(17, E5M2)
    for device in (gpu_devices()[0], CPU):
        with pytest.raises(Exception, match=r"fp8"):
            lp.run(lp.add_kernel, x, x, out_dtype=E5M2, device=device)
