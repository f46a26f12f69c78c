"""`jax.vmap` of `triton_call`: the loop by default, one launch with `batch_grid_axis`.

Numbers come from Triton's interpreter on the CPU device (compared with the unbatched calls, one
example at a time); structure from lowering for CUDA on a machine without a GPU. The loop gets the
numbers of a `batch_grid_axis` call right too: only the launch's grid tells the two apart.
"""

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton

import jax_triton_rocm as jtr
from tests.support import batching_kernels, kernels
from tests.support.kernels import random_normal
from tests.support.lowering_utils import lower_for, lower_one, spec

CPU = jax.devices("cpu")[0]


def _per_example(fn, *args, in_axes=0):
    """fn applied to one example at a time (unbatched calls), stacked on axis 0."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(a.shape[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = [fn(*[a if ax is None else jnp.take(a, i, axis=ax) for a, ax in zip(args, axes)])
            for i in range(size)]
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *outs)


def _scale_shift(x, scale, shift, flip):
    return jtr.triton_call(x, scale, shift, flip, x.size, kernel=kernels.scale_shift_kernel,
                           out_shape=x, grid=(triton.cdiv(x.size, 256),), BLOCK=256)


def _inplace(x, y):
    return kernels.add_inplace(x, y, block=128)


def _total(x):
    return jtr.triton_call(x, x.size, kernel=kernels.atomic_sum_kernel,
                           out_shape=jax.ShapeDtypeStruct((1,), jnp.float32),
                           grid=(triton.cdiv(x.size, 128),), BLOCK=128, zeroed_outputs=(0,))


def _sum_and_diff(x, y):
    return jtr.triton_call(x, y, x.size, kernel=kernels.sum_and_diff_kernel,
                           out_shape=(x, x), grid=(triton.cdiv(x.size, 128),), BLOCK=128)


def _launch_grid(fn, *args):
    """The grid of the one kernel launch `fn(*args)` lowers to, lowered for sm_90."""
    specs = [spec(a.shape, a.dtype) for a in args]
    return lower_one(fn, *specs, platform="cuda").summary()["launches"][0]["grid"]


# The default rule: a loop of unbatched calls.

def test_vmap_matches_the_unbatched_calls():
    x, y = random_normal(0, (5, 300), device=CPU), random_normal(1, (5, 300), device=CPU)
    np.testing.assert_allclose(jax.jit(jax.vmap(kernels.add))(x, y),
                               _per_example(kernels.add, x, y), rtol=1e-6)


def test_vmap_over_a_non_leading_axis_with_an_unbatched_operand():
    x, y = random_normal(2, (300, 4), device=CPU), random_normal(3, (300,), device=CPU)
    out = jax.jit(jax.vmap(kernels.add, in_axes=(1, None)))(x, y)
    np.testing.assert_allclose(out, _per_example(kernels.add, x, y, in_axes=(1, None)),
                               rtol=1e-6)


def test_vmap_keeps_int_float_bool_scalars():
    x = random_normal(4, (3, 500), device=CPU)
    out = jax.jit(jax.vmap(lambda x: _scale_shift(x, 2.5, -7, True)))(x)
    np.testing.assert_allclose(out, -(x * 2.5 - 7), rtol=1e-6)


def test_nested_vmap_matches_the_unbatched_calls():
    x, y = random_normal(5, (3, 2, 200), device=CPU), random_normal(6, (2, 200), device=CPU)
    out = jax.jit(jax.vmap(jax.vmap(kernels.add), in_axes=(0, None)))(x, y)
    ref = jnp.stack([_per_example(kernels.add, x[i], y) for i in range(3)])
    np.testing.assert_allclose(out, ref, rtol=1e-6)


def test_vmap_with_input_output_aliases():
    x, y = random_normal(7, (4, 256), device=CPU), random_normal(8, (256,), device=CPU)
    out = jax.jit(jax.vmap(_inplace, in_axes=(0, None)))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)


def test_vmap_with_an_unbatched_aliased_input():
    x, y = random_normal(9, (256,), device=CPU), random_normal(10, (4, 256), device=CPU)
    out = jax.jit(jax.vmap(_inplace, in_axes=(None, 0)))(x, y)
    np.testing.assert_allclose(out, x + y, rtol=1e-6)


def test_vmap_zeroes_each_examples_output():
    x = random_normal(11, (3, 512), device=CPU)
    np.testing.assert_allclose(jax.jit(jax.vmap(_total))(x)[:, 0], jnp.sum(x, axis=1),
                               rtol=1e-5)


def test_vmap_of_two_outputs():
    x, y = random_normal(12, (3, 250), device=CPU), random_normal(13, (3, 250), device=CPU)
    total, diff = jax.jit(jax.vmap(_sum_and_diff))(x, y)
    np.testing.assert_allclose(total, x + y, rtol=1e-6)
    np.testing.assert_allclose(diff, x - y, rtol=1e-6)


def test_vmap_loops_over_one_unbatched_launch():
    x = spec((6, 1024), jnp.float32)
    lowered = lower_for(jax.vmap(kernels.add), x, x, platform="cuda")
    (call,) = jtr.kernel_calls(lowered)
    assert call.summary()["launches"][0]["grid"] == (4, 1, 1)
    assert "stablehlo.while" in lowered.as_text()


# The opt-in rule: one launch, the kernel indexing the examples by a grid axis.

def test_batch_grid_axis_matches_the_unbatched_calls():
    x, y = random_normal(14, (5, 300), device=CPU), random_normal(15, (5, 300), device=CPU)
    fn = jax.vmap(batching_kernels.batched_add)
    np.testing.assert_allclose(jax.jit(fn)(x, y),
                               _per_example(batching_kernels.batched_add, x, y), rtol=1e-6)
    assert _launch_grid(fn, x, y) == (3, 5, 1)


def test_batch_grid_axis_is_one_launch_with_the_batch_on_that_axis():
    x = spec((6, 1024), jnp.float32)
    lowered = lower_for(jax.vmap(batching_kernels.batched_add), x, x, platform="cuda")
    (call,) = jtr.kernel_calls(lowered)
    assert call.summary()["launches"][0]["grid"] == (8, 6, 1)
    assert "stablehlo.while" not in lowered.as_text()


def test_batch_grid_axis_nested_vmap_multiplies_the_batch():
    x, y = random_normal(16, (3, 2, 200), device=CPU), random_normal(17, (3, 2, 200), device=CPU)
    fn = jax.vmap(jax.vmap(batching_kernels.batched_add))
    np.testing.assert_allclose(jax.jit(fn)(x, y), x + y, rtol=1e-6)
    assert _launch_grid(fn, x, y) == (2, 6, 1)


def test_batch_grid_axis_with_a_non_leading_axis_and_an_unbatched_operand():
    x, y = random_normal(18, (300, 4), device=CPU), random_normal(19, (300,), device=CPU)
    fn = jax.vmap(batching_kernels.batched_add, in_axes=(1, None))
    np.testing.assert_allclose(jax.jit(fn)(x, y), x.T + y, rtol=1e-6)
    assert _launch_grid(fn, x, y) == (3, 4, 1)


def test_batch_grid_axis_with_input_output_aliases():
    x, y = random_normal(20, (4, 256), device=CPU), random_normal(21, (256,), device=CPU)
    fn = jax.vmap(batching_kernels.batched_add_inplace, in_axes=(0, None))
    np.testing.assert_allclose(jax.jit(fn)(x, y), x + y, rtol=1e-6)
    assert _launch_grid(fn, x, y) == (2, 4, 1)


def test_batch_grid_axis_callable_grid_sees_unbatched_shapes():
    x, y = random_normal(22, (3, 300), device=CPU), random_normal(23, (3, 300), device=CPU)
    seen = []

    def grid(meta):
        seen.append(meta["x_ptr"].shape)
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)

    fn = jax.vmap(lambda a, b: batching_kernels.batched_add(a, b, grid=grid))
    np.testing.assert_allclose(jax.jit(fn)(x, y), x + y, rtol=1e-6)
    assert _launch_grid(fn, x, y) == (3, 3, 1)
    assert seen and set(seen) == {(300,)}


def test_batch_grid_axis_out_of_range_is_refused():
    x = random_normal(24, (128,), device=CPU)
    with pytest.raises(ValueError, match=r"batch_grid_axis=3 must be None .* 0, 1 or 2"):
        jtr.triton_call(x, x, x.size, kernel=kernels.add_kernel, out_shape=x, grid=(1,),
                        BLOCK=128, batch_grid_axis=3)


def test_batch_grid_axis_already_used_by_the_grid_is_refused_at_the_vmap():
    x = random_normal(25, (2, 128), device=CPU)
    with pytest.raises(ValueError, match=r"batch_grid_axis=1, but the call's grid \(1, 2, 1\)"):
        # Traced, not run: a loop that took the call anyway would launch past the arrays.
        jax.eval_shape(jax.vmap(lambda a: batching_kernels.batched_add(a, a, grid=(1, 2))), x)
