"""@triton.autotune and @triton.heuristics, lowered without a GPU for CUDA and ROCm.

Each test lowers under `target_arch` and reads the call that would reach jaxlib, decoded from its
opaque. GPU runs of the same kernels are in test_gpu_autotune.py.
"""

import jax
import pytest
import triton

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _compat, _env, _state
from jax_triton_rocm.compile import _compile
from jax_triton_rocm.routes.jaxlib import _proto
from tests.support import autotune_utils as au
from tests.support import kernels, two_apis
from tests.support.lowering_utils import capture_one, lower_add, lowered_text, opaque_metadata

N = 4096


def _tuned(kernel, configs=au.ADD_CONFIGS, **autotune_kwargs):
    autotune_kwargs.setdefault("key", ["n"])
    return triton.autotune(configs=configs, **autotune_kwargs)(kernel)


# What reaches jaxlib.

@pytest.mark.parametrize("platform,arch", [("cuda", "sm_90"), ("rocm", "gfx942")])
def test_autotuned_call_has_every_config_in_order(platform, arch):
    lowered = lower_add(au.tuned_add_kernel, platform=platform, arch=arch)
    assert [c.description for c in au.decoded_configs(lowered)] == [
        str(c) for c in au.ADD_CONFIGS]


@pytest.mark.parametrize("platform,arch", [("cuda", "sm_90"), ("rocm", "gfx942")])
def test_callable_grid_is_evaluated_per_config(platform, arch):
    lowered = lower_add(au.tuned_add_kernel, platform=platform, arch=arch)
    grids = [(c.kernel_call.grid_0, c.kernel_call.grid_1, c.kernel_call.grid_2)
             for c in au.decoded_configs(lowered)]
    assert grids == [(N // 128, 1, 1), (N // 256, 1, 1), (N // 512, 1, 1)]


@pytest.mark.parametrize("platform,arch", [("cuda", "sm_90"), ("rocm", "gfx942")])
def test_each_config_is_compiled_with_its_own_warps_and_stages(platform, arch):
    lowered = lower_add(au.tuned_add_kernel, platform=platform, arch=arch)
    assert [k.num_warps for k in lowered.kernels] == [4, 4, 8]
    assert [k.metadata["num_stages"] for k in lowered.kernels] == [3, 2, 3]
    assert [c.kernel_call.kernel.num_warps for c in au.decoded_configs(lowered)] == [4, 4, 8]


def test_autotuned_cuda_call_parses_as_jaxlib_reads_it():
    lowered = lower_add(au.tuned_add_kernel, serialized_metadata=b"tuned-add")
    assert opaque_metadata(lowered.opaque) == b"tuned-add"


def test_early_config_prune_keeps_its_configs_in_its_order():
    seen = []

    def prune(configs, named_args, **kwargs):
        seen.append((named_args["n"], sorted(kwargs)))
        return [c for c in reversed(configs) if c.kwargs["BLOCK"] <= named_args["n"]]

    kernel = _tuned(kernels.add_kernel, prune_configs_by={"early_config_prune": prune})
    lowered = lower_add(kernel, n=256)
    assert [c.description for c in au.decoded_configs(lowered)] == [
        str(au.ADD_CONFIGS[1]), str(au.ADD_CONFIGS[0])]
    assert seen == [(256, ["num_ctas"])]


def test_one_config_left_by_pruning_is_a_plain_kernel_call():
    kernel = _tuned(kernels.add_kernel,
                    prune_configs_by={"early_config_prune": lambda configs, named, **kw: configs[:1]})
    lowered = lower_add(kernel)
    assert _proto.decode(lowered.opaque).WhichOneof("value") == "kernel_call"


def test_config_failing_a_static_assert_is_dropped_like_triton_does():
    lowered = lower_add(_tuned(au.capped_add_kernel))
    assert [c.description for c in au.decoded_configs(lowered)] == [
        str(c) for c in au.ADD_CONFIGS[:2]]


def test_every_config_failing_raises_the_compile_error():
    from triton.compiler.errors import CompileTimeAssertionFailure

    kernel = _tuned(au.capped_add_kernel, configs=[triton.Config({"BLOCK": 512}),
                                                   triton.Config({"BLOCK": 1024})])
    with pytest.raises(CompileTimeAssertionFailure):
        lower_add(kernel)


# input_output_aliases and the custom-call target.

def test_aliases_travel_with_the_autotuned_call_as_buffer_indices():
    lowered = capture_one(au.tuned_add_inplace, au.f32(N), au.f32(N), platform="cuda")
    aliases = _proto.decode(lowered.opaque).autotuned_kernel_call.input_output_aliases
    # Input 1 (x) is output 0, which is buffer 2: jaxlib counts the two operands first.
    assert [(a.input_buffer_idx, a.output_buffer_idx, a.buffer_size_bytes) for a in aliases] == [
        (1, 2, N * 4)]


@pytest.mark.parametrize("platform,arch", [("cuda", "sm_90"), ("rocm", "gfx942")])
def test_autotuned_call_takes_the_legacy_target_whose_trials_see_the_real_operands(
        monkeypatch, platform, arch):
    """jaxlib's FFI target times the configs before earlier kernels have run (_compat)."""
    monkeypatch.delenv(_env.ENV_AUTOTUNE_TARGET, raising=False)
    lowered = lower_add(au.tuned_add_kernel, platform=platform, arch=arch)
    assert lowered.custom_call_name == _compat.LEGACY_CALL_NAME
    text = lowered_text(lambda x, y: au.tuned_add(x, y), au.f32(N), au.f32(N), platform=platform,
                        arch=arch)
    assert "backend_config" in text


def test_forcing_the_ffi_target_for_autotuned_calls_warns_once(monkeypatch, caplog):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_TARGET, "ffi")
    monkeypatch.setattr(_state, "_WARNED", set())
    with caplog.at_level("WARNING", logger="jax_triton_rocm"):
        lower_add(au.tuned_add_kernel)
        lower_add(au.tuned_add_kernel, n=N + 1)
    warnings = [r.getMessage() for r in caplog.records if "AUTOTUNE_TARGET=ffi" in r.getMessage()]
    assert len(warnings) == 1
    assert "out of bounds" in warnings[0] and "jax_triton_rocm.autotune" in warnings[0]


@pytest.mark.parametrize("value,target", [("ffi", _compat.FFI_CALL_NAME),
                                          ("legacy", _compat.LEGACY_CALL_NAME)])
def test_environment_forces_the_autotuned_call_target(monkeypatch, value, target):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_TARGET, value)
    lowered = lower_add(au.tuned_add_kernel)
    assert lowered.custom_call_name == target


