"""Kernel parameters whose annotation declares a type (`n: tl.int32`, `alpha: tl.float32`,
`x_ptr: tl.pointer_type(tl.float16)`) get it, as Triton's launcher gives it; a value that does
not fit is refused naming the parameter, the value and the type. A 0-d array given for a scalar
is the scalar it holds where the parameter declares a scalar type and the array is concrete, is
refused naming the parameter where it is traced, and is a pointer (as in Triton) elsewhere,
with a hint naming the parameter when the kernel then fails."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support.kernels import add_unsigned_kernel, add_wide_kernel, scale_declared_kernel
from tests.support.lowering_utils import capture_one, spec

N = 256
CPU = jax.devices("cpu")[0]


@triton.jit
def add_declared_kernel(x_ptr, v: tl.int32, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + v)


@triton.jit
def scale_double_kernel(x_ptr, alpha: tl.float64, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, (alpha * tl.load(x_ptr + offsets)).to(tl.float32))


@triton.jit
def flag_kernel(x_ptr, flip: tl.int1, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    tl.store(out_ptr + offsets, tl.where(flip, -x, x))


@triton.jit
def half_kernel(x_ptr, alpha: tl.float16, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


@triton.jit
def half_pointer_kernel(x_ptr: tl.pointer_type(tl.float16), out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets).to(tl.float32))


@triton.jit
def scale_kernel(x_ptr, alpha, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, alpha * tl.load(x_ptr + offsets))


def _call(kernel, value, dtype=jnp.int32):
    def call(x):
        return jtr.triton_call(x, value, kernel=kernel, out_shape=x, grid=(1,), BLOCK=N,
                               xla_native=False)

    return call, spec((N,), dtype)


def _params(kernel, value, dtype=jnp.int32, platform="cuda"):
    """The kinds of the parameters jaxlib's kernel call carries, and their scalar values."""
    call, x = _call(kernel, value, dtype)
    [launch] = capture_one(call, x, platform=platform).calls
    return [(p.kind, p.value) if p.kind != "array" else ("array", None) for p in launch.params]


def _on_cpu(kernel, value, x):
    call, _ = _call(kernel, value, x.dtype)
    return np.asarray(jax.jit(call)(jax.device_put(x, CPU)))


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
@pytest.mark.parametrize("kernel,value,dtype,carried", [
    (add_declared_kernel, 1, jnp.int32, ("i32", 1)),  # a runtime i32, never a constexpr
    (add_declared_kernel, np.int64(7), jnp.int32, ("i32", 7)),
    (add_unsigned_kernel, 4294967295, jnp.uint32, ("u32", 4294967295)),
    (add_wide_kernel, 5, jnp.int32, ("i64", 5)),
    (scale_declared_kernel, 3, jnp.float32, ("f32", 3.0)),
    (scale_double_kernel, 1.5, jnp.float32, ("f64", 1.5)),
    (flag_kernel, True, jnp.float32, ("bool", True)),
], ids=["1 as tl.int32", "np.int64 as tl.int32", "2**32-1 as tl.uint32", "5 as tl.int64",
        "3 as tl.float32", "1.5 as tl.float64", "True as tl.int1"])
def test_a_declared_type_is_the_type_the_kernel_call_carries(platform, kernel, value, dtype,
                                                             carried):
    assert _params(kernel, value, dtype, platform) == [("array", None), carried,
                                                       ("array", None)]


def test_a_declared_integer_keeps_triton_s_divisibility_specialisation():
    def key(value):
        call, x = _call(add_declared_kernel, value)
        return capture_one(call, x, platform="cuda").kernels[0].key

    assert key(16) == key(32) != key(7) == key(1)


@pytest.mark.parametrize("kernel,value,error,shown", [
    (add_declared_kernel, 2**40, OverflowError, "1099511627776"),
    (add_declared_kernel, np.uint32(2**32 - 1), OverflowError, "4294967295"),
    (add_declared_kernel, 2.5, TypeError, "2.5"),
    (add_unsigned_kernel, -1, OverflowError, "-1"),
    (add_unsigned_kernel, 2**32, OverflowError, "4294967296"),
    (scale_declared_kernel, 1e300, OverflowError, "1e+300"),
    (flag_kernel, 2, OverflowError, "2"),
], ids=["2**40 as tl.int32", "np.uint32(2**32-1) as tl.int32", "2.5 as tl.int32",
        "-1 as tl.uint32", "2**32 as tl.uint32", "1e300 as tl.float32", "2 as tl.int1"])
def test_a_value_that_does_not_fit_its_declared_type_is_refused(kernel, value, error, shown):
    name = {add_declared_kernel: "tl.int32", add_unsigned_kernel: "tl.uint32",
            scale_declared_kernel: "tl.float32", flag_kernel: "tl.int1"}[kernel]
    call, x = _call(kernel, value)
    with pytest.raises(error) as raised:
        jax.make_jaxpr(call)(x)
    assert f"argument 1 ({kernel.arg_names[1]}) is annotated {name}" in str(raised.value)
    assert shown in str(raised.value)


def test_a_declared_type_jaxlib_cannot_pass_is_refused_naming_it():
    call, x = _call(half_kernel, 1.0, jnp.float32)
    with pytest.raises(TypeError, match=r"argument 1 \(alpha\) is annotated fp16.*tl.int32, "
                                        r"tl.float32"):
        jax.make_jaxpr(call)(x)


