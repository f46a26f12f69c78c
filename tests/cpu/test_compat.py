"""`jax_triton_rocm.compat`, the drop-in for jax-triton 0.4.1's users: its public names are
jax-triton 0.4.1's, a plain call lowers as 0.4.1 lowers it (one `triton_kernel_call_ffi` that
produces the results and carries the caller's xla_metadata), whatever route the package would
otherwise take, and 0.4-style and 0.3-style calls give the right numbers in Triton's interpreter.

Lowered for CUDA (sm_90) and ROCm (gfx942) on a machine without a GPU.
"""

import warnings

import jax
import jax.numpy as jnp
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
import jax_triton_rocm.compat as jt
from jax_triton_rocm.base import _env
from jax_triton_rocm.compat import triton_lib as jttl
from jax_triton_rocm.compat import version as jt_version
from tests.support import autotune_utils, kernels
from tests.support import surface_kernels as sk
from tests.support.surface_kernels import two_calls
from tests.support.lowering_utils import capture_one, lower_for, spec

PLATFORMS = ["cuda", "rocm"]
X = spec((1000,), jnp.float32)

# The specification: jax-triton 0.4.1's `jax_triton.__all__`, in its order.
JAX_TRITON_0_4_1_ALL = ["triton_call", "strides_from_shape", "CUSTOM_CALL_TARGET_NAME",
                        "TensorDescriptor", "__version__", "__version_info__"]
# The names jax-triton 0.4.1's `triton_lib.py` defines (not imports) without a leading `_`:
# those this module provides, and those of 0.4.1's own compiler and lowering, which it refuses.
TRITON_LIB_PROVIDED = [
    "Autotuner", "CostEstimate", "CUSTOM_CALL_TARGET_NAME", "Grid", "Heuristics", "JITFunction",
    "ShapeDtype", "StaticScalar", "TensorDescriptor", "ValueOrFn", "normalize_grid",
    "strict_zip", "strides_from_shape", "triton_call", "triton_kernel_call_p"]
TRITON_LIB_REFUSED = [
    "CompilationResult", "KernelSpecialization", "TensorDescMeta", "TritonFunction",
    "aval_size_bytes", "compile_ttir_inplace", "compile_ttir_to_hsaco_inplace",
    "compile_ttir_to_ptx_inplace", "get_type_id", "make_cuda_target", "make_hip_target",
    "to_python_type", "triton_kernel_call_abstract_eval", "triton_kernel_call_lowering",
    "triton_kernel_call_raise_on_jvp", "triton_kernel_call_raise_on_vmap"]


# The route is chosen when a call is lowered; JAX reuses lowerings across tests otherwise.
pytestmark = pytest.mark.usefixtures("fresh_lowerings")


@pytest.fixture
def xla_route_by_default(monkeypatch):
    """Every call that does not choose its route asks for XLA's, so that a compat call that did
    not force jaxlib's would show as `__gpu$xla.gpu.triton`."""
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "1")


