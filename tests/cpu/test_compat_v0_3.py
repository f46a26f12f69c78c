"""`jax_triton_rocm.compat.v0_3`, the drop-in for jax-triton 0.3.1's users: its public names and
`triton_call`'s signature are 0.3.1's (as read from its wheel), a call is placed by 0.3's rules
and lowered on jaxlib's route, and 0.3-style calls give the right numbers in Triton's
interpreter.
"""

import inspect

import jax
import jax.numpy as jnp
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
import jax_triton_rocm.compat.v0_3 as jt
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env
from jax_triton_rocm.compat import triton_lib_0_3 as jttl
from tests.support import kernels
from tests.support.lowering_utils import capture_one, lower_for, spec

X = spec((1000,), jnp.float32)

# The specification, from jax-triton 0.3.1's wheel: `jax_triton.__all__` in its order,
# `jax_triton.utils.__all__`, and `triton_call`'s keyword-only parameters with their defaults.
JAX_TRITON_0_3_1_ALL = ["utils", "triton_call", "cdiv", "next_power_of_2", "strides_from_shape",
                        "__version__", "__version_info__"]
JAX_TRITON_0_3_1_UTILS_ALL = ["cdiv", "strides_from_shape", "next_power_of_2"]
TRITON_CALL_0_3_1_KEYWORDS = [
    ("kernel", inspect.Parameter.empty), ("out_shape", inspect.Parameter.empty),
    ("grid", inspect.Parameter.empty), ("name", ""),
    ("custom_call_target_name", "triton_kernel_call"), ("num_warps", None),
    ("num_stages", None), ("num_ctas", 1), ("compute_capability", None),
    ("enable_fp_fusion", True), ("input_output_aliases", None), ("zeroed_outputs", ()),
    ("debug", False), ("serialized_metadata", b"")]
# The names 0.3.1's `triton_lib.py` defines without a leading `_`: those provided here, and those
# of its own compiler and lowering, which are refused naming the package's way.
TRITON_LIB_PROVIDED = ["CAN_USE_TRITON", "Grid", "GridOrLambda", "ShapeDtype", "normalize_grid",
                       "triton_call", "triton_kernel_call_p"]
TRITON_LIB_REFUSED = [
    "CompilationResult", "aval_size_bytes", "avals_to_layouts", "compile_ttir_inplace",
    "compile_ttir_to_hsaco_inplace", "compile_ttir_to_ptx_inplace", "get_cuda_backend",
    "get_hip_backend", "get_or_create_triton_kernel", "get_triton_type",
    "triton_kernel_call_abstract_eval", "triton_kernel_call_lowering",
    "triton_kernel_call_raise_on_jvp", "triton_kernel_call_raise_on_vmap"]

pytestmark = pytest.mark.usefixtures("fresh_lowerings")


@triton.jit
def copy_twice_kernel(a_ptr, x_ptr, y_ptr):
    a = tl.load(a_ptr)
    tl.store(x_ptr, a)
    tl.store(y_ptr, a)


@triton.jit
def inc_after_a_scalar_kernel(n, x_ptr, out_ptr, BLOCK: tl.constexpr):
    """out = x + 1, in place where out aliases x."""
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n) + 1, mask=offsets < n)


def test_public_names_are_jax_triton_0_3_1s():
    assert jt.__all__ == JAX_TRITON_0_3_1_ALL
    assert jt.utils.__all__ == JAX_TRITON_0_3_1_UTILS_ALL
    assert all(hasattr(jt, name) for name in JAX_TRITON_0_3_1_ALL)
    assert callable(jt.get_compute_capability) and callable(jt.get_serialized_metadata)
    assert (jt.__version__, jt.__version_info__) == ("0.3.1", (0, 3, 1))


def test_triton_call_has_jax_triton_0_3_1s_signature():
    parameters = list(inspect.signature(jt.triton_call).parameters.values())
    assert [(p.name, p.kind) for p in (parameters[0], parameters[-1])] == [
        ("args", inspect.Parameter.VAR_POSITIONAL), ("metaparams", inspect.Parameter.VAR_KEYWORD)]
    assert [(p.name, p.default) for p in parameters[1:-1]] == TRITON_CALL_0_3_1_KEYWORDS
    assert jt.triton_call is jttl.triton_call and jt.triton_lib is jttl


@pytest.mark.parametrize("name", TRITON_LIB_PROVIDED)
def test_triton_lib_provides_the_names_it_can_honour(name):
    assert getattr(jttl, name) is not None


@pytest.mark.parametrize("name", TRITON_LIB_REFUSED)
def test_triton_lib_internals_raise_saying_what_to_use_instead(name):
    with pytest.raises(NotImplementedError,
                       match=rf"triton_lib\.{name} .*instead: .*jax_triton_rocm\."):
        exec(f"from jax_triton_rocm.compat.triton_lib_0_3 import {name}", {})