def test_unknown_autotuned_call_target_names_the_variable(monkeypatch):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_TARGET, "graph")
    with pytest.raises(ValueError, match="JAX_TRITON_ROCM_AUTOTUNE_TARGET='graph'.*ffi, legacy"):
        lower_add(au.tuned_add_kernel)


def test_forced_target_leaves_plain_calls_alone(monkeypatch):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_TARGET, "legacy")
    lowered = capture_one(kernels.add, au.f32(N), au.f32(N), platform="cuda")
    assert lowered.custom_call_name == _compat.FFI_CALL_NAME


# AMD options in a config's kwargs.

def test_amd_config_keys_reach_the_hip_compiler():
    kernel = _tuned(kernels.add_kernel, configs=[
        triton.Config({"BLOCK": 128, "waves_per_eu": 2, "matrix_instr_nonkdim": 16, "kpack": 2}),
        triton.Config({"BLOCK": 256, "waves_per_eu": 1}),
    ])
    lowered = lower_add(kernel, platform="rocm", arch="gfx942")
    meta = [k.metadata for k in lowered.kernels]
    assert [(m["waves_per_eu"], m["matrix_instr_nonkdim"], m["kpack"]) for m in meta] == [
        (2, 16, 2), (1, 0, 1)]


def test_amd_config_keys_are_ignored_for_cuda():
    kernel = _tuned(kernels.add_kernel, configs=[
        triton.Config({"BLOCK": 128, "waves_per_eu": 2}), triton.Config({"BLOCK": 256})])
    lowered = lower_add(kernel)
    assert "waves_per_eu" not in lowered.kernels[0].metadata


# Heuristics, nested either way.

def test_heuristics_inside_autotune_run_per_config():
    seen = []

    def even(args):
        seen.append(args["BLOCK"])
        return args["n"] % args["BLOCK"] == 0

    kernel = _tuned(triton.heuristics({"EVEN": even})(au.even_add_kernel))
    lowered = lower_add(kernel, n=384)
    assert seen == [128, 256, 512]
    assert len({k.key for k in lowered.kernels}) == 3


