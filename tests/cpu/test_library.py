"""`triton_call_lowering`: library primitives lowered for cuda and rocm (decoded), run on the CPU
through Triton's interpreter, and every mapping error."""

import re

import numpy as np
import pytest

import jax
import jax.numpy as jnp
import triton
import triton.language as tl
from jax.interpreters import mlir

import jax_triton_rocm as jtr
from tests.support import library_kernels as lk
from tests.support.lowering_utils import captured_lowerings, lower_for, spec

CPU = jax.devices("cpu")[0]
GPU_PLATFORMS = ("cuda", "rocm")
F32 = jnp.float32


def _cpu(x):
    return jax.device_put(x, CPU)


def _launches(fn, *args, platform):
    (call,) = jtr.kernel_calls(lower_for(fn, *args, platform=platform))
    return call.summary()["launches"]


@pytest.mark.parametrize("platform", GPU_PLATFORMS)
def test_autotuned_amax_lowers_every_config_with_pointers_only(platform):
    launches = _launches(lk.amax, spec((3000,), F32), platform=platform)
    assert [(l["grid"], l["num_warps"], l["parameters"]) for l in launches] == [
        ((12, 1, 1), 2, ["array", "array"]),  # n is a constexpr: no scalar parameter
        ((3, 1, 1), 8, ["array", "array"]),   # each config's own warps win; meta has BLOCK
    ]
    assert all(l["config"].startswith("BLOCK: ") for l in launches)
    (call,) = jtr.kernel_calls(lower_for(lk.amax, spec((3000,), F32), platform=platform))
    for config in call.message.autotuned_kernel_call.configs:  # zeroed_outputs=(0,): 4 bytes
        assert [p.array.bytes_to_zero for p in config.kernel_call.parameters] == [0, 4]


@pytest.mark.parametrize("platform", GPU_PLATFORMS)
def test_in_place_kernel_gets_one_pointer_and_aliases_its_result(platform):
    lowered = lower_for(lk.scale_in_place, spec((3000,), F32), platform=platform)
    (call,) = jtr.kernel_calls(lowered)
    (launch,) = call.summary()["launches"]
    assert launch["parameters"] == ["array"]
    assert launch["grid"] == (6, 1, 1) and launch["num_warps"] == 4  # int grid, Triton's warps
    assert re.search(r"output_operand_aliases = \[#stablehlo.output_operand_alias<"
                     r"output_tuple_indices = \[\], operand_index = 0", lowered.as_text())


@pytest.mark.parametrize("platform", GPU_PLATFORMS)
def test_multi_output_kernel_gets_inputs_then_outputs(platform):
    (launch,) = _launches(lk.sum_diff, spec((1000,), F32), spec((1000,), F32), platform=platform)
    assert launch["parameters"] == ["array"] * 4
    assert launch["grid"] == (4, 1, 1)


@pytest.mark.parametrize("platform", GPU_PLATFORMS)
def test_gluon_kernel_lowers_through_the_helper(platform):
    with captured_lowerings() as captured:
        lowered = lower_for(lk.gluon_copy, spec((3000,), F32), platform=platform)
    (call,) = jtr.kernel_calls(lowered)
    (launch,) = call.summary()["launches"]
    assert launch["kernel"] == "copy_kernel" and launch["parameters"] == ["array", "array"]
    assert launch["grid"] == (3, 1, 1) and captured[0].kernels[0].binary


def test_compile_options_reach_the_amd_compiler():
    @triton.jit
    def copy(x_ptr, y_ptr, BLOCK: tl.constexpr):
        tl.store(y_ptr + tl.arange(0, BLOCK), tl.load(x_ptr + tl.arange(0, BLOCK)))

    def lowering(ctx, x):
        return jtr.triton_call_lowering(ctx, copy, x, grid=1, constexprs={"BLOCK": 64},
                                        waves_per_eu=2, num_warps=2, name="copy_call")

    prim = lk.define("test_copy_waves", lambda x: [x], lowering)
    with captured_lowerings() as captured:
        lowered = lower_for(lambda x: prim.bind(x)[0], spec((64,), F32), platform="rocm")
    (call,) = jtr.kernel_calls(lowered)
    (launch,) = call.summary()["launches"]
    assert call.summary()["name"] == "copy_call" and launch["num_warps"] == 2
    with jtr.target_arch(rocm="gfx942"), captured_lowerings() as plain:
        jax.jit(lambda x: lk.define(
            "test_copy_plain", lambda x: [x],
            lambda ctx, x: jtr.triton_call_lowering(ctx, copy, x, grid=1,
                                                    constexprs={"BLOCK": 64}, num_warps=2)
        ).bind(x)[0]).trace(spec((64,), F32)).lower(lowering_platforms=("rocm",))
    # waves_per_eu is part of the compile: the binaries differ.
    binary, other = captured[0].kernels[0].binary, plain[0].kernels[0].binary
    assert binary and other and binary != other


