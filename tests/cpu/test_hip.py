"""The ROCm path without an AMD GPU: real HSACO, lowering for `rocm`, delivery modes, prewarm."""

import os
import re
import threading
import time
import warnings

import jax
import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.backends.hip import _hip_files
from jax_triton_rocm.base import _env
from jax_triton_rocm.routes.jaxlib import _jaxlib_call, _proto
from tests.support import kernels
from tests.support.binary_utils import check_hsaco
from tests.support.lowering_utils import (ROCM_FEATURES, capture_one, captured_lowerings,
                                          lower_for, lower_one, run_at_once, spec)

X = spec((4096,), jnp.float32)
# The prewarm's real launch, kept before the `two_devices` fixture stands in for it.
needs_embedded = pytest.mark.skipif(
    not ROCM_FEATURES.module_image,
    reason=f"the jaxlib here ({ROCM_FEATURES.detected_from}) predates module_image (0.11.1)")


@pytest.fixture(autouse=True)
def fresh_state(monkeypatch, fresh_caches):
    monkeypatch.delenv(_env.ENV_HSACO_DELIVERY, raising=False)
    monkeypatch.delenv(_env.ENV_PREWARM, raising=False)


def _kernel_of(call):
    return call.message.kernel_call.kernel


@pytest.mark.parametrize("arch", ["gfx942", "gfx950", "gfx90a"])
def test_real_hsaco_for_the_arch(arch, monkeypatch):
    monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, "path")
    kernel = _kernel_of(lower_one(kernels.add, X, X, platform="rocm", arch=arch))
    with open(kernel.ptx, "rb") as f:
        check_hsaco(f.read(), arch)


def test_a_kernel_of_a_250_character_name_is_delivered_by_path(monkeypatch):
    monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, "path")
    name = "copy_" + "x" * 245
    copy = kernels.kernel_from_source(
        f"@triton.jit\n"
        f"def {name}(x_ptr, out_ptr):\n"
        f"    offsets = tl.program_id(0) * 256 + tl.arange(0, 256)\n"
        f"    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))\n", name)
    kernel = _kernel_of(lower_one(
        lambda x: jtr.triton_call(x, kernel=copy, out_shape=x, grid=(16,)), X, platform="rocm"))
    assert kernel.kernel_name == name
    file_name = os.path.basename(kernel.ptx)
    assert file_name.startswith(name[:31]) and len(file_name) < 80, file_name
    with open(kernel.ptx, "rb") as f:
        check_hsaco(f.read(), "gfx942")


@needs_embedded
@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_embedded_delivery_carries_the_hsaco_in_the_opaque(arch):
    call = lower_one(kernels.add, X, X, platform="rocm", arch=arch)
    kernel = _kernel_of(call)
    check_hsaco(kernel.module_image.object_file, arch)
    assert kernel.module_image.kernel_name == "add_kernel"
    assert kernel.ptx == _proto.module_image_ptx(kernel.module_image.object_file)
    assert not os.path.exists(kernel.ptx)


@needs_embedded
def test_same_named_kernels_with_different_hsaco_get_different_ptx_fields():
    # jaxlib's module cache is keyed on the name and the ptx field, not on the binary.
    small, large = (_kernel_of(lower_one(lambda x, y, b=block: kernels.add(x, y, block=b), X, X,
                                         platform="rocm")) for block in (256, 1024))
    assert small.kernel_name == large.kernel_name
    assert small.module_image.object_file != large.module_image.object_file
    assert small.ptx != large.ptx


def test_decodes_to_the_intended_kernel_grid_and_parameters():
    call = lower_one(lambda x, y: kernels.add(x, y, block=1024), X, X, platform="rocm")
    kernel_call = call.message.kernel_call
    assert kernel_call.kernel.kernel_name == "add_kernel"
    assert kernel_call.kernel.num_warps == 4
    assert kernel_call.kernel.compute_capability == 94
    assert (kernel_call.grid_0, kernel_call.grid_1, kernel_call.grid_2) == (4, 1, 1)
    assert [p.WhichOneof("value") for p in kernel_call.parameters] == ["array", "array", "i32",
                                                                       "array"]
    assert call.target == "triton_kernel_call_ffi"