def test_utils_compute_as_jax_triton_0_3_1s():
    assert (jt.cdiv(1000, 256), jt.next_power_of_2(100), jt.strides_from_shape((2, 3, 4))) == (
        4, 128, (12, 4, 1))
    assert int(jt.cdiv(jnp.int32(1000), 256)) == 4  # Pallas's cdiv takes traced values too


def test_a_0_3_call_gives_the_right_numbers():
    x, y = jnp.arange(8.0), jnp.ones(8)
    out = jt.triton_call(x, y, x.size, kernel=kernels.add_kernel, out_shape=x, grid=1, BLOCK=8)
    assert (out == x + y).all()


def test_an_out_shape_list_gives_a_list_of_outputs():
    a = jnp.array([42])
    got = jt.triton_call(a, kernel=copy_twice_kernel, out_shape=[a, a], grid=(1,))
    assert isinstance(got, list) and [int(v[0]) for v in got] == [42, 42]


def test_an_alias_counts_array_arguments_only():
    x = jnp.arange(8.0)
    # 0.3's input 0 is x, the first array; 0.4's count would make it the scalar 8.
    out = jax.jit(lambda x: jt.triton_call(
        x.size, x, kernel=inc_after_a_scalar_kernel, out_shape=x, grid=1, BLOCK=8,
        input_output_aliases={0: 0}), donate_argnums=0)(x)
    assert (out == jnp.arange(8.0) + 1).all()


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_a_plain_call_is_one_jaxlib_call_whatever_the_route_setting(platform, monkeypatch):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "1")
    lowered = lower_for(lambda x, y: jt.triton_call(
        x, y, x.size, kernel=kernels.add_kernel, out_shape=x, grid=4, BLOCK=256), X, X,
        platform=platform)
    assert [c.target for c in jtr.kernel_calls(lowered)] == ["triton_kernel_call_ffi"]


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_warps_and_stages_default_to_jax_triton_0_3_1s_4_and_3(platform):
    compiled = capture_one(lambda x, y: jt.triton_call(
        x, y, x.size, kernel=kernels.add_kernel, out_shape=x, grid=4, BLOCK=256), X, X,
        platform=platform).kernels[0]
    assert (compiled.num_warps, compiled.metadata["num_stages"]) == (4, 3)


def test_serialized_metadata_is_read_back_by_get_serialized_metadata():
    lowered = capture_one(lambda x, y: jt.triton_call(
        x, y, x.size, kernel=kernels.add_kernel, out_shape=x, grid=4, BLOCK=256,
        serialized_metadata=b"from 0.3"), X, X, platform="cuda")
    assert jt.get_serialized_metadata(lowered.opaque) == b"from 0.3"


def test_serialized_metadata_is_read_back_without_a_jaxlib_gpu_plugin(monkeypatch):
    lowered = capture_one(lambda x, y: jt.triton_call(
        x, y, x.size, kernel=kernels.add_kernel, out_shape=x, grid=4, BLOCK=256,
        serialized_metadata=b"from 0.3"), X, X, platform="cuda")
    monkeypatch.setattr(_vendors, "plugin_triton_module", lambda platform: None)
    assert jt.get_serialized_metadata(lowered.opaque) == b"from 0.3"


def test_an_unknown_custom_call_target_is_refused_naming_the_two():
    x = jnp.ones(8)
    with pytest.raises(ValueError, match=r"custom_call_target_name='my_target' is none of "
                                         r"jaxlib's Triton targets \(triton_kernel_call, "
                                         r"triton_kernel_call_ffi\).*JAX_TRITON_ROCM_CALL_TARGET"):
        jt.triton_call(x, x, 8, kernel=kernels.add_kernel, out_shape=x, grid=1, BLOCK=8,
                       custom_call_target_name="my_target")


def test_the_output_passed_positionally_and_in_out_shape_is_refused():
    x, y, out = jnp.ones(8), jnp.ones(8), jnp.zeros(8)
    # 0.3.1 ran this with one buffer more than the kernel's pointers and never wrote the output.
    with pytest.raises(TypeError, match="Most likely the output is passed as an input too"):
        jt.triton_call(x, y, 8, out, kernel=kernels.add_kernel, out_shape=out, grid=1, BLOCK=8)


def test_a_package_keyword_that_names_no_parameter_points_to_the_package():
    x = jnp.ones(8)
    with pytest.raises(TypeError, match=r"has_side_effect=True names no parameter.*"
                                        r"jax_triton_rocm\.compat\.triton_lib_0_3\.triton_call"):
        jt.triton_call(x, x, 8, kernel=kernels.add_kernel, out_shape=x, grid=1, BLOCK=8,
                       has_side_effect=True)


def test_get_compute_capability_without_a_gpu_says_so():
    with pytest.raises(RuntimeError, match=r"get_compute_capability\(0\) .*JAX has no such GPU "
                                           r"here .*compute_capability="):
        jt.get_compute_capability(0)
    assert jtr.__version__ != jt.__version__