def test_a_pointer_declared_to_another_type_is_refused():
    x = spec((N,), jnp.float32)

    def call(x):
        return jtr.triton_call(x, kernel=half_pointer_kernel, out_shape=x, grid=(1,), BLOCK=N,
                               xla_native=False)

    with pytest.raises(TypeError, match=r"argument 0 \(x_ptr\) is annotated as a pointer to "
                                        r"fp16 \(\*fp16\), but is given a float32\[256\] array"):
        jax.make_jaxpr(call)(x)
    assert capture_one(call, spec((N,), jnp.float16), platform="cuda").kernels


def test_the_cpu_runs_a_declared_type_as_the_gpu_would():
    zeros = jnp.zeros(N, jnp.uint32)
    assert (_on_cpu(add_unsigned_kernel, 4294967295, zeros) == 4294967295).all()
    assert (_on_cpu(add_wide_kernel, 2**40, jnp.zeros(N, jnp.int32)) == 2**20).all()
    assert (_on_cpu(flag_kernel, True, jnp.ones(N, jnp.float32)) == -1).all()


def test_a_declared_type_holds_at_a_new_shape():
    def carried(length):
        def call(x):
            return jtr.triton_call(x, 2**33 + length, kernel=add_wide_kernel, out_shape=x,
                                   grid=(1,), BLOCK=N, xla_native=False)

        [launch] = capture_one(call, spec((length,), jnp.int32), platform="cuda").calls
        return [(p.kind, p.value) for p in launch.params if p.kind != "array"]

    assert carried(N) == [("i64", 2**33 + N)]
    assert carried(N + 16) == [("i64", 2**33 + N + 16)]  # the plan refilled, still i64


# 0-d arrays for a scalar parameter.

X = jnp.arange(N, dtype=jnp.float32)


@pytest.mark.parametrize("alpha", [np.array(2.5), np.float32(2.5), jnp.float32(2.5)],
                         ids=["np.array(2.5)", "np.float32(2.5)", "jnp.float32(2.5)"])
def test_a_concrete_0d_array_for_a_declared_scalar_is_the_scalar_it_holds(alpha):
    x = jax.device_put(X, CPU)
    eager = jtr.triton_call(x, alpha, kernel=scale_declared_kernel, out_shape=x, grid=(1,),
                            BLOCK=N)
    assert jnp.allclose(eager, 2.5 * x)
    if not isinstance(alpha, jax.Array):  # NumPy values stay concrete under jit
        jitted = jax.jit(lambda x: jtr.triton_call(x, alpha, kernel=scale_declared_kernel,
                                                   out_shape=x, grid=(1,), BLOCK=N))(x)
        assert jnp.allclose(jitted, 2.5 * x)


@pytest.mark.parametrize("make", [lambda x, a: a, lambda x, a: jnp.float32(2.5)],
                         ids=["a jit argument", "jnp.float32 under jit"])
def test_a_traced_0d_array_for_a_declared_scalar_is_refused_naming_it(make):
    def call(x, a):
        return jtr.triton_call(x, make(x, a), kernel=scale_declared_kernel, out_shape=x,
                               grid=(1,), BLOCK=N)

    with pytest.raises(TypeError, match=r"argument 1 \(alpha\) is annotated tl.float32, a "
                                        r"scalar, but is given a float32\[\] array.*"
                                        r"static_argnums"):
        jax.jit(call)(X, jnp.float32(2.5))


def _failure_text(call, route):
    """The error (with its notes) of `call` on X lowered for sm_90, or run in the interpreter."""
    with pytest.raises(Exception) as raised:
        if route == "sm_90":
            capture_one(call, spec((N,), jnp.float32), platform="cuda")
        else:
            jax.block_until_ready(jax.jit(call)(jax.device_put(X, CPU)))
    return "\n".join([str(raised.value), *getattr(raised.value, "__notes__", ())])


@pytest.mark.parametrize("alpha", [np.array(2.5), jnp.float32(2.5)],
                         ids=["np.array(2.5)", "jnp.float32(2.5)"])
@pytest.mark.parametrize("route", ["sm_90", "CPU interpreter"])
def test_a_0d_array_for_an_undeclared_scalar_is_a_pointer_named_when_the_kernel_fails(alpha,
                                                                                     route):
    text = _failure_text(lambda x: jtr.triton_call(x, alpha, kernel=scale_kernel, out_shape=x,
                                                   grid=(1,), BLOCK=N), route)
    assert "argument 1 (alpha) is given a 0-d array, which the kernel receives as a pointer" \
        in text
    assert "alpha: tl.float32" in text


@triton.jit
def scale_by_pair_kernel(x_ptr, pair, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.load(x_ptr + o) * pair[1])


@pytest.mark.parametrize("route", ["sm_90", "CPU interpreter"])
def test_a_0d_array_in_a_tuple_is_a_pointer_named_when_the_kernel_fails(route):
    text = _failure_text(lambda x: jtr.triton_call(
        x, (x, np.array(2.5, np.float32)), kernel=scale_by_pair_kernel, out_shape=x, grid=(1,),
        BLOCK=N), route)
    assert "parameter 'pair'[1] is given a 0-d array, which the kernel receives as a pointer" \
        in text
