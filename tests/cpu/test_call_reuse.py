"""A `triton_call` traced again at new shapes or new scalar values reuses the layout of the first
(`checks._bound`): the call it makes is the one the full check makes in a fresh process, and
whatever the full check refuses is still refused, with its message."""

import dataclasses
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env, _state
from jax_triton_rocm.checks import _binder, _bound
from tests.support import autotune_utils, kernels, surface_kernels

PLACED_FIELDS = ("user_results", "refs")


@pytest.fixture
def traced(monkeypatch):
    """`trace(fn, *shapes)` traces `fn` on float32 arrays of `shapes` and returns
    (BoundCall, operand positions among fn's arguments, whether the full check ran)."""
    monkeypatch.setattr(_state, "CALL_LAYOUTS",
                        _state.BoundedCache(_env.ENV_CALL_CACHE_SIZE))
    seen = []
    check, full = _bound.check_triton_call, _binder.bind_arguments

    def capturing(args, *rest, **kwargs):
        call = check(args, *rest, **kwargs)
        seen.append((call, args))
        return call

    def counting(*args, **kwargs):
        seen.append("full")
        return full(*args, **kwargs)

    monkeypatch.setattr(_bound, "check_triton_call", capturing)
    monkeypatch.setattr(_binder, "bind_arguments", counting)

    def trace(fn, *shapes):
        seen.clear()
        arguments = [jnp.zeros(shape, jnp.float32) for shape in shapes]
        inner = []

        def body(*xs):
            inner.extend(xs)
            return fn(*xs)

        jax.make_jaxpr(body)(*arguments)
        [(call, args)] = [entry for entry in seen if entry != "full"]
        positions = [next((i for i, x in enumerate(inner) if x is operand), None)
                     for operand in call.placed.operands]
        return call, positions, "full" in seen

    return trace


def assert_same_call(reused, fresh):
    (call, positions, _), (expected, expected_positions, _) = reused, fresh
    grid, expected_grid = call.spec.grid, expected.spec.grid
    if callable(grid):  # a lambda made at each trace: the same function of the metaparameters
        grid, expected_grid = grid({"BLOCK": 64, "n": 99}), expected_grid({"BLOCK": 64, "n": 99})
    assert grid == expected_grid
    assert dataclasses.replace(call.spec, grid=0) == dataclasses.replace(expected.spec, grid=0)
    assert call.spec.exact_values == expected.spec.exact_values
    assert call.spec.positional == expected.spec.positional
    assert call.spec.types == expected.spec.types  # typed as the full check types them
    assert call.spec.metaparams == expected.spec.metaparams
    for field in PLACED_FIELDS:
        assert getattr(call.placed, field) == getattr(expected.placed, field), field
    assert [(tuple(a.shape), np.dtype(a.dtype)) for a in call.placed.operands] == [
        (tuple(a.shape), np.dtype(a.dtype)) for a in expected.placed.operands]
    assert positions == expected_positions
    assert call.out_tree == expected.out_tree


def _add_03(x, y):
    return kernels.add(x, y)


def _add_04(x, y):
    return jtr.triton_call(x, y, n=x.size, kernel=kernels.add_kernel, out_type=x,
                           grid=(triton.cdiv(x.size, 256),), BLOCK=256)


def _scale_shift(x):
    return jtr.triton_call(x, 0.5 * x.size, x.size % 7, x.size % 2 == 0, x.size,
                           kernel=kernels.scale_shift_kernel, out_shape=x,
                           grid=lambda meta: (triton.cdiv(x.size, meta["BLOCK"]),), BLOCK=128)


def _numpy_scalar(x):
    return jtr.triton_call(x, np.int32(x.size), kernel=kernels.copy_kernel, out_shape=x,
                           grid=(4,), BLOCK=256, num_warps=2, name="copy")


def _aliased_03(x, y):
    return jtr.triton_call(x, y, x.size, kernel=kernels.add_inplace_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, 256),), input_output_aliases={0: 0},
                           BLOCK=256)


