"""Triton's kernels as their authors write them (issue 27), on the CPU: config pre_hooks that set
descriptor block shapes, keyword scalars in prune functions and perf models as Triton's launcher
passes them, parameters named like triton_call's own arguments (`constexprs=`, `operands=`).

Kernels run in Triton's interpreter, or are lowered for sm_90 and gfx942 under `target_arch`;
the same kernels run on a GPU in test_gpu_tma.py and test_gpu_idioms.py.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env
from jax_triton_rocm.routes import _arch, _choices
from tests.support import idiom_kernels as ik
from tests.support import kernels
from tests.support.lowering_utils import capture_one, lower_for, spec, tma_block_shapes

CPU = jax.devices("cpu")[0]


def on_cpu(*arrays):
    return [jax.device_put(a, CPU) for a in arrays]


def _matrices(m=64, k=48, n=96, dtype=jnp.float16):
    a = jax.random.normal(jax.random.key(0), (m, k)).astype(dtype)
    b = jax.random.normal(jax.random.key(1), (k, n)).astype(dtype)
    return a, b


def _f32_matmul(a, b):
    return np.asarray(a, np.float32) @ np.asarray(b, np.float32)


def _tuned(kernel, configs, **autotune):
    return triton.autotune(configs=configs, key=[], **autotune)(kernel.fn)


# Config pre_hooks that set descriptor block shapes.

def _tma_blocks(lowered):
    """Per config of a lowered call: the block shape of each of its TMA descriptors."""
    calls = ([c.kernel_call for c in lowered.message.autotuned_kernel_call.configs]
             if lowered.message.WhichOneof("value") == "autotuned_kernel_call"
             else [lowered.message.kernel_call])
    return [tma_block_shapes(call) for call in calls]


def _loaded_tiles(kernel):
    """The fp16 tiles a kernel compiled for gfx942 loads (its descriptors' block shapes)."""
    return set(re.findall(r"tensor<(\d+)x(\d+)xf16>", kernel.ttir))


_features = _vendors.plugin_features("cuda") or _vendors.assumed_features("cuda")
needs_tma = pytest.mark.skipif(
    not _features.tma_descriptors, reason=f"the jaxlib CUDA plugin here "
    f"({_features.detected_from}) encodes no TMA descriptor; the gfx942 tests check the blocks")


@needs_tma
def test_each_config_launches_with_the_block_shapes_its_pre_hook_sets():
    a, b = _matrices()
    [call] = jtr.kernel_calls(lower_for(ik.desc_matmul, a, b, platform="cuda"))
    assert _tma_blocks(call) == [[(m, k), (k, n)] for m, n, k in ik.MATMUL_TILES]


def test_pre_hook_block_shapes_reach_descriptors_passed_as_plain_parameters():
    a, b = _matrices()
    lowered = capture_one(ik.desc_matmul, a, b, platform="rocm")
    assert [_loaded_tiles(kernel) for kernel in lowered.kernels] == [
        {(str(m), str(k)), (str(k), str(n))} for m, n, k in ik.MATMUL_TILES]


def test_a_descriptor_matmul_autotuned_with_pre_hooks_runs_on_the_cpu():
    a, b = on_cpu(*_matrices())
    out = jax.jit(lambda a, b: ik.desc_matmul(a * 1, b))(a, b)
    np.testing.assert_allclose(out, _f32_matmul(a, b), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("platform", [
    pytest.param("cuda", marks=needs_tma), "rocm"])
def test_a_remembered_choice_launches_with_its_own_block_shapes(platform, tmp_path,
                                                                 monkeypatch, fresh_caches):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))
    monkeypatch.setattr(_arch, "device_kind", lambda platform, context: "Stand-in GPU")
    a, b = _matrices()
    with _choices.session() as current:
        lower_for(ik.desc_matmul, a, b, platform=platform)
    [undecided] = current.undecided.values()
    _choices.STORE.put(undecided.key, _choices.Choice(2, undecided.descriptions[2]))
    lowered = capture_one(ik.desc_matmul, a, b, platform=platform)
    m, n, k = ik.MATMUL_TILES[2]
    assert len(lowered.kernels) == 1
    assert _loaded_tiles(lowered.kernels[0]) == {(str(m), str(k)), (str(k), str(n))}
    if platform == "cuda":
        assert [[tuple(p.descriptor.block_shape) for p in lowered.calls[0].params
                 if p.kind == "tensor_descriptor"]] == [[(m, k), (k, n)]]