def test_default_delivery_is_the_best_the_plugin_supports():
    kernel = _kernel_of(lower_one(kernels.add, X, X, platform="rocm"))
    assert kernel.HasField("module_image") == ROCM_FEATURES.module_image


def test_path_delivery_writes_one_file_per_kernel_in_the_process_folder(monkeypatch):
    monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, "path")
    first = _kernel_of(lower_one(kernels.add, X, X, platform="rocm"))
    again = _kernel_of(lower_one(kernels.add, X, X, platform="rocm"))
    other = _kernel_of(lower_one(lambda x, y: kernels.add(x, y, block=128), X, X,
                                 platform="rocm"))
    assert not first.HasField("module_image")
    assert os.path.dirname(first.ptx) == _hip_files.HSACO_FOLDER.path()
    assert first.ptx == again.ptx, "the same kernel call must give the same opaque"
    assert other.ptx != first.ptx
    check_hsaco(open(other.ptx, "rb").read(), "gfx942")


def test_unknown_delivery_mode_is_refused(monkeypatch):
    monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, "carrier-pigeon")
    with pytest.raises(ValueError, match=r"JAX_TRITON_ROCM_HSACO_DELIVERY='carrier-pigeon'"):
        lower_for(kernels.add, X, X, platform="rocm")


def test_embedded_forced_on_a_plugin_without_module_image_is_refused(monkeypatch):
    import dataclasses

    old = dataclasses.replace(ROCM_FEATURES, plugin="jax_rocm7_plugin", module_image=False,
                              detected_from="jax-rocm7-plugin release 0.10.2")
    monkeypatch.setattr(_vendors, "plugin_features", lambda platform: old)
    monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, "embedded")
    with pytest.raises(ValueError, match=r"does not read TritonKernel.module_image"):
        lower_for(kernels.add, X, X, platform="rocm")


def _export_add():
    with jtr.target_arch(rocm="gfx942"):
        return jax.export.export(jax.jit(kernels.add), platforms=("rocm",),
                                 disabled_checks=jtr.disabled_checks())(X, X)


def _exported_kernel(exported):
    class Lowered:  # what `kernel_calls` reads of a `jax.stages.Lowered`
        def compiler_ir(self, dialect):
            del dialect
            from jax._src.interpreters import mlir
            from jax._src.lib.mlir import ir

            with mlir.make_ir_context():
                return ir.Module.parse(exported.mlir_module())

    [call] = jtr.kernel_calls(Lowered())
    return _kernel_of(call)


def test_an_export_under_path_delivery_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, "path")
    lower_one(kernels.add, X, X, platform="rocm")  # a plan with a path, kept for the call
    with pytest.raises(ValueError, match=r"jax.export of a ROCm kernel call with "
                                         r"JAX_TRITON_ROCM_HSACO_DELIVERY=path: .*temporary "
                                         r"file.*Unset JAX_TRITON_ROCM_HSACO_DELIVERY, or set "
                                         r"JAX_TRITON_ROCM_HSACO_DELIVERY=embedded"):
        _export_add()


@needs_embedded
def test_an_export_carries_the_hsaco_itself():
    kernel = _exported_kernel(_export_add())
    assert kernel.HasField("module_image")
    check_hsaco(kernel.module_image.object_file, "gfx942")
    assert not os.path.isabs(kernel.ptx)


def test_an_export_for_a_plugin_without_module_image_is_refused(monkeypatch):
    import dataclasses

    old = dataclasses.replace(ROCM_FEATURES, plugin="jax_rocm7_plugin", module_image=False,
                              detected_from="jax-rocm7-plugin release 0.10.2")
    monkeypatch.setattr(_vendors, "plugin_features", lambda platform: old)
    with pytest.raises(ValueError, match=r"jax.export of a ROCm kernel call: the ROCm plugin "
                                         r"\(jax-rocm7-plugin release 0.10.2\) does not read "
                                         r"TritonKernel.module_image.*Upgrade jax"):
        _export_add()