def _aliased_04(x, y):
    return jtr.triton_call(x, y, x.size, kernel=surface_kernels.add_inplace_kernel, out_type=y,
                           grid=(triton.cdiv(x.size, 256),), input_output_aliases={1: 0},
                           BLOCK=256)


def _zeroed_pair(x, y):
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    return jtr.triton_call(x, y, x.size, kernel=kernels.sum_and_diff_kernel, out_shape=(out, out),
                           grid=(triton.cdiv(x.size, 256),), zeroed_outputs=(1,), BLOCK=256)


def _constexpr_first(x, y):
    return jtr.triton_call(x, 64, y, x.size, kernel=surface_kernels.constexpr_first_kernel,
                           out_shape=x, grid=(triton.cdiv(x.size, 64),))


def _autotuned(x, y):
    return autotune_utils.tuned_add(x, y)


# (function, number of array arguments, whether the layout is kept for reuse)
CALLS = {
    "0.3 form": (_add_03, 2, True),
    "0.4 form, length by keyword": (_add_04, 2, True),
    "float, int and bool scalars, grid callable": (_scale_shift, 1, True),
    "NumPy scalar, launch settings, name": (_numpy_scalar, 1, True),
    "aliased, 0.3": (_aliased_03, 2, True),
    "aliased, 0.4": (_aliased_04, 2, True),
    "two outputs, one zeroed": (_zeroed_pair, 2, True),
    "constexpr given positionally": (_constexpr_first, 2, True),
    "autotuned": (_autotuned, 2, True),
}


@pytest.mark.parametrize("name", list(CALLS))
def test_a_new_shape_reuses_the_layout_and_makes_the_fresh_call(traced, name):
    fn, n_arrays, kept = CALLS[name]
    traced(fn, *[(1024,)] * n_arrays)
    again = traced(fn, *[(2064,)] * n_arrays)
    assert again[2] is not kept  # the full check ran only where no layout is kept
    _state.CALL_LAYOUTS.clear()
    fresh = traced(fn, *[(2064,)] * n_arrays)
    assert fresh[2]
    assert_same_call(again, fresh)


@pytest.mark.parametrize("name", list(CALLS))
def test_each_scalar_is_typed_once_per_trace_where_the_call_is_taken(traced, name, monkeypatch):
    # Its role (`CallArguments.roles`) is read by the binder, the full check and a reused
    # layout; only a constexpr given in 0.3's form is typed again, as it is placed.
    from jax_triton_rocm.kernel import _spec

    fn, n_arrays, _ = CALLS[name]
    typed = []
    for function in ("scalar_role", "scalar"):
        def counting(*args, _typing=getattr(_spec, function), **kwargs):
            typed.append(sys._getframe(1).f_code.co_name)
            return _typing(*args, **kwargs)

        monkeypatch.setattr(_spec, function, counting)
    for length, full in ((1024, True), (2064, False)):  # the full check, then a reuse
        typed.clear()
        assert traced(fn, *[(length,)] * n_arrays)[2] is full
        assert "call_arguments" in typed
        assert set(typed) <= {"call_arguments", "scalar_role", "place_outputs"}, typed


def test_an_array_given_by_keyword_keeps_no_layout(traced):
    def out_first(x, y):  # y by keyword: the output's pointer comes before it (zero-filled)
        return jtr.triton_call(x, kernel=surface_kernels.out_first_kernel, out_type=x,
                               grid=(4,), y_ptr=y, n=x.size, BLOCK=256)

    traced(out_first, (1024,), (1024,))
    assert traced(out_first, (2048,), (2048,))[2]
    assert len(_state.CALL_LAYOUTS) == 0


@pytest.mark.parametrize("first,second", [(1000, 2**40 + 1), (1000, 1), (1000, 1024),
                                          (1000, 1000.0), (1000, True)])
def test_a_scalar_of_another_type_or_specialisation_is_checked_in_full(traced, first, second):
    def copy(x, n):
        return jtr.triton_call(x, n, kernel=kernels.copy_kernel, out_shape=x, grid=(4,),
                               BLOCK=256)

    traced(lambda x: copy(x, first), (1024,))
    assert traced(lambda x: copy(x, second), (1024,))[2]


