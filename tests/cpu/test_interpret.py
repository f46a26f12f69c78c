"""What is particular to Triton's interpreter, the CPU route: kernels calling other @triton.jit
functions, low-precision values, autotuned kernels, what it cannot run, and how it is adapted.
The tests every route shares (jnp references) are in `test_routes.py`.

Every array is placed on the CPU device, so these tests exercise the interpreter on a GPU machine
too (where `jax.jit` would otherwise run on the GPU).
"""

import functools
import logging
import re

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state
from jax_triton_rocm.routes.cpu import _interpret, _interpret_host
from tests.support import autotune_utils, gluon_kernels, kernels
from tests.support.kernels import random_normal
from tests.support.lowering_utils import lowered_text

CPU = jax.devices("cpu")[0]


def test_kernel_calling_another_jit_function():
    a, b = random_normal(7, (40, 24), device=CPU), random_normal(8, (24, 36), device=CPU)
    out = jtr.triton_call(
        a, b, 40, 36, 24, kernel=kernels.matmul_kernel_runtime_dims,
        out_shape=jax.ShapeDtypeStruct((40, 36), jnp.float32), grid=(2, 2),
        BLOCK_M=32, BLOCK_N=32, BLOCK_K=16)
    assert kernels.matmul_relative_error(out, a, b) < 1e-5


def test_zeroed_aliased_output_is_zeroed_as_on_the_gpu():
    x = random_normal(13, (1024,), device=CPU)
    out = jax.jit(lambda x: jtr.triton_call(
        x, x.size, kernel=kernels.atomic_sum_kernel, out_shape=x, grid=(1,), BLOCK=1024,
        input_output_aliases={0: 0}, zeroed_outputs=(0,)))(x)
    # The kernel read its input through the zeroed buffer, so it added zeros to out[0].
    np.testing.assert_array_equal(out, np.zeros(1024, np.float32))


@triton.jit
def _to_float32_kernel(x_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask).to(tl.float32), mask=mask)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, jnp.float8_e5m2,
                                   jnp.float8_e4m3fn])
def test_low_precision_values_convert_as_jnp_does(dtype):
    x = jax.device_put(jnp.linspace(-3, 3, 100).astype(dtype), CPU)
    out = jax.jit(lambda x: jtr.triton_call(
        x, x.size, kernel=_to_float32_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, jnp.float32), grid=(1,), BLOCK=128))(x)
    np.testing.assert_array_equal(out, x.astype(jnp.float32))


def test_autotuned_kernel_runs_its_first_config():
    x, y = random_normal(17, (1000,), device=CPU), random_normal(18, (1000,), device=CPU)
    seen = []

    def grid(meta):
        seen.append(meta["BLOCK"])
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)

    out = jax.jit(lambda x, y: jtr.triton_call(
        x, y, x.size, kernel=autotune_utils.tuned_add_kernel, out_shape=x, grid=grid))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    assert seen == [autotune_utils.ADD_CONFIGS[0].kwargs["BLOCK"]]


def test_gluon_kernel_gets_a_clear_error():
    x = random_normal(19, (1024,), device=CPU)
    with pytest.raises(NotImplementedError, match=r"Gluon kernel.*interpreter"):
        jax.jit(lambda x: gluon_kernels.copy(x, warp_size=32)).trace(x).lower(
            lowering_platforms=("cpu",))


@triton.jit
def _inline_asm_kernel(x_ptr, out_ptr):
    x = tl.load(x_ptr)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                  is_pure=True, pack=1)
    tl.store(out_ptr, y)


def _decorated_under_triton_interpret(monkeypatch):
    """An add kernel decorated with TRITON_INTERPRET=1 (Triton's InterpretedFunction)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    kernel = kernels.kernel_from_source("""
