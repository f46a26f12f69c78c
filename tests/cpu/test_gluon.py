"""Gluon kernels through triton_call, lowered without a GPU for gfx942, gfx950 and sm_90."""

import pathlib

import jax
import jax.numpy as jnp
import pytest
import triton
from triton.experimental.gluon._runtime import GluonASTSource

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state
from jax_triton_rocm.compile import _cache, _compile, _errors
from jax_triton_rocm.kernel import _layout
from jax_triton_rocm.routes.jaxlib import _proto
from tests.support import binary_utils, gluon_utils
from tests.support import gluon_kernels as gk
from tests.support.binary_utils import AMDGPU_MACH, EM_AMDGPU, EM_CUDA, carried_form
from tests.support.gluon_utils import TARGETS
from tests.support.lowering_utils import capture_one, opaque_metadata

VECTOR = jax.ShapeDtypeStruct((4096,), jnp.float32)
MATRIX = jax.ShapeDtypeStruct((100, 200), jnp.float32)
TARGET_IDS = [arch for _, arch, _ in TARGETS]


def _calls(warp_size):
    """One wrapper per shared kernel, with the avals it is lowered at."""
    return {
        "copy": (lambda x: gk.copy(x, warp_size=warp_size), (VECTOR,)),
        "axpy": (lambda x, y: gk.axpy(2.5, x, y, warp_size=warp_size), (VECTOR, VECTOR)),
        "row_sum": (lambda x: gk.row_sum(x, warp_size=warp_size), (MATRIX,)),
        "transpose": (lambda x: gk.transpose(x, warp_size=warp_size), (MATRIX,)),
    }


# The binary and the opaque, per target.

@pytest.mark.parametrize("kernel", ["copy", "axpy", "row_sum", "transpose"])
@pytest.mark.parametrize("platform,arch,warp", TARGETS, ids=TARGET_IDS)
def test_shared_gluon_kernel_lowers_to_a_binary_for_the_target(kernel, platform, arch, warp):
    fn, avals = _calls(warp)[kernel]
    compiled = capture_one(fn, *avals, platform=platform, arch=arch).kernels[0]
    if platform == "rocm":
        assert binary_utils.elf_machine(compiled.binary) == EM_AMDGPU
        assert binary_utils.hsaco_mach(compiled.binary) == AMDGPU_MACH[arch]
    else:
        assert binary_utils.elf_machine(compiled.binary) == EM_CUDA
        assert binary_utils.cubin_sm(compiled.binary) == 90
    assert compiled.warp_size == warp


@pytest.mark.parametrize("platform,arch,warp", TARGETS, ids=TARGET_IDS)
def test_decoded_opaque_launches_the_compiled_kernel(platform, arch, warp):
    lowered = capture_one(lambda x, y: gk.axpy(2.5, x, y, warp_size=warp), VECTOR, VECTOR,
                          platform=platform, arch=arch)
    call = _proto.decode(lowered.opaque).kernel_call
    compiled = lowered.kernels[0]
    assert call.kernel.kernel_name == compiled.name == "axpy_kernel"
    assert (call.grid_0, call.grid_1, call.grid_2) == (4, 1, 1)
    assert call.kernel.num_warps == 4
    assert [p.WhichOneof("value") for p in call.parameters] == ["array", "array", "f32", "i32",
                                                                "array"]
    assert call.parameters[2].f32 == 2.5
    assert call.parameters[3].i32 == 4096
    if lowered.features.module_image:
        assert call.kernel.module_image.object_file == carried_form(compiled.binary, platform)
    elif platform == "rocm":
        assert pathlib.Path(call.kernel.ptx).read_bytes() == compiled.binary
    else:
        assert call.kernel.ptx == compiled.asm


@pytest.mark.parametrize("platform,arch,warp", TARGETS, ids=TARGET_IDS)
def test_gluon_ir_is_kept_with_the_kernel_and_left_out_of_the_call(platform, arch, warp):
    lowered = capture_one(lambda x: gk.copy(x, warp_size=warp), VECTOR, platform=platform,
                          arch=arch)
    assert f"threadsPerWarp = [{warp}]" in lowered.kernels[0].ttir
    assert _proto.decode(lowered.opaque).kernel_call.kernel.ttir == ""  # jaxlib reads none