def test_heuristics_around_autotune_run_once_before_pruning():
    calls, pruned_with = [], []

    def even(args):
        calls.append(sorted(args))
        return args["n"] % 128 == 0

    def prune(configs, named_args, **kwargs):
        pruned_with.append(kwargs["EVEN"])
        return configs

    kernel = triton.heuristics({"EVEN": even})(
        _tuned(au.even_add_kernel, prune_configs_by={"early_config_prune": prune}))
    lower_add(kernel, n=384)
    assert calls == [["n", "num_ctas", "out_ptr", "x_ptr", "y_ptr"]]
    assert pruned_with == [True]


def _even_of_the_block(args):
    return args["n"] % args["BLOCK"] == 0


def test_heuristics_around_autotune_reading_a_config_key_says_where_to_put_them():
    kernel = triton.heuristics({"EVEN": _even_of_the_block})(_tuned(au.even_add_kernel))
    with pytest.raises(ValueError, match=r"heuristic for 'EVEN'.* read 'BLOCK', which the "
                                         r"kernel's @triton.autotune configs set; .*wraps "
                                         r"@triton.autotune.*Put @triton.heuristics below "
                                         r"@triton.autotune"):
        lower_add(kernel, n=384)


def test_tritons_own_launcher_cannot_read_a_config_key_in_heuristics_around_autotune():
    # What docs/limitations.md says: Triton runs such a heuristic before any config, too.
    kernel = triton.heuristics({"EVEN": _even_of_the_block})(_tuned(au.even_add_kernel))
    with pytest.raises(KeyError, match="BLOCK"):
        kernel.run(None, None, 384, None, grid=(3,), warmup=False)