@triton.jit
def k(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + tl.load(y_ptr + offsets, mask=mask), mask=mask)
""")
    assert type(kernel).__name__ == "InterpretedFunction"

    def add(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernel, out_shape=x, grid=(4,), BLOCK=256)

    return add


def test_a_kernel_decorated_under_triton_interpret_runs_on_the_cpu(monkeypatch):
    add = _decorated_under_triton_interpret(monkeypatch)
    x = random_normal(21, (1000,), device=CPU)
    np.testing.assert_array_equal(jax.jit(add)(x, x), x + x)


def test_a_kernel_decorated_under_triton_interpret_is_refused_for_a_gpu_naming_it(monkeypatch):
    add = _decorated_under_triton_interpret(monkeypatch)
    x = jax.ShapeDtypeStruct((1000,), jnp.float32)
    with pytest.raises(TypeError, match=r"kernel 'k' is Triton's InterpretedFunction.*"
                                        r"TRITON_INTERPRET=1 was set.*runs it on the CPU.*cannot "
                                        r"compile it for cuda. Unset TRITON_INTERPRET"):
        with jtr.target_arch(cuda="sm_90"):
            jax.jit(add).trace(x, x).lower(lowering_platforms=("cuda",))


def test_what_the_interpreter_rejects_names_the_kernel():
    x = random_normal(20, (1,), device=CPU)
    with pytest.raises(Exception, match=r"interpreter could not run kernel _inline_asm_kernel"):
        jax.block_until_ready(jax.jit(lambda x: jtr.triton_call(
            x, kernel=_inline_asm_kernel, out_shape=x, grid=(1,)))(x))


def test_host_tensor_is_what_tritons_argument_typing_reads():
    from triton.runtime.jit import mangle_type

    buffer = np.zeros(4, np.float32)
    tensor = _interpret_host.HostTensor(buffer, tl.float32)
    assert mangle_type(tensor) == "*fp32"
    assert tensor.data_ptr() == buffer.ctypes.data


def test_interpreter_adaptations_are_undone_after_the_run():
    from triton.runtime.jit import JITFunction

    from triton.runtime import interpreter

    before = (JITFunction.__call__, interpreter._patch_lang_tensor,
              interpreter.InterpreterBuilder.create_dot, interpreter.interpreter_builder.options)
    x = random_normal(21, (256,), device=CPU)
    np.testing.assert_allclose(jax.jit(functools.partial(kernels.add, debug=True))(x, x), 2 * x)
    assert (JITFunction.__call__, interpreter._patch_lang_tensor,
            interpreter.InterpreterBuilder.create_dot,
            interpreter.interpreter_builder.options) == before


def test_cpu_lowering_is_a_host_callback_not_a_gpu_custom_call():
    x = random_normal(22, (256,), device=CPU)
    text = lowered_text(kernels.add, x, x, platform="cpu")
    assert "callback" in text
    assert "triton_kernel_call" not in text


@pytest.mark.parametrize("platforms", [["cpu"], ["cpu", "cuda"]])
def test_exporting_a_cpu_lowering_names_the_kernel_and_the_gpu_export(platforms):
    x = jnp.ones(4096, jnp.float32)
    with pytest.raises(NotImplementedError) as raised:
        jax.export.export(jax.jit(lambda x: kernels.add(x, x)), platforms=platforms,
                          disabled_checks=jtr.disabled_checks())(x)
    message = str(raised.value)
    assert message.startswith("jax.export of kernel add_kernel lowered for the CPU"), message
    assert "host callback" in message and "platforms=['cuda']" in message, message
    assert "jax_triton_rocm.target_arch(cuda='sm_90')" in message, message


def test_triton_still_compiles_after_a_kernel_that_calls_library_functions_ran(
        tmp_path, monkeypatch):
    from tests.support.lowering_utils import lower_one, spec

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # compile, not a cache hit

    x = random_normal(23, (4, 100), device=CPU)
    np.testing.assert_allclose(jax.jit(kernels.softmax)(x), jax.nn.softmax(x, axis=-1),
                               rtol=1e-5, atol=1e-6)  # tl.max and tl.sum are @triton.jit
    from tests.support import batching_kernels

    n = spec((1000,), jnp.float32)  # a kernel multiplying runtime values, compiled afresh
    jtr.clear_caches()
    call = lower_one(batching_kernels.batched_add, n, n, platform="cuda")
    assert call.summary()["launches"][0]["kernel"] == "batched_add_kernel"


_LOCAL_TL_MODULE = """
def make_kernel():
    import triton
    import triton.language as tl

    @triton.jit
    def local_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * 3)

    return local_kernel