def test_cuda_opaque_parses_as_jaxlib_reads_it():
    lowered = capture_one(lambda x: jtr.triton_call(
        x, x.size, kernel=gk.copy_kernel, out_shape=x, grid=(4,), num_warps=4,
        serialized_metadata=b"gluon-metadata", BLOCK=1024, WARP_SIZE=32, NUM_WARPS=4,
    ), VECTOR, platform="cuda")
    assert opaque_metadata(lowered.opaque) == b"gluon-metadata"


# How a Gluon kernel is compiled.

def test_gluon_kernel_compiles_through_gluon_source_with_constexprs_marked(monkeypatch,
                                                                           fresh_caches):
    sources = []
    make_request = _cache.compile_request

    def recording_request(source, *args, **kwargs):
        sources.append(source)
        return make_request(source, *args, **kwargs)

    monkeypatch.setattr(_cache, "compile_request", recording_request)
    capture_one(lambda x: gk.copy(x, warp_size=64, block=2048), VECTOR, platform="rocm",
                arch="gfx942")
    (source,) = sources
    assert isinstance(source, GluonASTSource)
    assert source.signature == {"x_ptr": "*fp32", "n": "i32", "out_ptr": "*fp32",
                                "BLOCK": "constexpr", "WARP_SIZE": "constexpr",
                                "NUM_WARPS": "constexpr"}
    assert source.constants[(3,)] == 2048


def test_gluon_and_triton_compiles_of_one_kernel_have_different_keys():
    from triton.backends.compiler import GPUTarget

    bound = _layout.BoundKernel({"x_ptr": "*fp32"}, {}, {}, (), ())
    target = GPUTarget("hip", "gfx942", 64)
    keys = {_compile.make_job(gk.copy_kernel, target, bound, {}, gluon=gluon, arch="gfx942",
                             binary_key="hsaco", asm_key="amdgcn", symbol="copy_kernel").key
            for gluon in (True, False)}
    assert len(keys) == 2


@pytest.mark.usefixtures("fresh_caches")
def test_gluon_kernel_is_compiled_once_for_two_jitted_functions():
    capture_one(lambda x: gk.copy(x, warp_size=64), VECTOR, platform="rocm", arch="gfx950")
    capture_one(lambda x: gk.copy(x, warp_size=64) * 2, VECTOR, platform="rocm", arch="gfx950")
    assert _state.COMPILED_KERNELS.stats["compiles"] == 1


@pytest.mark.parametrize("platform,arch,warp", TARGETS, ids=TARGET_IDS)
def test_num_warps_and_num_stages_reach_the_compiler_and_the_launch(platform, arch, warp):
    lowered = capture_one(lambda x: jtr.triton_call(
        x, x.size, kernel=gk.copy_kernel, out_shape=x, grid=(2,), num_warps=8, num_stages=3,
        BLOCK=2048, WARP_SIZE=warp, NUM_WARPS=8), VECTOR, platform=platform, arch=arch)
    compiled = lowered.kernels[0]
    assert compiled.num_warps == 8
    assert compiled.metadata["num_stages"] == 3
    assert _proto.decode(lowered.opaque).kernel_call.kernel.num_warps == 8


# Layouts that do not fit the launch.

@pytest.mark.parametrize("platform,arch,wrong_warp,warp", [("rocm", "gfx942", 32, 64),
                                                           ("rocm", "gfx950", 32, 64),
                                                           ("cuda", "sm_90", 64, 32)])
def test_layout_of_the_wrong_warp_size_names_both_sizes_and_the_target(platform, arch,
                                                                      wrong_warp, warp):
    with pytest.raises(ValueError) as error:
        capture_one(lambda x: gk.copy(x, warp_size=wrong_warp), VECTOR, platform=platform,
                    arch=arch)
    message = str(error.value)
    assert f"{wrong_warp} threads per warp" in message
    assert f"target {arch} has a warp size of {warp}" in message
    assert RuntimeError in gluon_utils.cause_types(error.value)  # Triton's verifier error