def test_a_pre_hook_sees_the_arguments_keywords_and_config_by_name():
    seen = []

    def hook(nargs):
        seen.append({name: (value.shape if hasattr(value, "shape") else value)
                     for name, value in nargs.items()})
        ik.set_block_shapes(nargs)

    configs = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, num_warps=2,
                             pre_hook=hook)]
    a, b = _matrices()
    lower_for(lambda a, b: ik.desc_matmul(a, b, _tuned(ik.desc_matmul_kernel, configs)), a, b,
              platform="rocm")
    assert seen == [{"a_desc": [64, 48], "b_desc": [48, 96], "c_ptr": (64, 96), "M": 64,
                     "N": 96, "K": 48, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32,
                     "num_warps": 2, "num_stages": 3, "num_ctas": 1}]


def test_a_pre_hook_may_change_a_block_shape_in_place():
    def hook(nargs):
        ik.set_block_shapes(nargs)
        nargs["b_desc"].block_shape[1] = 32  # a list, as Triton's descriptor holds it

    configs = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 32, "BLOCK_K": 32}, pre_hook=hook)]
    a, b = _matrices()
    lowered = capture_one(
        lambda a, b: ik.desc_matmul(a, b, _tuned(ik.desc_matmul_kernel, configs)), a, b,
        platform="rocm")
    assert _loaded_tiles(lowered.kernels[0]) == {("64", "32"), ("32", "32")}


def _hooked(hook):
    return _tuned(ik.desc_matmul_kernel, [
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, pre_hook=hook),
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, pre_hook=ik.set_block_shapes)])


@pytest.mark.parametrize("hook,access", [
    (lambda nargs: nargs["c_ptr"].zero_(), r"nargs\['c_ptr'\]\.zero_"),
    (lambda nargs: nargs["a_desc"].base[0], r"nargs\['a_desc'\]\.base\[\.\.\.\]"),
    (lambda nargs: np.asarray(nargs["c_ptr"]), r"np\.asarray\(nargs\['c_ptr'\]\)"),
    (lambda nargs: setattr(nargs["a_desc"], "shape", [32, 48]),
     r"nargs\['a_desc'\]\.shape = \[32, 48\] \(a pre_hook may set a descriptor's block_shape"),
])
def test_a_pre_hook_touching_data_is_refused_naming_what_and_the_alternative(hook, access):
    a, b = _matrices()
    with pytest.raises(NotImplementedError, match=rf"pre_hook of triton.Config\(BLOCK_M: 64.*"
                                                  rf"used {access}.*zeroed_outputs"):
        lower_for(lambda a, b: ik.desc_matmul(a, b, _hooked(hook)), a, b, platform="cuda")


def test_a_pre_hook_touching_data_is_refused_on_the_cpu_too():
    a, b = on_cpu(*_matrices())
    with pytest.raises(NotImplementedError, match=r"used nargs\['c_ptr'\]\.zero_"):
        jax.jit(lambda a, b: ik.desc_matmul(a, b, _hooked(
            lambda nargs: nargs["c_ptr"].zero_())))(a, b)


def test_a_pre_hook_setting_a_block_shape_triton_refuses_names_the_hook():
    def hook(nargs):
        nargs["a_desc"].block_shape = [48, 32]

    a, b = _matrices()
    with pytest.raises(ValueError, match=r"pre_hook.*hook at test_idioms.py:\d+\) set "
                                         r"nargs\['a_desc'\]\.block_shape = \[48, 32\]: .*"
                                         r"power of two"):
        lower_for(lambda a, b: ik.desc_matmul(a, b, _hooked(hook)), a, b, platform="cuda")


def test_a_pre_hook_that_raises_is_named_with_what_it_was_given():
    a, b = _matrices()
    with pytest.raises(ValueError, match=r"pre_hook of triton.Config.*read 'desc_q', which is "
                                         r"not among the values.*a_desc="):
        lower_for(lambda a, b: ik.desc_matmul(a, b, _hooked(lambda nargs: nargs["desc_q"])), a,
                  b, platform="cuda")