def test_amd_knobs_reach_the_compiler_not_the_kernel():
    lowered = capture_one(lambda x, y: kernels.add(x, y, waves_per_eu=2, matrix_instr_nonkdim=16,
                                                   kpack=2), X, X, platform="rocm")
    metadata = lowered.kernels[0].metadata
    assert (metadata["waves_per_eu"], metadata["matrix_instr_nonkdim"], metadata["kpack"]) == \
        (2, 16, 2)
    assert len(_proto.decode(lowered.opaque).kernel_call.parameters) == 4


@pytest.mark.parametrize("dtype,triton_type", [(jnp.float8_e4m3fnuz, "fp8e4b8"),
                                               (jnp.float8_e5m2fnuz, "fp8e5b16")])
def test_fp8_fnuz_dtypes_map_to_tritons_types(dtype, triton_type):
    x = spec((4096,), dtype)
    kernel = capture_one(kernels.copy, x, platform="rocm").kernels[0]
    assert f"!tt.ptr<{'f8E4M3FNUZ' if '4' in triton_type else 'f8E5M2FNUZ'}>" in kernel.ttir


def test_wave32_launches_the_block_the_kernel_was_built_for():
    call = lower_one(lambda x, y: kernels.add(x, y, num_warps=4), X, X, platform="rocm",
                     arch="gfx1100")
    # 4 warps of 32 threads: jaxlib's `num_warps * 64` must come to 128 threads.
    assert _kernel_of(call).num_warps == 2


def test_wave32_with_an_odd_warp_count_is_refused():
    with pytest.raises(ValueError, match=r"wave32 with num_warps=1 \(32 threads\).*even num_warps"):
        lower_for(lambda x, y: kernels.add(x, y, num_warps=1), X, X, platform="rocm",
                  arch="gfx1100")


class RecordingLaunch:
    """Stands in for the prewarm's device launch: records, and can be slow or fail."""

    def __init__(self, delay=0.0, fail=False):
        self.delay, self.fail = delay, fail
        self.calls = []
        self.active = 0
        self.max_active = 0
        self.lock = threading.Lock()

    def __call__(self, lowered, in_avals, out_avals, emit, platform="rocm"):
        with self.lock:
            self.calls.append((lowered, in_avals, out_avals))
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        time.sleep(self.delay)
        with self.lock:
            self.active -= 1
        if self.fail:
            raise RuntimeError("simulated launch failure")


@pytest.fixture
def two_devices(monkeypatch):
    monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, "path")
    monkeypatch.setattr(_hip_files, "local_device_count", lambda: 2)
    launch = RecordingLaunch(delay=0.3)
    monkeypatch.setattr(_hip_files, "launch_for_prewarm", launch)
    return launch


def _lower_in_threads(fns):
    run_at_once([lambda fn=fn: lower_for(fn, X, X, platform="rocm") for fn in fns])


def test_prewarm_launches_a_new_path_delivered_kernel_once(two_devices):
    lower_for(kernels.add, X, X, platform="rocm")
    lower_for(kernels.add, X, X, platform="rocm")
    assert len(two_devices.calls) == 1


def test_eight_threads_lowering_one_kernel_give_one_launch(two_devices):
    _lower_in_threads([kernels.add] * 8)
    assert len(two_devices.calls) == 1


def test_eight_threads_on_eight_kernels_do_not_serialize(two_devices):
    fns = [lambda x, y, b=block: kernels.add(x, y, block=b)
           for block in (16, 32, 64, 128, 256, 512, 1024, 2048)]
    _lower_in_threads(fns)
    assert len(two_devices.calls) == 8
    assert two_devices.max_active > 1