def test_amax_runs_on_the_cpu():
    x = _cpu(jax.random.normal(jax.random.key(0), (3000,), F32))
    np.testing.assert_allclose(jax.jit(lk.amax)(x), lk.amax_reference(x))


def test_in_place_kernel_runs_on_the_cpu_with_donation():
    x = _cpu(jnp.linspace(-1, 1, 1500, dtype=F32))
    expected = 3.0 * np.asarray(x)
    out = jax.jit(lk.scale_in_place, donate_argnums=0)(x)
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_multi_output_kernel_runs_on_the_cpu():
    x = _cpu(jax.random.normal(jax.random.key(1), (1000,), F32))
    y = _cpu(jax.random.normal(jax.random.key(2), (1000,), F32))
    total, diff = jax.jit(lk.sum_diff)(x, y)
    np.testing.assert_allclose(total, x + y, rtol=1e-6)
    np.testing.assert_allclose(diff, x - y, rtol=1e-6)


def test_two_calls_in_one_rule_run_on_the_cpu():
    x = _cpu(jnp.linspace(-1, 1, 1000, dtype=F32))
    np.testing.assert_allclose(jax.jit(lk.six_times)(x), 6 * np.asarray(x), rtol=1e-6)


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_two_calls_in_one_rule_lower_for_a_gpu(platform):
    lowered = lower_for(lk.six_times, spec((1000,), F32), platform=platform)
    assert [call.summary()["launches"][0]["kernel"] for call in jtr.kernel_calls(lowered)] == [
        "scaled_copy_kernel"] * 2


def test_custom_partitioning_runs_the_inner_primitive_on_the_cpu():
    x = _cpu(jax.random.normal(jax.random.key(3), (8, 33), F32))
    mesh = jax.make_mesh((1,), ("rows",), devices=[CPU])
    x = jax.device_put(x, jax.NamedSharding(mesh, jax.P("rows", None)))
    np.testing.assert_allclose(jax.jit(lk.row_amax_sharded)(x), lk.row_amax_reference(x))


def test_shard_map_runs_the_primitive_per_shard_on_the_cpu():
    x = _cpu(jax.random.normal(jax.random.key(4), (8, 33), F32))
    mesh = jax.make_mesh((1,), ("rows",), devices=[CPU])
    x = jax.device_put(x, jax.NamedSharding(mesh, jax.P("rows", None)))
    f = jax.jit(jax.shard_map(lambda x: lk.row_amax_p.bind(x)[0], mesh=mesh,
                              in_specs=jax.P("rows", None), out_specs=jax.P("rows")))
    np.testing.assert_allclose(f(x), lk.row_amax_reference(x))


# Mapping errors. Each primitive's rule calls the helper with what the test gives it.

@triton.jit
def two_pointer_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


_counter = iter(range(10**6))


def _lower_with(abstract_eval, n_operands=1, platform="cuda", **helper_kwargs):
    kernel = helper_kwargs.pop("kernel", two_pointer_kernel)
    args_override = helper_kwargs.pop("array_args", None)

    def lowering(ctx, *args):
        return jtr.triton_call_lowering(ctx, kernel, *(args if args_override is None else args_override), **helper_kwargs)

    prim = lk.define(f"test_mapping_{next(_counter)}", abstract_eval, lowering)
    specs = [spec((16,), F32)] * n_operands
    return lower_for(lambda *xs: prim.bind(*xs), *specs, platform=platform)


def _same(*xs):
    return [xs[0]]