def test_an_autotuner_pre_hook_is_still_refused():
    kernel = triton.autotune(configs=ik.MATMUL_CONFIGS, key=[],
                             pre_hook=lambda nargs, reset_only=False: None)(
        ik.desc_matmul_kernel.fn)
    a, b = _matrices()
    with pytest.raises(NotImplementedError, match=r"autotune\(pre_hook=\.\.\.\).*"
                                                  r"input_output_aliases"):
        lower_for(lambda a, b: ik.desc_matmul(a, b, kernel), a, b, platform="cuda")


# Keyword scalars reach early_config_prune and perf_model as Triton's launcher passes them.

def _qkv(bh=2, n_ctx=48, head_dim=16, dtype=jnp.float32):
    keys = jax.random.split(jax.random.key(2), 3)
    return [jax.random.normal(key, (bh, n_ctx, head_dim)).astype(dtype) for key in keys]


def test_an_attention_prune_reads_the_keyword_sequence_length_from_kwargs():
    q, k, v = _qkv(n_ctx=48)
    [call] = jtr.kernel_calls(lower_for(lambda q, k, v: ik.attention(q, k, v, 0.25), q, k, v,
                                        platform="cuda"))
    kept = [c.description for c in call.message.autotuned_kernel_call.configs]
    assert kept == [str(c) for c in ik.ATTENTION_CONFIGS if c.kwargs["BLOCK_M"] <= 48]


def test_attention_pruned_on_a_keyword_scalar_runs_on_the_cpu():
    q, k, v = on_cpu(*_qkv(n_ctx=40))
    out = jax.jit(lambda q, k, v: ik.attention(q * 1, k, v, 0.25))(q, k, v)
    np.testing.assert_allclose(out, ik.attention_reference(q, k, v, 0.25), rtol=2e-5, atol=2e-5)


def _recording_prune(seen):
    """The attention kernel with a prune that records the names it gets and keeps every config."""
    def prune(configs, named_args, **kwargs):
        seen.append((sorted(named_args), sorted(kwargs)))
        return configs

    return triton.autotune(configs=ik.ATTENTION_CONFIGS[:2], key=[],
                           prune_configs_by={"early_config_prune": prune})(ik.attention_kernel.fn)


def test_prune_gets_positional_arguments_in_named_args_and_keywords_in_kwargs():
    seen = []
    kernel = _recording_prune(seen)
    q, k, v = _qkv()
    lower_for(lambda q, k, v: ik.attention(q, k, v, 0.5, kernel), q, k, v, platform="cuda")
    assert seen == [(["k_ptr", "out_ptr", "q_ptr", "sm_scale", "v_ptr"],
                     ["HEAD_DIM", "N_CTX", "num_ctas"])]


def test_operands_by_name_reach_the_prune_as_keywords():
    seen = []
    kernel = _recording_prune(seen)
    q, k, v = _qkv()
    lower_for(lambda q, k, v: jtr.triton_call(
        q, k, kernel=kernel, out_shape=q, grid=(1, 2), operands={"v_ptr": v, "sm_scale": 0.5},
        N_CTX=48, HEAD_DIM=16), q, k, v, platform="cuda")
    assert seen == [(["k_ptr", "out_ptr", "q_ptr"],
                     ["HEAD_DIM", "N_CTX", "num_ctas", "sm_scale", "v_ptr"])]


def test_a_prune_reading_a_keyword_scalar_from_named_args_says_where_it_is():
    kernel = triton.autotune(configs=ik.ATTENTION_CONFIGS, key=[], prune_configs_by={
        "early_config_prune": lambda configs, named_args, **kwargs: [
            c for c in configs if c.kwargs["BLOCK_M"] <= named_args["N_CTX"]]})(
        ik.attention_kernel.fn)
    q, k, v = _qkv()
    with pytest.raises(ValueError, match=r"early_config_prune of kernel attention_kernel .* "
                                         r"raised KeyError: 'N_CTX'; it was given named_args "
                                         r"\(k_ptr=float32\[2, 48, 16\].*\) and kwargs "
                                         r"\(HEAD_DIM=16, N_CTX=48, num_ctas=1\): 'N_CTX' is in "
                                         r"kwargs only"):
        lower_for(lambda q, k, v: ik.attention(q, k, v, 0.5, kernel), q, k, v, platform="cuda")


def _perf_model(seen):
    def estimate(**values):
        seen.append(sorted(values))
        # Smaller query blocks over a longer sequence: more programs, more time.
        return values["N_CTX"] / values["BLOCK_M"] + values["BLOCK_N"] / 64
    return estimate