def test_heuristic_may_set_num_warps():
    kernel = triton.heuristics({"num_warps": lambda args: 2, "BLOCK": lambda args: 64})(
        kernels.add_kernel)
    lowered = capture_one(lambda x, y: jtr.triton_call(
        x, y, x.size, kernel=kernel, out_shape=x, grid=lambda meta: (N // meta["BLOCK"],)),
        au.f32(N), au.f32(N), platform="cuda")
    assert lowered.kernels[0].num_warps == 2
    assert lowered.calls[0].grid == (N // 64, 1, 1)


def test_heuristic_setting_an_unknown_name_says_which():
    kernel = triton.heuristics({"BLOKC": lambda args: 64})(kernels.add_kernel)
    with pytest.raises(TypeError, match="sets 'BLOKC'.*neither a parameter"):
        capture_one(lambda x, y: jtr.triton_call(
            x, y, x.size, kernel=kernel, out_shape=x, grid=(16,), BLOCK=256),
            au.f32(N), au.f32(N), platform="cuda")


# Errors.

def _trace(kernel, **kwargs):
    jax.eval_shape(lambda x, y: au.tuned_add(x, y, kernel=kernel, **kwargs),
                   au.f32(N), au.f32(N))


@pytest.mark.parametrize("autotune_kwargs,feature,advice", [
    ({"pre_hook": lambda kwargs, reset_only=False: None}, "pre_hook", "input_output_aliases"),
    ({"post_hook": lambda kwargs, exception: None}, "post_hook", "in JAX"),
    ({"restore_value": ["x_ptr"]}, "restore_value", "input_output_aliases"),
    ({"reset_to_zero": ["out_ptr"]}, "reset_to_zero", "zeroed_outputs"),
    ({"do_bench": lambda fn, quantiles: [1.0] * 3}, "do_bench", "jaxlib times"),
    ({"cache_results": True}, "cache_results", "once per process"),
])
def test_unsupported_autotuner_feature_names_the_alternative(autotune_kwargs, feature, advice):
    kernel = _tuned(kernels.add_kernel, **autotune_kwargs)
    with pytest.raises(NotImplementedError, match=rf"{feature}=\.\.\..*add_kernel.*{advice}"):
        _trace(kernel)


def test_use_cuda_graph_names_the_alternative():
    with pytest.warns(DeprecationWarning):
        kernel = _tuned(kernels.add_kernel, use_cuda_graph=True)
    with pytest.raises(NotImplementedError, match="use_cuda_graph=.*jaxlib times"):
        _trace(kernel)


def test_config_pre_hook_zeroing_an_output_names_the_alternative():
    kernel = _tuned(kernels.add_kernel, configs=[
        triton.Config({"BLOCK": 128}, pre_hook=lambda nargs: nargs["out_ptr"].zero_()),
        triton.Config({"BLOCK": 256})])
    with pytest.raises(NotImplementedError, match=r"pre_hook of triton.Config\(BLOCK: 128.*"
                                                  r"used nargs\['out_ptr'\].zero_.*"
                                                  r"input_output_aliases.*zeroed_outputs"):
        lower_add(kernel)


def test_config_pre_hook_that_touches_nothing_runs_at_lowering():
    calls = []
    kernel = _tuned(kernels.add_kernel, configs=[
        triton.Config({"BLOCK": 128}, pre_hook=lambda nargs: calls.append(nargs["BLOCK"])),
        triton.Config({"BLOCK": 256})])
    lowered = lower_add(kernel)
    assert calls == [128]
    assert len(au.decoded_configs(lowered)) == 2


def test_config_ir_override_is_refused():
    kernel = _tuned(kernels.add_kernel, configs=[
        triton.Config({"BLOCK": 128}, ir_override="kernel.ttgir"), triton.Config({"BLOCK": 256})])
    with pytest.raises(NotImplementedError, match="ir_override='kernel.ttgir'.*Drop ir_override"):
        _trace(kernel)


def test_a_metaparameter_the_call_sets_keeps_the_configs_that_agree_like_jax_triton():
    configs = [triton.Config({"BLOCK": 128}, num_warps=4),
               triton.Config({"BLOCK": 256}, num_warps=4, num_stages=2),
               triton.Config({"BLOCK": 256}, num_warps=8)]
    lowered = lower_add(_tuned(kernels.add_kernel, configs=configs), BLOCK=256)
    assert [c.description for c in au.decoded_configs(lowered)] == [str(c) for c in configs[1:]]


def test_a_metaparameter_no_config_agrees_with_names_the_key_the_value_and_the_configs():
    with pytest.raises(ValueError, match=r"the call sets BLOCK=64 .*no autotune config agrees: "
                                         r"BLOCK: 128, .*; BLOCK: 256, .*; BLOCK: 512, .*Give a "
                                         r"value that one of them sets"):
        lower_add(au.tuned_add_kernel, BLOCK=64)


def test_config_kwarg_that_is_no_parameter_says_which():
    kernel = _tuned(kernels.add_kernel, configs=[triton.Config({"BLOCK": 128, "BLOKC": 1}),
                                                  triton.Config({"BLOCK": 256})])
    with pytest.raises(TypeError, match="sets 'BLOKC'.*Fix the config"):
        lower_add(kernel)


def test_pruning_every_config_is_an_error():
    kernel = _tuned(kernels.add_kernel,
                    prune_configs_by={"early_config_prune": lambda configs, named, **kw: []})
    with pytest.raises(ValueError, match=r"early_config_prune of kernel add_kernel \(.*\) "
                                         r"returned no config"):
        lower_add(kernel)


# Compiled in parallel, through the shared kernel cache.

@pytest.mark.usefixtures("fresh_caches")
def test_lowering_again_compiles_nothing():
    lower_add(_tuned(kernels.add_kernel))
    lower_add(_tuned(kernels.add_kernel))
    assert _state.COMPILED_KERNELS.stats["compiles"] == len(au.ADD_CONFIGS)


def test_negative_thread_count_names_the_variable(monkeypatch):
    monkeypatch.setenv(_env.ENV_COMPILE_THREADS, "-2")
    with pytest.raises(ValueError, match="JAX_TRITON_ROCM_COMPILE_THREADS='-2'"):
        _compile.thread_count()


@pytest.mark.parametrize("api", two_apis.APIS)
def test_a_key_set_by_the_call_prunes_the_same_on_either_api(api):
    configs = [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256}, num_warps=8),
               triton.Config({"BLOCK": 256}, num_warps=2)]
    kernel = _tuned(kernels.add_kernel, configs=configs)
    lowered = capture_one(two_apis.call_through(api, kernel=kernel, BLOCK=256), two_apis.X,
                          two_apis.X, platform="cuda")
    assert [launch.num_warps for launch in lowered.launches] == [8, 2]
    with pytest.raises(ValueError, match="the call sets BLOCK=64 .*no autotune config agrees"):
        capture_one(two_apis.call_through(api, kernel=kernel, BLOCK=64), two_apis.X,
                    two_apis.X, platform="cuda")


# Launch settings given at the call prune the configs, as a constexpr given at the call does.

@pytest.mark.usefixtures("fresh_caches")
@pytest.mark.parametrize("platform,arch", [("cuda", "sm_90"), ("rocm", "gfx942")])
@pytest.mark.parametrize("setting,value,kept", [("num_warps", 8, [2]), ("num_stages", 2, [1]),
                                                ("num_warps", 4, [0, 1])])
def test_a_launch_setting_the_call_gives_compiles_only_the_configs_that_agree(
        platform, arch, setting, value, kept):
    lowered = lower_add(au.tuned_add_kernel, platform=platform, arch=arch, **{setting: value})
    assert _state.COMPILED_KERNELS.stats["compiles"] == len(kept)
    assert [launch.description for launch in lowered.launches] == [
        str(au.ADD_CONFIGS[i]) for i in kept]


def test_a_config_that_leaves_a_setting_to_the_call_agrees_and_launches_with_the_calls():
    # num_warps=None, and maxnreg=None (Triton's default), leave the setting to the call.
    configs = [triton.Config({"BLOCK": 128}, num_warps=None),
               triton.Config({"BLOCK": 256}, num_warps=4),
               triton.Config({"BLOCK": 512}, num_warps=8)]
    lowered = lower_add(_tuned(kernels.add_kernel, configs=configs), num_warps=2, maxnreg=64)
    assert [launch.description for launch in lowered.launches] == [str(configs[0])]
    assert [(k.num_warps, k.metadata["maxnreg"]) for k in lowered.kernels] == [(2, 64)]


def test_num_ctas_given_prunes_and_left_out_keeps_every_config():
    configs = [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256}, num_ctas=2)]
    kernel = _tuned(kernels.add_kernel, configs=configs)
    assert [k.num_ctas for k in lower_add(kernel).kernels] == [1, 2]
    assert [k.num_ctas for k in lower_add(kernel, num_ctas=2).kernels] == [2]
    assert [k.num_ctas for k in lower_add(kernel, num_ctas=1).kernels] == [1]


