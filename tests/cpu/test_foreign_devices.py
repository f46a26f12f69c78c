"""`triton_call(..., compute_capability=...)` where the devices are of another architecture.

A binary loads only on its own architecture, and PTX on its own and newer ones (unless it uses
an architecture's own features, `sm_90a`). So a call compiled for another architecture than its
devices' carries its PTX, which jaxlib's ptxas builds for the devices, or is refused at lowering
where not even the PTX can run there. The devices are those named by `target_arch`, else the
computation's (stood in here, on the CPU, by patching the context's device lookup), except for
`jax.export`, whose result runs elsewhere.
"""

import contextlib
import re
import types

import jax
import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.routes._arch import GpuArch
from jax_triton_rocm.backends.hip import _hip
from jax_triton_rocm.routes import _arch
from tests.support import kernels
from tests.support.lowering_utils import captured_lowerings, spec

X = spec((4096,), jnp.float32)


@pytest.fixture
def devices(monkeypatch, fresh_caches):
    """Makes lowerings see CUDA devices of the compute capabilities the test appends ("9.0"),
    and no other (a GPU machine's own included)."""
    found = []

    def context_devices(platform, module_context):
        del platform, module_context
        return ([types.SimpleNamespace(platform="cuda", compute_capability=c) for c in found],
                "the computation's devices")

    monkeypatch.setattr(_arch, "_devices", context_devices)
    return found


def _add(compute_capability):
    return lambda x, y: kernels.add(x, y, compute_capability=compute_capability)


def _lowered(compute_capability, **named):
    """The `LoweredCall` of the add kernel compiled for `compute_capability`, lowered for CUDA
    under `target_arch(**named)` (nothing named: the devices decide)."""
    named_archs = jtr.target_arch(**named) if named else contextlib.nullcontext()
    with captured_lowerings() as lowered, named_archs:
        jax.jit(_add(compute_capability)).trace(X, X).lower(lowering_platforms=("cuda",))
    (call,) = lowered
    return call


def _ptx_target(call) -> str:
    return re.search(r"^\.target\s+(\S+)", call.calls[0].kernel.ptx, re.M).group(1)


def _carries_its_own_binary(call) -> bool:
    """Whether the call carries what it carries with no devices to serve: for sm_80, the CUBIN
    where the plugin reads `module_image` (jax 0.11.1+), else the PTX; capability 80 either way."""
    image = call.calls[0].kernel
    if image.compute_capability != 80:
        return False
    if call.features.module_image:
        return image.object_file is not None
    return _ptx_target(call) == "sm_80"


def test_an_older_target_than_the_devices_carries_its_ptx_for_their_capability(devices):
    devices.append("9.0")
    call = _lowered(80)
    image = call.calls[0].kernel
    assert call.arch.arch == "sm_80" and _ptx_target(call) == "sm_80"
    assert image.object_file is None  # no sm_80 CUBIN: it cannot load on sm_90
    assert image.compute_capability == 90  # what jaxlib's ptxas builds it for


def test_the_named_architecture_stands_for_the_devices(devices):
    call = _lowered(80, cuda="sm_90")  # no device at all: the named one is where it runs
    assert _ptx_target(call) == "sm_80" and call.calls[0].kernel.compute_capability == 90


def test_the_devices_own_architecture_keeps_the_binary(devices):
    devices.append("8.0")
    assert _carries_its_own_binary(_lowered(80))


def test_without_devices_the_call_cross_compiles_for_its_own_target(devices):
    assert _carries_its_own_binary(_lowered(80))


def test_a_newer_target_than_the_devices_is_refused_at_lowering(devices):
    devices.append("8.0")
    with pytest.raises(ValueError, match=r"compiled for sm_90 \(from compute_capability=\), but "
                                         r"the computation runs on sm_80 devices.*"
                                         r"compute_capability=80"):
        _lowered(90)


def test_an_architecture_specific_ptx_is_refused_on_newer_devices(devices):
    devices.append("10.0")
    with pytest.raises(ValueError, match=r"PTX \(\.target sm_90a\) can run there"):
        _lowered(90)


def test_an_export_keeps_the_binary_for_the_target_it_names(devices):
    from jax import export

    devices.append("9.0")
    with captured_lowerings() as lowered:
        export.export(jax.jit(_add(80)), platforms=["cuda"], disabled_checks=[
            export.DisabledSafetyCheck.custom_call("triton_kernel_call_ffi")])(X, X)
    assert _carries_its_own_binary(lowered[0])


def test_a_hsaco_for_another_architecture_is_refused():
    with pytest.raises(ValueError, match="compiled for gfx942 .* runs on gfx950 devices"):
        _hip.BACKEND.code_for_devices(types.SimpleNamespace(name="k"),
                                      GpuArch("rocm", "gfx942", "test"),
                                      GpuArch("rocm", "gfx950", "test"))
