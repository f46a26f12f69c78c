"""Constexpr values are whatever Triton compiles as one: Triton builtins (`tl.exp`), Triton
functions (`tl.sigmoid`, `@triton.jit`), dtypes, tuples, None and strings, on every route; two
functions give two kernels, one function one. An extern (`libdevice.tanh`), which Triton cannot
compile as a constexpr, and a plain Python function are refused, naming the fix."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl
from triton.language.extra import libdevice

import jax_triton_rocm as jtr
from tests.support.kernels import activation_kernel as unary_kernel, doubled
from tests.support.lowering_utils import capture_one, lower_one, spec

N = 64


@triton.jit
def binary_kernel(x_ptr, out_ptr, n, OP: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, OP(tl.load(x_ptr + offsets, mask=mask), 0.5), mask=mask)


@triton.jit
def options_kernel(x_ptr, out_ptr, n, DTYPE: tl.constexpr, SCALE_SHIFT: tl.constexpr,
                   BIAS: tl.constexpr, MODE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    y = tl.load(x_ptr + offsets, mask=mask).to(DTYPE).to(tl.float32)
    y = y * SCALE_SHIFT[0] + SCALE_SHIFT[1]
    if BIAS is not None:
        y += BIAS
    if MODE == "negate":
        y = -y
    tl.store(out_ptr + offsets, y, mask=mask)


@triton.jit
def tripled(x):
    return x * 3


def x_values():
    return jnp.linspace(-2.5, 2.5, N, dtype=jnp.float32)


def call(kernel, x, **constexprs):
    return jtr.triton_call(x, kernel=kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                           grid=(1,), n=x.size, BLOCK=N, **constexprs)


OPTIONS = dict(DTYPE=tl.float32, SCALE_SHIFT=(2.0, 1.0), BIAS=None, MODE="keep")

# (kernel, constexprs, what NumPy computes from x).
KINDS = {
    "tl.exp (a builtin)": (unary_kernel, dict(ACT=tl.exp), np.exp),
    "tl.abs (a builtin)": (unary_kernel, dict(ACT=tl.abs), np.abs),
    "tl.maximum (a builtin of two)": (binary_kernel, dict(OP=tl.maximum),
                                      lambda x: np.maximum(x, 0.5)),
    "tl.sigmoid (a Triton function)": (unary_kernel, dict(ACT=tl.sigmoid),
                                       lambda x: 1 / (1 + np.exp(-x))),
    "a @triton.jit function": (unary_kernel, dict(ACT=doubled), lambda x: x * 2),
    "dtype, tuple, None and str": (options_kernel, OPTIONS, lambda x: x * 2 + 1),
    "another dtype, a bias and another str": (
        options_kernel, dict(OPTIONS, DTYPE=tl.int32, BIAS=0.25, MODE="negate"),
        lambda x: -(np.trunc(x) * 2 + 1 + 0.25)),
}


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_each_constexpr_kind_lowers(kind, platform):
    kernel, constexprs, _ = KINDS[kind]
    lowered = capture_one(lambda x: call(kernel, x, **constexprs), spec((N,), jnp.float32),
                          platform=platform)
    assert len(lowered.kernels) == 1 and lowered.kernels[0].binary


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_constexpr_kind_lowers_on_xla_route(kind):
    kernel, constexprs, _ = KINDS[kind]
    emitted = lower_one(lambda x: call(kernel, x, xla_native=True, **constexprs),
                        spec((N,), jnp.float32), platform="cuda")
    assert emitted.native is not None and emitted.native["ir"]


@pytest.mark.parametrize("kind", list(KINDS))
def test_interpreter_computes_with_each_constexpr_kind(kind):
    kernel, constexprs, expected = KINDS[kind]
    x = x_values()
    np.testing.assert_allclose(np.asarray(call(kernel, x, **constexprs)),
                               expected(np.asarray(x)), rtol=1e-6, atol=1e-6)


def _jaxlib_call(act):
    return capture_one(lambda x: call(unary_kernel, x, ACT=act), spec((N,), jnp.float32),
                       platform="cuda")


def _xla_call(act):
    return lower_one(lambda x: call(unary_kernel, x, ACT=act, xla_native=True),
                     spec((N,), jnp.float32), platform="cuda")


@pytest.mark.parametrize("first,second", [(tl.exp, tl.abs), (doubled, tripled),
                                          (tl.exp, tl.sigmoid)],
                         ids=["two builtins", "two jit functions", "a builtin and a function"])
def test_two_functions_give_two_kernels(first, second):
    one, other = _jaxlib_call(first), _jaxlib_call(second)
    assert one.kernels[0].key != other.kernels[0].key
    assert one.kernels[0].binary != other.kernels[0].binary
    assert _xla_call(first).native["ir"] != _xla_call(second).native["ir"]


@pytest.mark.parametrize("act", [tl.exp, doubled], ids=["a builtin", "a jit function"])
def test_one_function_gives_one_kernel(act):
    one, again = _jaxlib_call(act), _jaxlib_call(act)
    assert one.kernels[0].key == again.kernels[0].key
    assert one.opaque == again.opaque
    assert _xla_call(act).native["ir"] == _xla_call(act).native["ir"]


def test_builtin_kernel_key_is_the_same_in_every_process():
    from jax_triton_rocm.compile import _compile

    assert _compile.stable_text(tl.exp) == "builtin:triton.language.math.exp"
    assert _compile.stable_text(tl.exp) != _compile.stable_text(tl.abs)


EXTERN_FIX = (r"(?s)ACT=<function tanh .*> is the Triton extern "
              r"triton\.language\.extra\.libdevice\.tanh, which Triton cannot compile as a "
              r"constexpr value .*Wrap the extern in a @triton\.jit function and pass that:\n\n"
              r"    @triton\.jit\n    def tanh\(arg0\):\n        return libdevice\.tanh\(arg0\)"
              r"\n\nthen ACT=tanh\.")


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_extern_is_refused_showing_the_wrapper(platform):
    with pytest.raises(TypeError, match=EXTERN_FIX):
        lower_one(lambda x: call(unary_kernel, x, ACT=libdevice.tanh), spec((N,), jnp.float32),
                  platform=platform)


def test_extern_is_refused_showing_the_wrapper_on_the_cpu():
    with pytest.raises(TypeError, match=EXTERN_FIX):
        call(unary_kernel, x_values(), ACT=libdevice.tanh)


def test_extern_inside_a_tuple_is_refused_by_its_place():
    with pytest.raises(TypeError, match=r"SCALE_SHIFT\[1\]=<function tanh .*> is the Triton "
                                        r"extern"):
        call(options_kernel, x_values(), **dict(OPTIONS, SCALE_SHIFT=(2.0, libdevice.tanh)))


def test_extern_wrapped_in_a_jit_function_lowers():
    @triton.jit
    def tanh(x):
        return libdevice.tanh(x)

    lowered = capture_one(lambda x: call(unary_kernel, x, ACT=tanh), spec((N,), jnp.float32),
                          platform="cuda")
    assert lowered.kernels[0].binary


def test_plain_python_function_is_refused():
    with pytest.raises(TypeError, match=r"ACT=<function .*> is a Python function, and a "
                                        r"kernel's constexpr is a value .*a Triton builtin "
                                        r"\(tl\.exp\) or a @triton\.jit function"):
        call(unary_kernel, x_values(), ACT=lambda x: x)


def test_lowering_api_takes_a_builtin_constexpr():
    from tests.support import library_kernels

    def lowering(ctx, x):
        return jtr.triton_call_lowering(ctx, unary_kernel, x, grid=(1,),
                                        constexprs={"n": N, "ACT": tl.abs, "BLOCK": N})

    abs_p = library_kernels.define("test_constexpr_abs", lambda x: x, lowering,
                                   multiple_results=False)
    x = x_values()
    np.testing.assert_allclose(np.asarray(jax.jit(abs_p.bind)(x)), np.abs(np.asarray(x)))


@triton.jit
def _scale(x):
    return x * 2


@triton.jit
def scaled(x):
    return _scale(x)


def test_helper_rebound_under_a_constexpr_function_is_compiled_anew(monkeypatch):
    import sys

    @triton.jit
    def quartered(x):
        return x * 0.25

    before = _jaxlib_call(scaled)
    monkeypatch.setattr(sys.modules[__name__], "_scale", quartered)
    after = _jaxlib_call(scaled)
    assert before.kernels[0].key != after.kernels[0].key
    assert before.opaque != after.opaque


@triton.jit
def positional_activation_kernel(x_ptr, n, ACT: tl.constexpr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, ACT(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


def positional(x, act):
    return jtr.triton_call(x, N, act, kernel=positional_activation_kernel, out_shape=x,
                           grid=(1,), BLOCK=N)


@pytest.mark.parametrize("act,expected", [(tl.exp, np.exp), (doubled, lambda x: x * 2)],
                         ids=["a builtin", "a jit function"])
def test_a_function_given_positionally_is_a_constexpr(act, expected):
    x = x_values()
    np.testing.assert_allclose(np.asarray(positional(x, act)), expected(np.asarray(x)),
                               rtol=1e-6)
    assert capture_one(lambda x: positional(x, act), spec((N,), jnp.float32),
                       platform="rocm").kernels[0].binary


def test_an_extern_given_positionally_is_refused_by_its_parameter():
    with pytest.raises(TypeError, match=r"ACT=<function tanh .*> is the Triton extern"):
        positional(x_values(), libdevice.tanh)


@triton.jit
def constexpr_left_kernel(x_ptr, out_ptr, n, ALPHA, BETA, LIMIT, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = ALPHA * x + (BETA - x) / (ALPHA + x * x)
    tl.store(out_ptr + offsets, tl.where(LIMIT < x, y, -y), mask=mask)


@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_a_constexpr_on_the_left_of_a_tensor_operator_gives_the_tensor_result(jit):
    # `ALPHA * x` with `ALPHA` given by keyword (a constexpr, not annotated as one): Triton's
    # interpreter alone wraps the result in a constexpr it cannot store; the package makes it
    # the tensor a compiled kernel computes.
    x = x_values()
    constexprs = dict(ALPHA=2.0, BETA=0.5, LIMIT=0.25)
    got = np.asarray((jax.jit(lambda x: call(constexpr_left_kernel, x, **constexprs)) if jit
                      else lambda x: call(constexpr_left_kernel, x, **constexprs))(x))
    xs = np.asarray(x)
    y = 2.0 * xs + (0.5 - xs) / (2.0 + xs * xs)
    np.testing.assert_allclose(got, np.where(0.25 < xs, y, -y), rtol=1e-6)