def test_more_pointers_than_buffers_lists_parameters_constexprs_and_operands():
    # n is not a constexpr, so it counts as a third pointer for two buffers.
    with pytest.raises(TypeError) as err:
        _lower_with(_same, grid=1, constexprs={"BLOCK": 16})
    message = str(err.value)
    assert "3 pointer parameters" in message and "only 2 operands and results" in message
    assert "(x_ptr, out_ptr, n, BLOCK)" in message and "['BLOCK']" in message
    assert "in0=float32[16]" in message and "out0=float32[16]" in message


def test_an_operand_without_a_pointer_is_an_error():
    with pytest.raises(TypeError, match=r"operand 2 and later get no parameter \(2 pointer "
                                        r"parameters for 3 operands\).*in2=float32\[16\]"):
        _lower_with(_same, n_operands=3, grid=1, constexprs={"n": 16, "BLOCK": 16})


def test_a_result_without_pointer_must_be_aliased():
    @triton.jit
    def one_pointer(x_ptr, BLOCK: tl.constexpr):
        tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)

    with pytest.raises(TypeError, match=r"result\(s\) \[0\] get no parameter and are not "
                                        r"aliased.*input_output_aliases: \{\}"):
        _lower_with(_same, kernel=one_pointer, grid=1, constexprs={"BLOCK": 16})


def test_only_trailing_results_may_go_without_a_pointer():
    # Results 0 and 1, result 0 aliased: the kernel's one output pointer is result 0's, so
    # result 1 (not aliased) has none.
    with pytest.raises(TypeError, match=r"result\(s\) \[1\] get no parameter"):
        _lower_with(lambda x: [x, x], grid=1, constexprs={"n": 16, "BLOCK": 16},
                    input_output_aliases={0: 0})


def test_unknown_constexpr_names_the_kernel_parameters():
    with pytest.raises(TypeError, match=r"constexprs names 'm', which kernel two_pointer_kernel "
                                        r"has no parameter for; its parameters are \(x_ptr, "
                                        r"out_ptr, n, BLOCK\)"):
        _lower_with(_same, grid=1, constexprs={"n": 16, "BLOCK": 16, "m": 1})


def test_missing_constexpr_says_to_add_it():
    with pytest.raises(TypeError, match=r"needs tl.constexpr 'BLOCK': add 'BLOCK': \.\.\. to "
                                        r"constexprs"):
        _lower_with(_same, grid=1, constexprs={"n": 16})


def test_constexpr_that_is_an_operand_is_an_error():
    def lowering(ctx, x):
        return jtr.triton_call_lowering(ctx, two_pointer_kernel, x, grid=1,
                                        constexprs={"n": x, "BLOCK": 16})

    prim = lk.define(f"test_mapping_{next(_counter)}", _same, lowering)
    with pytest.raises(TypeError, match=r"constexprs\['n'\] is a JAX value"):
        lower_for(lambda x: prim.bind(x), spec((16,), F32), platform="cuda")


def test_wrong_number_of_array_args():
    with pytest.raises(TypeError, match="got 0 array_args, but the primitive has 1 operands"):
        _lower_with(_same, grid=1, constexprs={"n": 16, "BLOCK": 16}, array_args=())


def test_unknown_keyword_points_to_constexprs():
    with pytest.raises(TypeError, match=r"got BLOCK=, a parameter of kernel \w+: kernel "
                                        r"parameters go in constexprs, e.g. "
                                        r"constexprs=\{'BLOCK': 16\}"):
        _lower_with(_same, grid=1, constexprs={"n": 16}, BLOCK=16)


@pytest.mark.parametrize("aliases,pattern", [
    ({1: 0}, r"input index 1 is not one of the primitive's 1 operands"),
    ({0: 1}, r"output index 1 is not one of the primitive's 1 results"),
])
def test_alias_indices_out_of_range(aliases, pattern):
    with pytest.raises(ValueError, match=pattern):
        _lower_with(_same, grid=1, constexprs={"n": 16, "BLOCK": 16},
                    input_output_aliases=aliases)


def test_alias_of_another_shape_is_an_error():
    with pytest.raises(ValueError, match=r"operand 0 \(float32\[16\]\) and result 0 "
                                         r"\(float32\[8\]\) must have the same shape and dtype"):
        _lower_with(lambda x: [jax.core.ShapedArray((8,), F32)], grid=1,
                    constexprs={"n": 16, "BLOCK": 16}, input_output_aliases={0: 0})


