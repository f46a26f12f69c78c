"""Launch overhead, first-call latency and bandwidth of kernels called through jax_triton_rocm.

Run on a GPU machine: `python benchmarks/overhead.py`. Prints one table, figures and ratios side
by side from one run (the machines are shared and noisy: compare within a run, not across).
Without a CUDA or ROCm device it prints one line saying so and exits with status 1.

1. Per-kernel time in one jitted chain of 200 small adds (1024 floats): the typed-FFI target
   (what the package emits), the legacy target (forced), and XLA's own add.
2. Building an executable and its first call (module load + launch; the Triton compile is done
   before): CUBIN carried in `module_image` (jax 0.11.1+) against PTX only (jaxlib runs ptxas
   at load), each on fresh kernels.
3. Bandwidth of a 1 GiB float32 add: the Triton kernel against XLA's add.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm import _compat, _lowering


@triton.jit
def add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets,
                                                                                 mask=mask),
             mask=mask)


def triton_add(x, y, block=1024, num_warps=4):
    return jtr.triton_call(x, y, x.size, kernel=add_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, block),), BLOCK=block, num_warps=num_warps)


def _platform() -> str:
    platform = jax.devices()[0].platform
    return {"gpu": "cuda"}.get(platform, platform)


class legacy_target:
    """Makes calls with one kernel take the legacy target (for comparison only)."""

    def __enter__(self):
        self.original = _lowering.emit

        def emit_legacy(ctx, operands, lowered):
            lowered = dataclasses.replace(lowered, custom_call_target=_compat.LEGACY_TARGET)
            return self.original(ctx, operands, lowered)

        _lowering.emit = emit_legacy
        jax.clear_caches()

    def __exit__(self, *exc):
        _lowering.emit = self.original
        jax.clear_caches()


class forced_features:
    """Makes lowerings see a plugin without some feature (for comparison only)."""

    def __init__(self, **changes):
        self.changes = changes

    def __enter__(self):
        self.original = _compat.plugin_features
        real = self.original(_platform())
        forced = dataclasses.replace(real, **self.changes)
        _compat.plugin_features = lambda platform: forced
        jax.clear_caches()

    def __exit__(self, *exc):
        _compat.plugin_features = self.original
        jax.clear_caches()


def _median_seconds(fn, *args, repeats=30):
    fn(*args).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def chain_per_kernel_us(add, length=200):
    @jax.jit
    def chain(x, y):
        for _ in range(length):
            x = add(x, y)
        return x

    x = jnp.ones((1024,), jnp.float32)
    return _median_seconds(chain, x, x) / length * 1e6


def load_and_first_call_ms(num_warps, variants=5):
    """XLA compile + module load + first launch of fresh executables, Triton compile excluded.

    jaxlib loads a kernel's module when the executable is built (the FFI target's instantiate
    step) and caches modules by (name, shared memory, PTX, capability) for the life of the
    process, so each measurement uses its own `num_warps` and BLOCKs: new PTX every time. The
    Triton compile happens in a first lowering, outside the timed region.
    """
    times = []
    x = jnp.ones((1 << 16,), jnp.float32)
    for i in range(variants):
        block = 128 << i
        fn = jax.jit(lambda a, b, block=block: triton_add(a, b, block=block,
                                                           num_warps=num_warps))
        fn.lower(x, x)  # compiles the Triton kernel into the package's cache
        start = time.perf_counter()
        fn.lower(x, x).compile()(x, x).block_until_ready()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def bandwidth_tb_s(add, n=1 << 28):
    x = jnp.ones((n,), jnp.float32)
    y = jnp.ones((n,), jnp.float32)
    seconds = _median_seconds(jax.jit(add), x, y, repeats=20)
    return 3 * n * 4 / seconds / 1e12


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter).parse_args(argv)
    platform = _platform()
    if platform not in ("cuda", "rocm"):
        from jax_triton_rocm import _info

        print(f"benchmarks/overhead.py: needs a CUDA or ROCm GPU, and JAX has none here: "
              f"{_info.no_gpu_reason()}", file=sys.stderr)
        return 1
    features = _compat.plugin_features(platform)
    print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}; "
          f"Triton {triton.__version__}; plugin: {features}")
    rows = []
    ffi_us = chain_per_kernel_us(triton_add)
    with legacy_target():
        legacy_us = chain_per_kernel_us(triton_add)
    xla_us = chain_per_kernel_us(lambda a, b: a + b)
    rows.append(("chain of 200 adds, us/kernel: FFI target", ffi_us, ffi_us / xla_us))
    rows.append(("chain of 200 adds, us/kernel: legacy target", legacy_us, legacy_us / xla_us))
    rows.append(("chain of 200 adds, us/kernel: XLA add (XLA fuses it)", xla_us, 1.0))

    if features.module_image:
        jtr.clear_caches()
        image_ms = load_and_first_call_ms(num_warps=4)
        jtr.clear_caches()
        with forced_features(module_image=False):
            ptx_ms = load_and_first_call_ms(num_warps=2)
        rows.append(("build + first call, ms: CUBIN in module_image", image_ms, image_ms / ptx_ms))
        rows.append(("build + first call, ms: PTX only (ptxas at load)", ptx_ms, 1.0))

    triton_bw = bandwidth_tb_s(triton_add)
    xla_bw = bandwidth_tb_s(lambda a, b: a + b)
    rows.append(("1 GiB add, TB/s: Triton through the bridge", triton_bw, triton_bw / xla_bw))
    rows.append(("1 GiB add, TB/s: XLA add", xla_bw, 1.0))

    width = max(len(r[0]) for r in rows)
    print(f"{'measure':{width}s}  {'value':>9s}  {'ratio':>6s}")
    for name, value, ratio in rows:
        print(f"{name:{width}s}  {value:9.3f}  {ratio:6.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
