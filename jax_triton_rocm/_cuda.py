"""NVIDIA: Triton to CUBIN (or PTX), as jaxlib's CUDA plugin loads them.

Where the plugin reads `module_image` (0.11.1+), the CUBIN Triton built travels there and jaxlib
loads it as is (no ptxas at load time, and jaxlib's older ptxas never meets newer PTX); `ptx`
then holds a digest of the CUBIN, exactly as the ROCm encoding does, so every CUDA launch also
exercises the ROCm encoding. Older plugins get the PTX text in `ptx`.

Importing this module imports Triton's NVIDIA backend, so a broken one fails here, when the
package is set up for CUDA, and not at the first lowering.
"""

from __future__ import annotations

from typing import Any

from jax_triton_rocm import _compat, _configs, _target
from jax_triton_rocm._compile import CompiledKernel
from jax_triton_rocm._limits import LaunchLimits
from jax_triton_rocm._lowering import VendorLowering

_backend = _compat.import_triton_backend("cuda")

from triton.backends.compiler import GPUTarget  # noqa: E402  (after the checked import)

WARP_SIZE = 32

# Dynamic shared memory a block may opt in to, by compute capability (CUDA C++ Programming
# Guide, "Technical Specifications per Compute Capability"). jaxlib refuses more at launch.
MAX_SHARED_BYTES = {
    70: 96 * 1024, 72: 96 * 1024, 75: 64 * 1024,
    80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024,
    90: 227 * 1024, 100: 227 * 1024, 101: 227 * 1024, 103: 227 * 1024, 110: 227 * 1024,
    120: 99 * 1024, 121: 99 * 1024,
}


class CudaLowering(VendorLowering):
    platform = "cuda"
    binary_key = "cubin"
    asm_key = "ptx"
    vendor_options = ("maxnreg",)

    def triton_target(self, target: _target.Target) -> Any:
        return GPUTarget("cuda", target.cuda_capability, WARP_SIZE)

    def backend_class(self) -> Any:
        return _backend.CUDABackend

    def explicit_target(self, params: dict[str, Any]) -> _target.Target | None:
        capability = params.get("compute_capability")
        if capability is not None:
            arch = _target.normalize_arch("cuda", capability, what="compute_capability")
            return _target.Target("cuda", arch, "compute_capability=")
        return super().explicit_target(params)

    def compile_options(self, target: _target.Target, config: _configs.LaunchConfig,
                        *, enable_fp_fusion: bool, debug: bool) -> dict[str, Any]:
        if config.num_ctas > 1 and target.cuda_capability < 90:
            raise ValueError(
                f"num_ctas={config.num_ctas} needs thread-block clusters (sm_90 or newer); the "
                f"target is {target.arch} (from {target.source}). Use num_ctas=1.")
        return super().compile_options(target, config, enable_fp_fusion=enable_fp_fusion,
                                       debug=debug)

    def embeds_binary(self, features: _compat.PluginFeatures) -> bool:
        return features.module_image

    def ptx_field(self, compiled: CompiledKernel) -> str:
        return compiled.asm

    def capability(self, target: _target.Target) -> int:
        return target.cuda_capability

    def launch_limits(self, target: _target.Target) -> LaunchLimits:
        return LaunchLimits(target.arch, WARP_SIZE,
                            max_shared_bytes=MAX_SHARED_BYTES.get(target.cuda_capability),
                            max_grid=(2**31 - 1, 65535, 65535))


LOWERING = CudaLowering()