def test_a_failing_prewarm_warns_once(two_devices):
    two_devices.fail = True
    two_devices.delay = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lower_for(kernels.add, X, X, platform="rocm")
        lower_for(kernels.add, X, X, platform="rocm")
    prewarm_warnings = [w for w in caught if "prewarming kernel call" in str(w.message)]
    assert len(prewarm_warnings) == 1
    assert len(two_devices.calls) == 1


def test_prewarm_can_be_turned_off(two_devices, monkeypatch):
    monkeypatch.setenv(_env.ENV_PREWARM, "0")
    lower_for(kernels.add, X, X, platform="rocm")
    assert two_devices.calls == []


def test_no_prewarm_with_one_device(two_devices, monkeypatch):
    monkeypatch.setattr(_hip_files, "local_device_count", lambda: 1)
    lower_for(kernels.add, X, X, platform="rocm")
    assert two_devices.calls == []


@needs_embedded
def test_no_prewarm_for_embedded_delivery(two_devices, monkeypatch):
    monkeypatch.setenv(_env.ENV_HSACO_DELIVERY, "embedded")
    lower_for(kernels.add, X, X, platform="rocm")
    assert two_devices.calls == []


def _prewarm_module(lowered, in_avals, out_avals):
    """The prewarm's own program for `lowered`, lowered for rocm on the CPU."""
    with jtr.target_arch(rocm="gfx942"):
        program = _hip_files.prewarm_program(lowered, in_avals, out_avals, _jaxlib_call.emit)
        return jax.jit(program).trace().lower(lowering_platforms=("rocm",))


def test_prewarm_launch_reuses_the_encoded_call(two_devices):
    with captured_lowerings() as emitted:
        lower_for(kernels.add, X, X, platform="rocm")
    (real,) = emitted
    assert [lowered for lowered, _, _ in two_devices.calls] == [real]
    assert real.calls[0].kernel.ptx.endswith(".hsaco")
    _, in_avals, out_avals = two_devices.calls[0]
    launched = jtr.kernel_calls(_prewarm_module(real, in_avals, out_avals))
    assert [(c.target, c.opaque) for c in launched] == [(real.custom_call_name, real.opaque)]


def test_prewarm_of_an_in_place_kernel_keeps_its_alias_and_zero_fills_the_inputs(two_devices):
    def inplace(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernels.add_inplace_kernel, out_shape=x,
                               grid=(16,), BLOCK=256, input_output_aliases={0: 0})

    lower_for(inplace, X, X, platform="rocm")
    lowered, in_avals, out_avals = two_devices.calls[0]
    text = _prewarm_module(lowered, in_avals, out_avals).as_text()
    call_line = next(line for line in text.splitlines() if lowered.custom_call_name in line)
    # The kernel reads its output, which is input 0's buffer: that must be zeros, not garbage.
    assert "output_operand_aliases" in call_line and "operand_index = 0" in call_line, call_line
    definitions = dict(re.findall(r"^\s*(%\w+) = (.*)$", text, re.M))

    def is_zeros(value):
        definition = definitions[value]
        if definition.startswith("stablehlo.broadcast_in_dim"):
            return is_zeros(re.search(r"broadcast_in_dim (%\w+)", definition).group(1))
        return re.fullmatch(r"stablehlo\.constant dense<0\.0+e\+00> .*", definition) is not None

    operands = re.search(r"custom_call @\S+\(([^)]*)\)", call_line).group(1).split(", ")
    assert len(operands) == 2 and all(map(is_zeros, operands)), text


def test_a_missing_triton_backend_names_what_to_install(monkeypatch):
    """Importing a backend module imports Triton's backend for it; where that is missing, the
    ImportError names the backend and the install."""
    import sys

    monkeypatch.setitem(sys.modules, "triton.backends.amd.compiler", None)
    with pytest.raises(ImportError, match=r"has no 'amd' backend, which lowering for platform "
                                          r"'rocm' needs .*Install a Triton build for ROCM"):
        _vendors.triton_compiler("rocm")
    assert _vendors.triton_compiler("cuda").__name__ == "triton.backends.nvidia.compiler"