@pytest.mark.parametrize("grid,error", [((1, 1, 1, 1), ValueError), ("x", TypeError)])
def test_bad_grid_names_it(grid, error):
    with pytest.raises(error, match="grid="):
        _lower_with(_same, grid=grid, constexprs={"n": 16, "BLOCK": 16})


def test_num_warps_must_be_a_power_of_two():
    with pytest.raises(ValueError, match=r"num_warps=3 must be a power of two"):
        _lower_with(_same, grid=1, constexprs={"n": 16, "BLOCK": 16}, num_warps=3)


def test_a_rule_for_every_platform_at_once_is_an_error():
    def lowering(ctx, x):
        return jtr.triton_call_lowering(ctx, two_pointer_kernel, x, grid=1,
                                        constexprs={"n": 16, "BLOCK": 16})

    prim = lk.Primitive("test_all_platforms")
    prim.multiple_results = True
    prim.def_abstract_eval(_same)
    mlir.register_lowering(prim, lowering)  # no platform: one rule sees both platforms
    with jtr.target_arch(cuda="sm_90", rocm="gfx942"):
        traced = jax.jit(lambda x: prim.bind(x)).trace(spec((16,), F32))
        with pytest.raises(ValueError, match=r"one platform at a time.*\('cuda', 'rocm'\).*"
                                             r"Register the rule per platform"):
            traced.lower(lowering_platforms=("cuda", "rocm"))


def test_rules_per_platform_lower_a_multi_platform_module():
    lowered = lower_for(lk.sum_diff, spec((64,), F32), spec((64,), F32), platform="cuda")
    with jtr.target_arch(cuda="sm_90", rocm="gfx942"):
        both = jax.jit(lk.sum_diff).trace(spec((64,), F32), spec((64,), F32)).lower(
            lowering_platforms=("cuda", "rocm"))
    calls = jtr.kernel_calls(both)
    assert len(calls) == 2 and len(jtr.kernel_calls(lowered)) == 1
    assert {c.message.kernel_call.kernel.compute_capability for c in calls} == {90, 94}


def test_kernel_whose_only_parameter_is_the_in_place_pointer_runs_on_the_cpu():
    @triton.jit
    def add_one(x_ptr):
        offsets = tl.arange(0, 16)
        tl.store(x_ptr + offsets, tl.load(x_ptr + offsets) + 1.0)

    prim = lk.define("test_add_one", _same, lambda ctx, x: jtr.triton_call_lowering(
        ctx, add_one, x, grid=1, input_output_aliases={0: 0}))
    x = _cpu(jnp.arange(16, dtype=F32))
    np.testing.assert_allclose(jax.jit(lambda x: prim.bind(x)[0])(x), np.arange(16) + 1.0)
    (launch,) = _launches(lambda x: prim.bind(x)[0], spec((16,), F32), platform="cuda")
    assert launch["parameters"] == ["array"]


def test_vmap_of_a_library_primitive_loops_over_the_examples():
    x = _cpu(jax.random.normal(jax.random.key(7), (3, 2000), F32))
    y = _cpu(jax.random.normal(jax.random.key(8), (2000,), F32))
    total, diff = jax.jit(jax.vmap(lk.sum_diff, in_axes=(0, None)))(x, y)
    for i in range(3):
        np.testing.assert_allclose(total[i], x[i] + y, rtol=1e-6)
        np.testing.assert_allclose(diff[i], x[i] - y, rtol=1e-6)


def test_vmap_of_an_in_place_library_primitive_updates_each_example():
    x = _cpu(jax.random.normal(jax.random.key(9), (4, 3, 1000), F32))
    out = jax.jit(jax.vmap(jax.vmap(lambda v: lk.scale_in_place(v, alpha=2.0))))(x)
    np.testing.assert_allclose(out, 2.0 * x, rtol=1e-6)


def test_vmap_of_a_library_primitive_lowers_to_one_call_in_a_loop():
    lowered = lower_for(jax.vmap(lambda v: lk.scale_in_place(v, alpha=2.0)),
                        spec((5, 1000), F32), platform="cuda")
    assert "stablehlo.while" in lowered.as_text()
    (call,) = jtr.kernel_calls(lowered)
    assert call.summary()["launches"][0]["grid"] == (2, 1, 1)