def test_maxnreg_given_keeps_the_configs_that_set_it_alike_or_not_at_all():
    configs = [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256}, maxnreg=128),
               triton.Config({"BLOCK": 512}, maxnreg=64)]
    lowered = lower_add(_tuned(kernels.add_kernel, configs=configs), maxnreg=64)
    assert [launch.description for launch in lowered.launches] == [str(configs[0]),
                                                                    str(configs[2])]
    assert [k.metadata["maxnreg"] for k in lowered.kernels] == [64, 64]


def test_a_launch_setting_no_config_agrees_with_names_it_the_configs_and_the_fix():
    with pytest.raises(ValueError, match=r"Kernel tuned_add_kernel: the call sets num_warps=2 "
                                         r".*no autotune config agrees: BLOCK: 128, num_warps: 4"
                                         r".*; BLOCK: 512, num_warps: 8, .*Give a value that one "
                                         r"of them sets, or drop it from the call"):
        lower_add(au.tuned_add_kernel, num_warps=2)


def test_the_v0_3_drop_ins_default_of_one_cta_keeps_every_config():
    from jax_triton_rocm.compat import triton_lib_0_3

    configs = [triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256}, num_ctas=2)]
    kernel = _tuned(kernels.add_kernel, configs=configs)
    x = jax.ShapeDtypeStruct((N,), "float32")
    lowered = capture_one(lambda x, y: triton_lib_0_3.triton_call(
        x, y, N, kernel=kernel, out_shape=x, grid=lambda meta: (N // meta["BLOCK"],)),
        x, x, platform="cuda")
    assert [k.num_ctas for k in lowered.kernels] == [1, 2]


def test_a_compile_option_given_at_the_call_prunes_the_configs_that_set_it_otherwise():
    configs = [triton.Config({"BLOCK": 128, "waves_per_eu": 1}),
               triton.Config({"BLOCK": 256, "waves_per_eu": 2}), triton.Config({"BLOCK": 512})]
    lowered = lower_add(_tuned(kernels.add_kernel, configs=configs), platform="rocm",
                        waves_per_eu=2)
    assert [launch.description for launch in lowered.launches] == [str(c) for c in configs[1:]]