def test_perf_model_keeps_the_top_k_configs_it_estimates_fastest():
    seen = []
    kernel = triton.autotune(configs=ik.ATTENTION_CONFIGS, key=[], prune_configs_by={
        "early_config_prune": ik.prune_invalid_configs, "perf_model": _perf_model(seen),
        "top_k": 2})(ik.attention_kernel.fn)
    q, k, v = _qkv(n_ctx=64)
    [call] = jtr.kernel_calls(lower_for(lambda q, k, v: ik.attention(q, k, v, 0.5, kernel),
                                        q, k, v, platform="cuda"))
    kept = [c.description for c in call.message.autotuned_kernel_call.configs]
    assert kept == [str(ik.ATTENTION_CONFIGS[2]), str(ik.ATTENTION_CONFIGS[1])]
    assert seen[0] == sorted({"q_ptr", "k_ptr", "v_ptr", "sm_scale", "out_ptr", "N_CTX",
                              "HEAD_DIM", "num_ctas", *ik.ATTENTION_CONFIGS[0].all_kwargs()})
    assert len(seen) == 3  # one estimate per config the prune left


def test_a_float_top_k_is_a_share_of_the_configs():
    kernel = triton.autotune(configs=ik.ATTENTION_CONFIGS, key=[], prune_configs_by={
        "perf_model": _perf_model([]), "top_k": 0.5})(ik.attention_kernel.fn)
    q, k, v = _qkv(n_ctx=128)
    [call] = jtr.kernel_calls(lower_for(lambda q, k, v: ik.attention(q, k, v, 0.5, kernel),
                                        q, k, v, platform="cuda"))
    assert len(call.message.autotuned_kernel_call.configs) == 2


@pytest.mark.parametrize("prune_by,error,match", [
    ({"perf_model": lambda **kw: "fast", "top_k": 1}, ValueError,
     r"perf_model of kernel attention_kernel, for config \(BLOCK_M: 16.*returned 'fast', not a "
     r"number"),
    ({"perf_model": lambda **kw: kw["BLOCK"], "top_k": 1}, ValueError,
     r"perf_model of kernel attention_kernel.*read 'BLOCK', which is not among"),
    ({"perf_model": lambda **kw: 1.0, "top_k": "2"}, TypeError,
     r"top_k': '2'\} on kernel attention_kernel must be an int or a float up to 1.0"),
    ({"perf_model": lambda **kw: 1.0, "top_k": 0.1}, ValueError,
     r"top_k': 0.1\} on kernel attention_kernel keeps no config of 4"),
])
def test_a_bad_perf_model_or_top_k_is_named(prune_by, error, match):
    kernel = triton.autotune(configs=ik.ATTENTION_CONFIGS, key=[],
                             prune_configs_by=prune_by)(ik.attention_kernel.fn)
    q, k, v = _qkv()
    with pytest.raises(error, match=match):
        lower_for(lambda q, k, v: ik.attention(q, k, v, 0.5, kernel), q, k, v, platform="cuda")


def test_heuristics_and_grids_see_keyword_scalars_with_the_rest():
    seen = []

    def block(args):
        seen.append(args["N_CTX"])
        return 16

    kernel = triton.heuristics({"BLOCK_M": block, "BLOCK_N": lambda args: 16})(
        ik.attention_kernel.fn)
    q, k, v = _qkv(n_ctx=48)
    lowered = capture_one(lambda q, k, v: ik.attention(q, k, v, 0.5, kernel), q, k, v,
                          platform="cuda")
    assert seen == [48]
    assert lowered.calls[0].grid == (3, 2, 1)


# Parameters named like triton_call's own arguments: constexprs= and operands=.

def test_a_softmax_with_a_num_stages_parameter_runs_with_constexprs():
    [x] = on_cpu(jax.random.normal(jax.random.key(3), (10, 50)))
    out = jax.jit(lambda x: ik.softmax(x * 1, num_stages=3))(x)
    np.testing.assert_allclose(out, jax.nn.softmax(x, axis=1), rtol=1e-6, atol=1e-6)