@pytest.mark.parametrize("platform,arch,warp", TARGETS, ids=TARGET_IDS)
def test_layout_warps_differing_from_num_warps_names_both_counts_and_the_target(
        platform, arch, warp):
    with pytest.raises(ValueError) as error:
        capture_one(lambda x: jtr.triton_call(
            x, x.size, kernel=gk.copy_kernel, out_shape=x, grid=(4,), num_warps=8,
            BLOCK=1024, WARP_SIZE=warp, NUM_WARPS=4), VECTOR, platform=platform, arch=arch)
    message = str(error.value)
    assert "4 warps per CTA" in message
    assert f"num_warps=8 on target {arch}" in message
    assert RuntimeError in gluon_utils.cause_types(error.value)  # Triton's verifier error


def test_layouts_are_read_from_slice_parents_and_counted_over_every_dimension():
    text = ("#ttg.slice<{dim = 1, parent = #ttg.blocked<{sizePerThread = [1, 4], "
            "threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>}>")
    message = str(_errors.layout_error(lambda: None, text, warp_size=64, num_warps=8,
                                       target="gfx942"))
    assert "has 32 threads per warp" in message and "has 4 warps per CTA" in message


def test_rejected_module_without_readable_layouts_still_names_the_launch():
    error = _errors.layout_error(lambda: None, None, warp_size=64, num_warps=4, target="gfx942")
    assert "gfx942 (warp size 64, num_warps=4)" in str(error)


# Autotuned Gluon kernels.

def _autotuned(configs):
    return triton.autotune(configs=configs, key=["n"])(gk.copy_kernel)


@pytest.mark.parametrize("platform,arch,warp", TARGETS, ids=TARGET_IDS)
def test_autotuned_gluon_kernel_compiles_each_config_with_its_num_warps(platform, arch,
                                                                       warp):
    kernel = _autotuned([
        triton.Config({"BLOCK": 1024, "NUM_WARPS": 4}, num_warps=4),
        triton.Config({"BLOCK": 2048, "NUM_WARPS": 8}, num_warps=8),
    ])
    lowered = capture_one(lambda x: jtr.triton_call(
        x, x.size, kernel=kernel, out_shape=x,
        grid=lambda meta: (triton.cdiv(x.size, meta["BLOCK"]),), WARP_SIZE=warp),
        VECTOR, platform=platform, arch=arch)
    assert [k.num_warps for k in lowered.kernels] == [4, 8]
    configs = _proto.decode(lowered.opaque).autotuned_kernel_call.configs
    assert [c.kernel_call.kernel.num_warps for c in configs] == [4, 8]
    assert [c.kernel_call.grid_0 for c in configs] == [4, 2]


def test_autotune_config_whose_num_warps_differs_from_its_layout_is_refused():
    kernel = _autotuned([
        triton.Config({"BLOCK": 1024, "NUM_WARPS": 4}, num_warps=4),
        triton.Config({"BLOCK": 2048, "NUM_WARPS": 4}, num_warps=8),
    ])
    with pytest.raises(ValueError, match=r"4 warps per CTA, but the call launches num_warps=8"):
        capture_one(lambda x: jtr.triton_call(x, x.size, kernel=kernel, out_shape=x, grid=(4,),
                                              WARP_SIZE=64), VECTOR, platform="rocm", arch="gfx942")


# The example.

@pytest.mark.parametrize("platform,arch,warp", TARGETS, ids=TARGET_IDS)
def test_example_describes_its_launch_for_each_target(platform, arch, warp):
    line = gluon_utils.load_example().describe_launch(platform, arch, n=4096)
    assert line.startswith(f"{arch:7s} add_kernel: grid=(4, 1, 1), num_warps=4 x warp {warp}")