def test_aliased_buffers_of_new_shapes_that_differ_are_refused_as_before(traced):
    def aliased(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernels.add_inplace_kernel,
                               out_shape=jax.ShapeDtypeStruct(y.shape, x.dtype), grid=(4,),
                               input_output_aliases={0: 0}, BLOCK=256)

    traced(aliased, (1024,), (1024,))
    with pytest.raises(ValueError, match="must have the same shape and dtype") as reused:
        traced(aliased, (1024,), (2048,))
    _state.CALL_LAYOUTS.clear()
    with pytest.raises(ValueError) as fresh:
        traced(aliased, (1024,), (2048,))
    assert str(reused.value) == str(fresh.value)


def test_a_bad_grid_at_a_new_shape_is_refused_as_before(traced):
    def gridded(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernels.add_kernel, out_shape=x,
                               grid=(x.size // 4096 - 1,), BLOCK=256)

    traced(gridded, (8192,), (8192,))
    with pytest.raises(ValueError, match="grid"):
        traced(gridded, (1024,), (1024,))  # a grid of -1 programs


def test_new_keyword_values_are_checked_in_full(traced):
    traced(lambda x, y: kernels.add(x, y, num_warps=4), (1024,), (1024,))
    with pytest.raises(ValueError, match="num_warps"):
        traced(lambda x, y: kernels.add(x, y, num_warps=3), (1024,), (1024,))
    with pytest.raises(TypeError, match="debug"):
        traced(lambda x, y: kernels.add(x, y, debug="yes"), (1024,), (1024,))


def test_the_layouts_kept_are_bounded(traced, monkeypatch):
    monkeypatch.setenv(_env.ENV_CALL_CACHE_SIZE, "2")
    for block in (64, 128, 256, 512):
        traced(lambda x, y, block=block: kernels.add(x, y, block=block), (1024,), (1024,))
    assert len(_state.CALL_LAYOUTS) == 2


def test_clear_caches_forgets_the_layouts():
    x = jnp.zeros((1024,), jnp.float32)
    jax.make_jaxpr(_add_03)(x, x)
    assert len(_state.CALL_LAYOUTS) >= 1
    jtr.clear_caches()
    assert len(_state.CALL_LAYOUTS) == 0


def test_a_kernel_is_taken_apart_once_per_process_until_caches_are_cleared(monkeypatch):
    from jax_triton_rocm.kernel import _spec

    taken = []
    original = _spec.unwrap
    monkeypatch.setattr(_spec, "unwrap", lambda kernel: taken.append(kernel) or original(kernel))
    jtr.clear_caches()
    x = jnp.zeros((1024,), jnp.float32)
    for length in (1024, 2048):
        x = jnp.zeros((length,), jnp.float32)
        jax.make_jaxpr(_add_03)(x, x)
        jax.make_jaxpr(_autotuned)(x, x)
    assert taken == [kernels.add_kernel, autotune_utils.tuned_add_kernel]
    jtr.clear_caches()
    jax.make_jaxpr(_add_03)(x, x)
    assert taken[-1] is kernels.add_kernel and len(taken) == 3


def test_a_reused_layout_is_not_laid_out_again(traced, monkeypatch):
    # Its key holds all the layout check reads (operand kinds, dtypes, 0-d arrays, scalars'
    # roles, constexprs), so the full check's verdict holds for every call reusing it.
    from jax_triton_rocm.kernel import _layout

    checked, real = [], _layout.check_kernel_arguments

    def counting(spec, in_avals):
        checked.append(in_avals[0].shape)
        return real(spec, in_avals)

    monkeypatch.setattr(_layout, "check_kernel_arguments", counting)
    assert traced(kernels.add, (1024,), (1024,))[2]  # the full check
    assert not traced(kernels.add, (2048,), (2048,))[2]  # reused, not checked again
    assert checked == [(1024,)]
