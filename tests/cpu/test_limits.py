"""Launch limits per target: refused at lowering with the setting, the target and the limit."""

import logging

import jax.numpy as jnp
import pytest
import triton

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _cuda
from jax_triton_rocm.backends.hip import _hip
from jax_triton_rocm.routes import _arch
from tests.support import kernels
from tests.support.lowering_utils import capture_one, lower_for, spec

X = spec((4096,), jnp.float32)
A = spec((128, 128), jnp.float16)


@pytest.fixture(autouse=True)
def fresh_cache():
    jtr.clear_caches()
    yield
    jtr.clear_caches()


@pytest.mark.parametrize("platform,arch,num_warps,threads,limit_warps", [
    ("cuda", "sm_90", 64, 2048, 32),
    ("rocm", "gfx942", 32, 2048, 16),
])
def test_too_many_warps_names_num_warps_the_target_and_the_limit(platform, arch, num_warps,
                                                                   threads, limit_warps):
    with pytest.raises(ValueError, match=(
            rf"add_kernel cannot launch: num_warps={num_warps} makes blocks of {threads} threads "
            rf".* on {arch}, whose limit is 1024; use num_warps={limit_warps} or fewer")):
        lower_for(lambda x, y: kernels.add(x, y, num_warps=num_warps), X, X,
                  platform=platform, arch=arch)


def test_wave32_targets_take_twice_the_warps_of_wave64():
    call = capture_one(lambda x, y: kernels.add(x, y, num_warps=32), X, X, platform="rocm",
                       arch="gfx1100")
    assert call.kernels[0].num_warps == 32


@pytest.mark.parametrize("platform,arch,table", [("cuda", "sm_90", (_cuda, "MAX_SHARED_BYTES")),
                                                 ("rocm", "gfx942", None)])
def test_more_shared_memory_than_the_target_allows_names_the_size(platform, arch, table,
                                                                  monkeypatch):
    # The matmul stages its tiles through shared memory; pretend the target has 1 KiB.
    if table is None:
        monkeypatch.setattr(_hip, "DEFAULT_MAX_SHARED_BYTES", 1024)
    else:
        module, name = table
        monkeypatch.setitem(getattr(module, name), 90, 1024)
    with pytest.raises(ValueError, match=(rf"matmul_kernel cannot launch: the kernel needs \d+ "
                                          rf"bytes of shared memory per block, and {arch} allows "
                                          rf"1024")):
        lower_for(kernels.matmul, A, A, platform=platform, arch=arch)


def test_shared_memory_limits_by_target():
    limits = {arch: lowering.answers(target).launch_site.limits.max_shared_bytes
              for arch, lowering, target in [
                  ("sm_80", _cuda.BACKEND, _arch.GpuArch("cuda", "sm_80", "test")),
                  ("sm_90", _cuda.BACKEND, _arch.GpuArch("cuda", "sm_90", "test")),
                  ("gfx942", _hip.BACKEND, _arch.GpuArch("rocm", "gfx942", "test")),
                  ("gfx950", _hip.BACKEND, _arch.GpuArch("rocm", "gfx950", "test")),
              ]}
    assert limits == {"sm_80": 163 * 1024, "sm_90": 227 * 1024, "gfx942": 64 * 1024,
                      "gfx950": 160 * 1024}


def _tuned(warps):
    return triton.autotune(
        configs=[triton.Config({"BLOCK": 256}, num_warps=w) for w in warps], key=["n"],
    )(kernels.add_kernel)


def _tuned_add(kernel):
    return lambda x, y: jtr.triton_call(x, y, x.size, kernel=kernel, out_shape=x,
                                        grid=lambda meta: (triton.cdiv(4096, meta["BLOCK"]),))


def test_autotune_configs_that_cannot_launch_are_dropped_with_a_debug_log(caplog):
    with caplog.at_level(logging.DEBUG, logger="jax_triton_rocm"):
        call = capture_one(_tuned_add(_tuned((4, 64, 8))), X, X, platform="cuda")
    assert [k.num_warps for k in call.kernels] == [4, 8]
    assert any("num_warps: 64" in r.getMessage() and "dropped" in r.getMessage()
               for r in caplog.records)


def test_autotuned_call_with_no_launchable_config_names_every_config():
    with pytest.raises(ValueError, match=r"no autotune config can launch\. config \(.*num_warps: "
                                         r"64.*\): num_warps=64 .*; config \(.*num_warps: 128"):
        lower_for(_tuned_add(_tuned((64, 128))), X, X, platform="cuda")
