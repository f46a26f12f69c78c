"""`TensorDescriptor` and `strides_from_shape`: jax-triton 0.4's fields, checks and pytree."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr

X = jnp.zeros((32, 64), jnp.float32)


@pytest.mark.parametrize("shape", [(7,), (4, 8, 16), (2, 3, 5, 7), (3, 1, 2)])
def test_strides_from_shape_are_numpys_row_major_element_strides(shape):
    array = np.zeros(shape, np.float32)
    assert jtr.strides_from_shape(shape) == tuple(s // 4 for s in array.strides)


def test_strides_from_shape_of_a_scalar_and_an_empty_array():
    assert jtr.strides_from_shape(()) == ()
    assert jtr.strides_from_shape((3, 0, 2)) == (0, 2, 1)


@pytest.mark.parametrize("shape,error", [("ab", TypeError), ((2.0, 3), TypeError),
                                         ((2, -1), ValueError)])
def test_strides_from_shape_names_a_bad_shape(shape, error):
    with pytest.raises(error, match="strides_from_shape: shape"):
        jtr.strides_from_shape(shape)


def test_from_array_describes_the_whole_array():
    desc = jtr.TensorDescriptor.from_array(X, block_shape=[16, 32], padding="nan")
    assert (desc.shape, desc.strides, desc.block_shape) == ((32, 64), (64, 1), (16, 32))
    assert desc.base is X and desc.padding == "nan" and desc.layout is None
    assert desc.round_f32_to_tf32 is False


def test_the_base_is_the_only_leaf_and_the_rest_is_static():
    desc = jtr.TensorDescriptor.from_array(X, block_shape=[16, 32])
    leaves, tree = jax.tree_util.tree_flatten(desc)
    assert len(leaves) == 1 and leaves[0] is X
    other = jtr.TensorDescriptor.from_array(X, block_shape=[32, 32])
    assert jax.tree_util.tree_structure(other) != tree


def test_passes_through_jit_and_vmap_with_its_fields():
    desc = jtr.TensorDescriptor.from_array(X, block_shape=[16, 32])
    doubled = jax.jit(lambda d: dataclass_replace_base(d, d.base * 2))(desc)
    assert doubled.block_shape == (16, 32) and float(doubled.base.sum()) == 0.0
    stacked = jnp.zeros((3, 32, 64), jnp.float32)
    rows = jax.vmap(lambda b: jtr.TensorDescriptor.from_array(b, [16, 32]).base.sum())(stacked)
    assert rows.shape == (3,)


def dataclass_replace_base(desc, base):
    return jtr.TensorDescriptor(base, desc.shape, desc.strides, desc.block_shape)


def test_tree_map_may_put_anything_in_the_base():
    desc = jtr.TensorDescriptor.from_array(X, block_shape=[16, 32])
    assert jax.tree_util.tree_map(lambda _: None, desc).base is None


@pytest.mark.parametrize("kwargs,error,match", [
    (dict(shape=(), strides=(), block_shape=()), ValueError, "rank 0"),
    (dict(shape=(2,) * 6, strides=(1,) * 6, block_shape=(2,) * 6), ValueError, "rank 6"),
    (dict(shape=(32, 64), strides=(64,), block_shape=(16, 32)), ValueError, "same length"),
    (dict(shape=(32, 64), strides=(1, 32), block_shape=(16, 32)), ValueError, "last stride"),
    (dict(shape=(32, 64), strides=(64, 1), block_shape=(16, 24)), ValueError, r"element 1 \(24\)"),
    (dict(shape=(32, 0), strides=(64, 1), block_shape=(16, 32)), ValueError, r"\[1, 2\*\*31\)"),
    (dict(shape=(32, 64), strides=(64, 1), block_shape=(16, 32), padding="inf"), ValueError,
     "padding='inf'"),
    (dict(shape=(32, 64), strides=(64, 1), block_shape=(16, 32), layout=[1]), TypeError,
     "hashable"),
    (dict(shape=(32, 64), strides=(64, 1), block_shape=(16.0, 32)), TypeError, "ints only"),
])
def test_a_bad_field_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        jtr.TensorDescriptor(X, **kwargs)


@pytest.mark.parametrize("base,kwargs,match", [
    (jnp.zeros((32, 64), jnp.int32), dict(padding="nan"), "padding='nan' needs a floating"),
    (jnp.zeros((32, 64), jnp.float16), dict(round_f32_to_tf32=True), "needs a float32 base"),
    (jnp.zeros((32, 3), jnp.float32), dict(), r"multiple of 16 bytes \(3 x 4 bytes"),
    (jnp.zeros((32, 64), jnp.complex64), dict(), "complex64, which Triton kernels cannot take"),
])
def test_a_field_that_does_not_fit_the_base_is_named(base, kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        jtr.TensorDescriptor.from_array(base, block_shape=[16, 2], **kwargs)


def test_a_region_outside_the_base_is_refused():
    with pytest.raises(ValueError, match=r"reaches element 2111 of its base, which has 2048"):
        jtr.TensorDescriptor(X, (33, 64), (64, 1), (16, 32))
    with pytest.raises(ValueError, match=r"reaches element 2048 of its base, which has 2048"):
        jtr.TensorDescriptor(X, (2, 1025), (1024, 1), (2, 1024))  # one past the end
    inner = jtr.TensorDescriptor(X, (16, 32), (64, 1), (16, 32))  # a corner: fits
    assert inner.shape == (16, 32)