"""


def test_kernel_whose_module_binds_no_triton_language_runs(tmp_path, monkeypatch):
    # As in `python -m jax_triton_rocm`, whose kernels see `tl` only as a local of a function.
    (tmp_path / "local_tl_kernels.py").write_text(_LOCAL_TL_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    import local_tl_kernels

    kernel = local_tl_kernels.make_kernel()
    x = random_normal(24, (64,), device=CPU)
    out = jax.jit(lambda x: jtr.triton_call(x, kernel=kernel, out_shape=x, grid=(1,),
                                            BLOCK=64))(x)
    np.testing.assert_allclose(out, 3 * x, rtol=1e-6)


def test_example_multi_process_kernel_matches_jnp():
    import importlib.util
    import os

    from tests.support.subprocess_utils import ROOT

    path = os.path.join(ROOT, "examples", "multi_process.py")
    module_spec = importlib.util.spec_from_file_location("multi_process_example", path)
    example = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(example)
    x, y = random_normal(25, (5000,), device=CPU), random_normal(26, (5000,), device=CPU)
    np.testing.assert_allclose(jax.jit(example.axpy)(x, y), example.ALPHA * x + y, rtol=1e-6)


@triton.jit
def _arange_kernel(out_ptr, size):
    offsets = tl.arange(0, size)
    tl.store(out_ptr + offsets, offsets)


def test_parameter_given_by_keyword_is_a_constexpr_as_when_compiled():
    with jax.default_device(CPU):
        out = jax.jit(lambda: jtr.triton_call(
            kernel=_arange_kernel, out_shape=jax.ShapeDtypeStruct((16,), jnp.int32), grid=(1,),
            size=16))()
    assert out.devices() == {CPU}
    np.testing.assert_array_equal(out, np.arange(16))


def test_a_run_holds_the_triton_language_lock_that_compiles_take(monkeypatch):
    # The interpreter patches triton.language process-wide: a front end compiling in another
    # thread meanwhile would build IR from it. Both take the same lock.
    held = []
    real = _interpret_host.interpreted

    class Recording:
        def __init__(self, jit_fn):
            self.twin = real(jit_fn)

        def __getitem__(self, grid):
            def run(*args, **kwargs):
                held.append(_state.LOCKS.triton_language.locked())
                return self.twin[grid](*args, **kwargs)

            return run

    monkeypatch.setattr(_interpret_host, "interpreted", Recording)
    x = jax.device_put(jnp.arange(1024, dtype=jnp.float32), CPU)
    np.testing.assert_allclose(jax.jit(kernels.add)(x, x), 2 * x)
    assert held == [True]


@triton.jit
def scale_by_keyword_kernel(x_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    # Keyword parameters are constexprs; here they stand on the left of tensor operators.
    y = alpha * tl.load(x_ptr + offsets, mask=mask) + (n - offsets) * 0.0
    tl.store(out_ptr + offsets, y, mask=mask)


def test_a_keyword_constexpr_left_of_a_tensor_operator():
    x = random_normal(40, (3000,), device=CPU)
    out = jax.jit(lambda x: jtr.triton_call(x, kernel=scale_by_keyword_kernel, out_shape=x,
                                            grid=(3,), n=3000, alpha=2.5, BLOCK=1024))(x)
    np.testing.assert_allclose(out, 2.5 * x, rtol=1e-6)


@triton.jit
def _negatives_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    tl.device_assert(x < 0, "x must be negative")
    tl.store(out_ptr + offsets, x)


def _negatives(x, debug):
    return jtr.triton_call(x, kernel=_negatives_kernel, out_shape=x, grid=(1,), BLOCK=256,
                           debug=debug)


def test_a_failing_device_assert_raises_on_the_cpu_under_debug():
    # As on the GPU, where debug=True compiles tl.device_assert in.
    x = jax.device_put(jnp.arange(256, dtype=jnp.float32), CPU)
    with pytest.raises(Exception, match=r"Kernel _negatives_kernel failed an assertion in "
                                        r"Triton's interpreter .*debug=True.*x must be negative"):
        jax.block_until_ready(jax.jit(functools.partial(_negatives, debug=True))(x))


def _line_of(code: str) -> int:
    with open(__file__) as source:
        return next(n for n, line in enumerate(source, 1) if line.strip().startswith(code))


def test_a_failing_device_assert_names_the_kernels_line():
    x = jax.device_put(jnp.arange(256, dtype=jnp.float32), CPU)
    with pytest.raises(Exception, match=rf"x must be negative at {re.escape(__file__)}:"
                                        rf"{_line_of('tl.device_assert(x < 0')} "):
        jax.block_until_ready(jax.jit(functools.partial(_negatives, debug=True))(x))


@triton.jit
def _small_blocks_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.static_assert(BLOCK < 4, "BLOCK must be under 4")
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


def _small_blocks(x):
    return jtr.triton_call(x, kernel=_small_blocks_kernel, out_shape=x, grid=(1,), BLOCK=8)


SMALL_BLOCKS_FAILURE = ("Triton's interpreter could not run kernel _small_blocks_kernel "
                        "(grid (1, 1, 1), constexprs BLOCK=8) on the CPU: InterpreterError: "
                        "AssertionError('BLOCK must be under 4') at ")


def test_a_kernel_failing_outside_jit_fails_with_the_packages_sentence_alone():
    x = jax.device_put(jnp.arange(8, dtype=jnp.float32), CPU)
    with pytest.raises(jax.errors.JaxRuntimeError) as failure:
        _small_blocks(x)
    assert str(failure.value).startswith(SMALL_BLOCKS_FAILURE), str(failure.value)
    assert "Traceback" not in str(failure.value)


def test_a_kernel_failing_under_jit_names_the_kernels_line():
    # jaxlib writes the frames of the callback before the package's sentence (docs/troubleshooting.md).
    x = jax.device_put(jnp.arange(8, dtype=jnp.float32), CPU)
    with pytest.raises(jax.errors.JaxRuntimeError) as failure:
        jax.block_until_ready(jax.jit(_small_blocks)(x))
    assert (SMALL_BLOCKS_FAILURE + f"{__file__}:{_line_of('tl.static_assert(BLOCK < 4')} "
            f"(tl.static_assert(BLOCK < 4, \"BLOCK must be under 4\")).") in str(failure.value)


def test_a_kernel_failing_under_jit_logs_the_packages_sentence_before_jaxlibs_text(caplog):
    x = jax.device_put(jnp.arange(8, dtype=jnp.float32), CPU)
    with caplog.at_level(logging.ERROR, logger="jax_triton_rocm"):
        with pytest.raises(jax.errors.JaxRuntimeError):
            jax.block_until_ready(jax.jit(_small_blocks)(x))
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert len(logged) == 1 and logged[0].startswith(SMALL_BLOCKS_FAILURE), logged


def test_only_the_packages_callback_failure_is_taken_from_jaxlibs_text():
    frames = ('CpuCallback error calling callback: Traceback (most recent call last):\n'
              '  File "a.py", line 3, in <module>\n  File "b.py", line 9, in {}\n'
              'RuntimeError: it failed\non two lines')
    assert _interpret.run_failure(frames.format("run_on_host")) == "it failed\non two lines"
    assert _interpret.run_failure(frames.format("user_callback")) is None


def test_a_device_assert_is_not_checked_on_the_cpu_without_debug():
    x = jax.device_put(jnp.arange(256, dtype=jnp.float32), CPU)
    np.testing.assert_array_equal(jax.jit(functools.partial(_negatives, debug=False))(x), x)


def test_a_none_scalar_the_kernel_cannot_use_names_the_constexprs():
    x = jax.device_put(jnp.arange(256, dtype=jnp.float32), CPU)
    with pytest.raises(Exception, match=r"could not run kernel add_kernel \(grid \(1, 1, 1\), "
                                        r"constexprs n=None, BLOCK=256\)"):
        jax.block_until_ready(jax.jit(lambda x: jtr.triton_call(
            x, x, None, kernel=kernels.add_kernel, out_shape=x, grid=(1,), BLOCK=256))(x))


@triton.jit
def _unknown_method_kernel(x_ptr, out_ptr):
    offsets = tl.arange(0, 8)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets).no_such_method())


@triton.jit
def _widened_count_kernel(x_ptr, n, out_ptr):
    offsets = tl.arange(0, 8)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets), mask=offsets < n.to(tl.int64))


def _failure(kernel, *args) -> str:
    x = jax.device_put(jnp.arange(8, dtype=jnp.float32), CPU)
    with pytest.raises(jax.errors.JaxRuntimeError) as failure:
        jtr.triton_call(x, *args, kernel=kernel, out_shape=x, grid=(1,))
    return str(failure.value)


def test_a_value_the_kernel_made_that_fails_gets_no_advice_about_the_calls_values():
    message = _failure(_unknown_method_kernel)
    assert ("'tensor' object has no attribute 'no_such_method'" in message
            and "The tensor it failed on is a value the kernel made, not one the call passes: "
                "fix the kernel there" in message), message
    assert "where the call passes it" not in message, message


def test_a_value_the_call_passes_that_fails_gets_the_advice_about_it():
    message = _failure(_widened_count_kernel, None)
    assert ("'NoneType' object has no attribute 'to'" in message
            and "Fix a value the kernel cannot use where the call passes it (a None positional "
                "argument is a constexpr" in message), message


def test_an_error_that_names_no_value_keeps_the_advice_about_the_calls_values():
    assert not _interpret._made_by_kernel(AttributeError("raised by hand"), kernels.add_kernel)
    outside = AttributeError("no kernel frame", name="to", obj=5)  # raised before the kernel ran
    assert not _interpret._made_by_kernel(outside, kernels.add_kernel)
    assert not _interpret._made_by_kernel(TypeError("'<' not supported"), kernels.add_kernel)


@triton.jit
def _halved_product_kernel(a, b, out_ptr):
    tl.store(out_ptr, (a * b) // 2)


def test_int32_scalars_multiply_in_int32_and_wrap_as_on_the_gpu():
    # Both fit in int32, so the launch types them i32: 65536 * 65536 = 2**32 wraps to 0 before the
    # division (in int64 it would be 2**31, stored as -2**31).
    with jax.default_device(CPU):
        out = jax.jit(lambda: jtr.triton_call(
            65536, 65536, kernel=_halved_product_kernel,
            out_shape=jax.ShapeDtypeStruct((1,), jnp.int32), grid=(1,)))()
    assert out.devices() == {CPU}
    np.testing.assert_array_equal(out, np.zeros(1, np.int32))


def test_a_grid_of_billions_of_programs_is_announced_at_lowering_with_its_count(caplog):
    x = jax.ShapeDtypeStruct((1 << 16,), jnp.float32)

    def huge(x):
        return jtr.triton_call(x, x, x.size, kernel=kernels.add_kernel, out_shape=x,
                               grid=(1 << 16, 1 << 16), BLOCK=1)

    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        lowered_text(huge, x, platform="cpu")
        lowered_text(lambda x: kernels.add(x, x, block=1), x, platform="cpu")  # 65536: quiet
    [warning] = [r.getMessage() for r in caplog.records if "programs" in r.getMessage()]
    assert "kernel add_kernel has a grid of (65536, 65536, 1), 4294967296 programs" in warning
    assert "roughly 50 days" in warning and "on a GPU" in warning