@triton.jit
def add_to_operands_kernel(x_ptr, operands, n, out_ptr, BLOCK: tl.constexpr):
    """x + y with y's parameter named like jax_triton_rocm.triton_call's `operands=`."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + tl.load(operands + offsets, mask=mask), mask=mask)


def custom_calls(lowered) -> list[dict]:
    """Each custom call of the module: its target, operand count and frontend attributes."""
    from jax._src.lib.mlir import ir

    module = lowered.compiler_ir("stablehlo")
    found = []

    def keep(op):
        if op.name == "stablehlo.custom_call":
            attributes = op.attributes
            found.append({
                "target": ir.StringAttr(attributes["call_target_name"]).value,
                "operands": len(op.operands),
                "frontend_attributes": (str(attributes["mhlo.frontend_attributes"])
                                        if "mhlo.frontend_attributes" in attributes else "")})
        return ir.WalkResult.ADVANCE

    with module.context:
        module.operation.walk(keep, ir.WalkOrder.PRE_ORDER)
    return found


def test_public_names_are_jax_triton_0_4_1s():
    assert jt.__all__ == JAX_TRITON_0_4_1_ALL
    assert all(hasattr(jt, name) for name in JAX_TRITON_0_4_1_ALL)
    assert (jt.triton_lib, jt.version) == (jttl, jt_version)


def test_version_is_the_jax_triton_version_served():
    assert (jt.__version__, jt.__version_info__) == ("0.4.1", (0, 4, 1))
    assert jtr.__version__ != jt.__version__  # the package keeps its own


def test_shared_names_are_the_packages_own_objects():
    assert jt.TensorDescriptor is jtr.TensorDescriptor
    assert jt.strides_from_shape is jtr.strides_from_shape
    assert jt.CUSTOM_CALL_TARGET_NAME == "triton_kernel_call_ffi"
    assert jttl.triton_kernel_call_p is jtr.triton_kernel_p


@pytest.mark.parametrize("name", TRITON_LIB_PROVIDED)
def test_triton_lib_provides_the_names_it_can_honour(name):
    assert getattr(jttl, name) is not None


@pytest.mark.parametrize("name", TRITON_LIB_REFUSED)
def test_triton_lib_internals_raise_saying_what_to_use_instead(name):
    with pytest.raises(NotImplementedError,
                       match=rf"triton_lib\.{name} .*instead: .*jax_triton_rocm\."):
        exec(f"from jax_triton_rocm.compat.triton_lib import {name}", {})


def test_a_jax_triton_0_3_name_is_absent_and_says_what_replaces_it():
    assert not hasattr(jt, "cdiv")
    with pytest.raises(AttributeError, match="triton.cdiv"):
        jt.cdiv


def test_jaxprs_find_calls_by_triton_kernel_call_p():
    x = jnp.arange(8.0)
    jaxpr = jax.make_jaxpr(lambda x: jt.triton_call(x, x, x.size, kernel=kernels.add_kernel,
                                                    out_type=x, grid=1, BLOCK=8))(x)
    assert [e.primitive for e in jaxpr.eqns] == [jttl.triton_kernel_call_p]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_each_plain_call_is_one_ffi_call_that_makes_its_results(platform, xla_route_by_default):
    lowered = lower_for(two_calls, X, X, platform=platform)
    assert lowered.as_text().count("@triton_kernel_call_ffi") == 2
    # Nothing else: no zero-filled operand, no copy, no XLA Triton call; each call's operands
    # are its inputs only, its result the output.
    assert [(c["target"], c["operands"]) for c in custom_calls(lowered)] == [
        ("triton_kernel_call_ffi", 2), ("triton_kernel_call_ffi", 2)]


@pytest.mark.parametrize("platform", PLATFORMS)
def test_xla_metadata_lands_on_each_kernels_custom_call(platform, xla_route_by_default):
    calls = custom_calls(lower_for(two_calls, X, X, platform=platform))
    assert [c["frontend_attributes"] for c in calls] == [
        '{kernel_tag = "first"}', '{kernel_tag = "second"}']


def test_a_zeroed_output_is_zeroed_by_the_call_itself(xla_route_by_default):
    def total(x):
        return jt.triton_call(x, x.size, kernel=kernels.atomic_sum_kernel, grid=(1,),
                              out_type=jax.ShapeDtypeStruct((1,), jnp.float32), BLOCK=1024,
                              zeroed_outputs=(0,))

    with pytest.warns(DeprecationWarning, match="zeroed_outputs is deprecated"):
        calls = custom_calls(lower_for(total, X, platform="cuda"))
    assert [(c["target"], c["operands"]) for c in calls] == [("triton_kernel_call_ffi", 1)]


def test_an_autotuned_call_keeps_the_packages_target_for_autotuned_calls():
    def tuned(x, y, **route):
        call = jt.triton_call if not route else jtr.triton_call
        return call(x, y, x.size, kernel=autotune_utils.tuned_add_kernel, out_type=x,
                    grid=lambda meta: (triton.cdiv(x.size, meta["BLOCK"]),), **route)

    package_target = [c.target for c in jtr.kernel_calls(
        lower_for(lambda x, y: tuned(x, y, xla_native=False), X, X, platform="cuda"))]
    compat_target = [c.target for c in jtr.kernel_calls(lower_for(tuned, X, X, platform="cuda"))]
    assert compat_target == package_target


@pytest.mark.parametrize("platform", PLATFORMS)
def test_warps_and_stages_default_to_jax_tritons_4_and_3(platform):
    compiled = capture_one(lambda x, y: jt.triton_call(
        x, y, x.size, kernel=kernels.add_kernel, out_type=x, grid=4, BLOCK=256), X, X,
        platform=platform).kernels[0]
    assert (compiled.num_warps, compiled.metadata["num_stages"]) == (4, 3)


def test_a_setting_in_backend_options_is_not_overridden_by_the_default():
    compiled = capture_one(lambda x, y: jt.triton_call(
        x, y, x.size, kernel=kernels.add_kernel, out_type=x, grid=4, BLOCK=256,
        backend_options={"num_stages": 1}), X, X, platform="cuda").kernels[0]
    assert compiled.metadata["num_stages"] == 1


def test_a_0_4_style_call_gives_the_right_numbers():
    x, y = jnp.arange(8.0), jnp.ones(8)
    out = jt.triton_call(x, y_ptr=y, n=x.size, kernel=kernels.add_kernel,
                         out_type=jax.typeof(x), grid=1, BLOCK=8)
    assert (out == x + y).all()
    assert (two_calls(x, y) == x + 3 * y).all()


def test_a_0_4_style_ref_is_updated_in_place():
    x = jnp.arange(8.0)
    ref = jax.new_ref(x)
    assert jt.triton_call(x.size, ref, kernel=sk.inc_kernel, out_type=(), grid=1, BLOCK=8) == ()
    assert (ref[...] == x + 1).all()


def test_a_0_3_style_call_with_positional_outputs_warns_and_gives_the_right_numbers():
    x, y = jnp.arange(8.0), jnp.ones(8)
    with pytest.warns(DeprecationWarning, match="out_shape= is deprecated"):
        out = jt.triton_call(x, y, x.size, kernel=kernels.add_kernel, out_shape=x, grid=1,
                             BLOCK=8)
    assert (out == x + y).all()


def test_a_0_3_style_aliased_output_with_its_own_pointer_gives_the_right_numbers():
    x, y = jnp.arange(8.0), jnp.ones(8)
    with pytest.warns(DeprecationWarning) as caught:
        out = jax.jit(lambda x, y: jt.triton_call(
            x, y, x.size, kernel=kernels.add_inplace_kernel, out_shape=x, grid=1, BLOCK=8,
            input_output_aliases={0: 0}), donate_argnums=0)(x, y)
    assert (out == jnp.arange(8.0) + 1).all()
    assert sorted(str(w.message).split(" ")[0] for w in caught) == [
        "input_output_aliases", "out_shape="]


def test_a_0_4_style_alias_counts_scalars_and_gives_the_output_no_pointer():
    x = jnp.arange(8.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        out = jt.triton_call(x.size, x, kernel=sk.inc_kernel, out_type=x, grid=1, BLOCK=8,
                             input_output_aliases={1: 0})
    assert (out == x + 1).all()


def test_no_outputs_given_is_jax_tritons_type_error():
    with pytest.raises(TypeError, match=r"give out_type= .*out_type=\(\) for none"):
        jt.triton_call(8, jnp.ones(8), kernel=sk.inc_kernel, grid=1, BLOCK=8)


def test_out_type_and_out_shape_together_are_refused():
    x = jnp.ones(8)
    with pytest.raises(TypeError, match="out_type= or the deprecated out_shape=, not both"):
        jt.triton_call(x, x, 8, kernel=kernels.add_kernel, out_type=x, out_shape=x, grid=1,
                       BLOCK=8)


def test_a_kernel_parameter_named_like_a_package_keyword_is_filled_by_keyword():
    x, y = jnp.arange(8.0), jnp.ones(8)
    out = jt.triton_call(x, operands=y, n=x.size, kernel=add_to_operands_kernel, out_type=x,
                         grid=1, BLOCK=8)
    assert (out == x + y).all()


def test_a_package_keyword_that_names_no_parameter_points_to_the_package():
    x = jnp.ones(8)
    with pytest.raises(TypeError, match=r"xla_native=True names no parameter.*call "
                                        r"jax_triton_rocm\.triton_call"):
        jt.triton_call(x, x, 8, kernel=kernels.add_kernel, out_type=x, grid=1, BLOCK=8,
                       xla_native=True)


@triton.jit
def scaled_sum_kernel(a_ptr, b_ptr, out_ptr, scale, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets) * scale + tl.load(b_ptr + offsets))


def test_an_output_also_passed_as_the_last_argument_is_refused_naming_it():
    a, b, out = (jnp.full((16,), v, jnp.float32) for v in (1.0, 2.0, 0.0))
    # mlstm's 0.3-era call: the output's array positionally and in out_shape, a runtime
    # scalar by keyword after it; 0.3.1 ran it with one buffer more than the kernel's pointers
    with pytest.raises(TypeError, match=r"Most likely the output is passed as an input too: "
                                        r"argument 2 \(the shape and dtype of output 0\)\..*"
                                        r"input_output_aliases=\{2: 0\}"):
        jax.jit(lambda a, b, out: jt.triton_call(
            a, b, out, kernel=scaled_sum_kernel, out_type=out, grid=(1,), scale=2.0,
            N=16))(a, b, out)
    got = jax.jit(lambda a, b: jt.triton_call(
        a, b, kernel=scaled_sum_kernel, out_type=a, grid=(1,), scale=2.0, N=16))(a, b)
    assert (got == 4.0).all()


@triton.jit
def maybe_offset_kernel(a_ptr, offset_ptr, out_ptr, scale, N: tl.constexpr):
    offsets = tl.arange(0, N)
    x = tl.load(a_ptr + offsets) * scale
    if offset_ptr is not None:
        x += tl.load(offset_ptr + offsets)
    tl.store(out_ptr + offsets, x)


def test_an_output_passed_as_an_argument_after_a_none_names_its_alias_index():
    a, out = jnp.ones(16, jnp.float32), jnp.zeros(16, jnp.float32)
    # mlstm's backward: an optional state passed as None before the output's array
    with pytest.raises(TypeError, match=r"argument 2 \(the shape and dtype of output 0; input "
                                        r"index 1 in input_output_aliases\).*"
                                        r"input_output_aliases=\{1: 0\}"):
        jax.jit(lambda a, out: jt.triton_call(
            a, None, out, kernel=maybe_offset_kernel, out_type=out, grid=(1,), scale=2.0,
            N=16))(a, out)


def test_a_store_into_a_plain_array_with_no_outputs_is_refused_naming_both_fixes():
    x = jnp.arange(8.0)
    with pytest.raises(TypeError, match=(
            r"Kernel inc_kernel stores to parameter 'x_ptr' \(surface_kernels.py:\d+: "
            r"tl.store\(x_ptr .*\), which argument 1 \(float32\[8\]\), a plain array, fills, and "
            r"the call has no outputs: .*read-only .*Pass the array as a Ref.*jax.new_ref\(x\), "
            r"triton_call\(ref, \.\.\., out_type=\(\)\).*out_type=x, "
            r"input_output_aliases=\{1: 0\}")):
        jt.triton_call(x.size, x, kernel=sk.inc_kernel, out_type=(), grid=1, BLOCK=8,
                       has_side_effect=True)


def test_a_truthy_debug_that_is_no_bool_is_refused():
    x = jnp.ones(8)
    with pytest.raises(TypeError, match=r"debug='no' must be a bool"):
        jt.triton_call(x, x, 8, kernel=kernels.add_kernel, out_type=x, grid=1, BLOCK=8,
                       debug="no")


@triton.jit
def named_scale_kernel(x_ptr, out_ptr, name: tl.constexpr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * name)


@triton.jit
def shaped_scale_kernel(x_ptr, out_ptr, out_shape: tl.constexpr, N: tl.constexpr):
    offsets = tl.arange(0, N)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * out_shape)


@pytest.mark.parametrize("kernel,keywords,name", [
    (named_scale_kernel, {}, "name"),
    (named_scale_kernel, {"name": 2}, "name"),
    (shaped_scale_kernel, {"out_shape": 2}, "out_shape"),
], ids=["name, not given", "name=2, the call's name", "out_shape=2 with out_type="])
def test_a_parameter_named_like_one_of_0_4_1s_arguments_points_to_the_package(kernel,
                                                                                keywords, name):
    x = jnp.arange(8.0)
    with pytest.raises(TypeError, match=(
            rf"kernel {kernel.__name__}'s parameter '{name}' is named like an argument of "
            rf"jax-triton 0.4.1's triton_call \({name}=\.\.\..*nothing in this call can fill "
            rf"the parameter\. Call jax_triton_rocm\.triton_call instead, .*constexprs="
            rf"\{{'{name}': \.\.\.\}}\.$")):
        jt.triton_call(x, kernel=kernel, out_type=x, grid=1, N=8, **keywords)
    out = jtr.triton_call(x, kernel=kernel, out_type=x, grid=1, N=8, constexprs={name: 2})
    assert (out == 2 * x).all()
