"""Which architecture a lowering compiles for: `target_arch`, the environment, the devices."""

import jax
import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env
from jax_triton_rocm.routes import _arch
from tests.support import kernels

X = jax.ShapeDtypeStruct((1024,), jnp.float32)


@pytest.mark.parametrize("kwargs,match", [
    (dict(cuda="sm_9x"), "is not a CUDA architecture"),
    (dict(rocm="mi300"), "is not an AMD GPU architecture"),
    ({}, "needs cuda=... and/or rocm=..."),
])
def test_target_arch_rejects_bad_names(kwargs, match):
    with pytest.raises(ValueError, match=match):
        with jtr.target_arch(**kwargs):
            pass


def test_arch_comes_from_the_devices_lowered_for():
    class FakeDevice:
        platform = "rocm"
        compute_capability = "gfx950"

    class Context:
        class axis_context:
            device_assignment = (FakeDevice(), FakeDevice())

    target = _arch.lowering_arch("rocm", Context())
    assert (target.arch, target.source) == ("gfx950", "the computation's devices")


def test_devices_of_different_archs_are_refused():
    devices = []
    for arch in ("gfx942", "gfx90a"):
        devices.append(type("D", (), {"platform": "rocm", "compute_capability": arch})())

    class Context:
        class axis_context:
            device_assignment = tuple(devices)

    with pytest.raises(ValueError, match=r"different architectures \(gfx90a, gfx942\)"):
        _arch.lowering_arch("rocm", Context())


def test_lowering_for_cuda_without_a_device_says_how_to_name_an_arch():
    if _vendors.plugin_features("cuda") is None:
        pytest.skip("needs jaxlib's CUDA plugin installed without a GPU (without the plugin the "
                    "lowering asks for it first: test_errors)")
    if jax.devices()[0].platform == "gpu":
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match=r"No cuda device.*target_arch\(cuda='sm_90'\)"):
        jax.jit(kernels.add).trace(X, X).lower(lowering_platforms=("cuda",))


class _Device:
    def __init__(self, platform, compute_capability):
        self.platform, self.compute_capability = platform, compute_capability

    def __repr__(self):
        return f"{self.platform}:0"


def _arch_of_devices(platform, *capabilities):
    class Context:
        class axis_context:
            device_assignment = tuple(_Device(platform, c) for c in capabilities)

    return _arch.lowering_arch(platform, Context()).arch


# What XLA's GPU client reports in `compute_capability`: "major.minor" on CUDA; on ROCm the gfx
# name with its target features cut off (xla/pjrt/gpu/se_gpu_pjrt_client.cc, via
# RocmComputeCapability::gfx_version()); the suffixed form is what jaxlib's `get_arch_details`
# and abstract device kinds carry.
@pytest.mark.parametrize("platform,reported,arch", [
    ("cuda", "9.0", "sm_90"), ("cuda", "8.6", "sm_86"), ("cuda", "10.0", "sm_100"),
    ("cuda", "12.0", "sm_120"),
    ("rocm", "gfx942", "gfx942"), ("rocm", "gfx90a", "gfx90a"), ("rocm", "gfx950", "gfx950"),
    ("rocm", "gfx1100", "gfx1100"), ("rocm", "gfx1201", "gfx1201"),
    ("rocm", "gfx942:sramecc+:xnack-", "gfx942"), ("rocm", "gfx90a:sramecc+:xnack-", "gfx90a"),
])
def test_every_form_of_a_devices_compute_capability(platform, reported, arch):
    assert _arch_of_devices(platform, reported) == arch


@pytest.mark.parametrize("platform,reported", [
    ("rocm", "<unknown compute-capability>"), ("rocm", "unknown"), ("rocm", None),
    ("cuda", "<unknown compute-capability>"),
])
def test_a_device_without_a_known_arch_says_how_to_name_one(platform, reported):
    example = "cuda='sm_90'" if platform == "cuda" else "rocm='gfx942'"
    with pytest.raises(ValueError, match=(rf"reports compute_capability={reported!r}, which names "
                                          rf"no {platform} architecture.*target_arch\({example}\)")):
        _arch_of_devices(platform, reported)


def test_the_variable_set_after_it_was_read_is_refused_as_too_late(monkeypatch):
    jtr.register(platforms=("rocm",))
    monkeypatch.setenv(_env.ENV_TARGET_ARCH, "rocm=gfx950")  # the package is imported: late
    with pytest.raises(RuntimeError, match=(r"JAX_TRITON_ROCM_TARGET_ARCH was set to "
                                            r"'rocm=gfx950' too late.*before `import "
                                            r"jax_triton_rocm`.*target_arch\(rocm='gfx950'\)")):
        jax.jit(kernels.add).trace(X, X).lower(lowering_platforms=("rocm",))
    with jtr.target_arch(rocm="gfx950"):  # the way out the error names
        lowered = jax.jit(kernels.add).trace(X, X).lower(lowering_platforms=("rocm",))
    assert jtr.kernel_calls(lowered)[0].message.kernel_call.kernel.compute_capability == 95