def test_the_num_stages_constexpr_is_the_kernels_and_num_stages_the_compilers():
    x = spec((16, 64), jnp.float32)
    one, three = [capture_one(lambda x: ik.softmax(x, num_stages=stages), x,
                              platform="cuda").kernels[0] for stages in (1, 3)]
    assert one.key != three.key  # the constexpr compiles in
    tuned = capture_one(lambda x: jtr.triton_call(
        kernel=ik.softmax_kernel, out_type=x, grid=(4,), in_ptr=x, in_row_stride=64,
        out_row_stride=64, n_rows=16, n_cols=64, BLOCK=64, num_stages=2,
        constexprs={"num_stages": 1}), x, platform="cuda").kernels[0]
    assert tuned.metadata["num_stages"] == 2  # triton_call's own argument: the compile option
    assert tuned.key != one.key


def test_constexprs_of_another_value_are_another_call():
    [x] = on_cpu(jnp.arange(256, dtype=jnp.float32))
    scale = kernels.scaled_by_parameter("grid")
    fn = jax.jit(lambda x, s: jtr.triton_call(x, kernel=scale, out_type=x, grid=1,
                                              constexprs={"grid": s}), static_argnums=1)
    np.testing.assert_array_equal(fn(x, 2), 2 * x)
    np.testing.assert_array_equal(fn(x, 3), 3 * x)


def _named_scalar_kernel(name):
    return kernels.kernel_from_source(
        f"@triton.jit\n"
        f"def {name}_kernel(x_ptr, {name}, out_ptr, BLOCK: tl.constexpr):\n"
        f"    offsets = tl.arange(0, BLOCK)\n"
        f"    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * {name})\n", f"{name}_kernel")


@pytest.mark.parametrize("convention", ["out_type", "out_shape"])
def test_a_runtime_parameter_named_like_an_option_goes_in_operands(convention):
    kernel = _named_scalar_kernel("name")
    call = lambda x: jtr.triton_call(x, kernel=kernel, grid=1, BLOCK=256,  # noqa: E731
                                     operands={"name": 2.5}, **{convention: x})
    lowered = capture_one(call, spec((256,), jnp.float32), platform="cuda")
    assert [p.kind for p in lowered.calls[0].params][:2] == ["array", "f32"]  # at launch
    [x] = on_cpu(jnp.arange(256, dtype=jnp.float32))
    np.testing.assert_array_equal(jax.jit(call)(x), 2.5 * x)


X = spec((256,), jnp.float32)


@pytest.mark.parametrize("call,error,match", [
    (dict(constexprs={"grd": 2}), TypeError,
     r"constexprs names 'grd', which kernel grid_kernel has no parameter for \(did you mean "
     r"grid\?\)"),
    (dict(constexprs=[("grid", 2)]), TypeError, r"constexprs=\[\('grid', 2\)\] must be a dict"),
    (dict(constexprs={"grid": jnp.ones(2)}), TypeError,
     r"constexprs\['grid'\] holds an array.*operands="),
    (dict(operands={"grid": 2}), TypeError,
     r"operands\['grid'\] fills kernel grid_kernel's parameter 'grid', a tl.constexpr.*"
     r"constexprs=\{'grid': 2\}"),
    (dict(constexprs={"grid": 2}, operands={"grid": 2}), TypeError,
     r"parameter 'grid' is given both in operands and as constexprs"),
    (dict(constexprs={"x_ptr": 2}), TypeError, r"multiple values for argument 'x_ptr'"),
    (dict(constexprs={"grid": [2]}), TypeError, r"grid=\[2\] must be hashable"),
])
def test_bad_constexprs_and_operands_are_named(call, error, match):
    kernel = kernels.scaled_by_parameter("grid")
    with pytest.raises(error, match=match):
        lower_for(lambda x: jtr.triton_call(x, kernel=kernel, out_type=x, grid=1, **call), X,
                  platform="cuda")


def test_a_parameter_named_like_an_option_left_unfilled_says_how_to_fill_it():
    kernel = _named_scalar_kernel("debug")
    with pytest.raises(TypeError, match=r"Most likely missing: 'debug' \(the kernel counts with "
                                        r"it at .*Parameter 'debug' has the name of an argument "
                                        r"of triton_call.*operands=\{'debug': ...\} \(filled at "
                                        r"launch"):
        lower_for(lambda x: jtr.triton_call(x, kernel=kernel, out_type=x, grid=1, BLOCK=256), X,
                  platform="cuda")
