"""Launch overhead, first-call latency, bandwidth and re-lowering cost of jax_triton_rocm calls.

`python benchmarks/overhead.py` (on a GPU machine) prints, from one run (the machines are shared
and noisy: compare within a run, not across):

1. Per-kernel time in one jitted chain of 200 small adds (1024 floats), with XLA's command
   buffers on and off (`--xla_gpu_enable_command_buffer=` in XLA_FLAGS; each setting runs in a
   fresh process, as XLA reads its flags once): XLA's own Triton custom call (`xla_native=True`),
   jaxlib's typed-FFI target (the default), the legacy target (forced), XLA's own add unfused
   (`lax.optimization_barrier` between adds) and fused (one kernel for the chain), and, where
   PyTorch with CUDA is installed, the same Triton kernel from PyTorch eager and replayed from a
   CUDA graph. Ratios are to XLA's unfused add of the same setting; the goal for the native
   route is 1.15.
2. Building an executable and its first call (module load + launch; the Triton compile is done
   before): CUBIN carried in `module_image` (jax 0.11.1+) against PTX only (jaxlib runs ptxas
   at load), each on fresh kernels.
3. Bandwidth of a 1 GiB float32 add: the Triton kernel against XLA's add.
4. Re-lowering, at the same shape and at a new one (`relower.py`).

`python benchmarks/overhead.py relower` runs anywhere (no GPU): `relower.py`'s report (the time
to lower a jitted function again, its kernel compiled, at the same shape and at new ones,
against lowering XLA's own add).

Without a CUDA or ROCm device the default mode prints one line saying so and exits with status 1.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import triton

import jax_triton_rocm as jtr
from jax_triton_rocm import _compat

import relower
from _common import (CHAIN_LENGTH, add_kernel, chain_per_kernel_us, forced_features,
                     gpu_missing, in_fresh_process, legacy_target, median_seconds, native_add,
                     platform, print_rows, triton_add, xla_add, xla_add_unfused)

NATIVE_GOAL = 1.15


def torch_chain_per_kernel_us(length=CHAIN_LENGTH) -> dict[str, float]:
    """The same Triton kernel launched from PyTorch: eager, and replayed from a CUDA graph.

    Empty where PyTorch (with a GPU) is not installed.
    """
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    x = torch.ones(1024, device="cuda")
    out = torch.empty_like(x)

    def chain():
        for _ in range(length):
            add_kernel[(1,)](x, x, x.numel(), out, BLOCK=1024)

    def timed(run, repeats=30):
        run()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            run()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        return statistics.median(times) / length * 1e6

    eager = timed(chain)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        chain()  # warm up on the capture stream
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            chain()
    return {"PyTorch eager": eager, "PyTorch CUDA graph": timed(graph.replay)}


def chain_rows() -> dict[str, float]:
    """Per-kernel µs of every path in this process (its XLA flags already set)."""
    x = jnp.ones((1024,), jnp.float32)
    emitted = jax.jit(native_add).lower(x, x).as_text()
    if "__gpu$xla.gpu.triton" not in emitted:  # a silent fallback would mislabel the row
        raise RuntimeError("the add kernel did not take XLA's Triton call here; the "
                           "'jax_triton_rocm' logger says why at DEBUG level")
    rows = {"XLA Triton call (xla_native=True)": chain_per_kernel_us(native_add),
            "jaxlib FFI target (default)": chain_per_kernel_us(triton_add)}
    with legacy_target():
        rows["jaxlib legacy target"] = chain_per_kernel_us(triton_add)
    rows["XLA add, unfused"] = chain_per_kernel_us(xla_add_unfused)
    rows["XLA add, fused by XLA"] = chain_per_kernel_us(xla_add)
    if platform() == "cuda":
        rows.update(torch_chain_per_kernel_us())
    return rows


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
    seconds = median_seconds(jax.jit(add), x, y, repeats=20)
    return 3 * n * 4 / seconds / 1e12


def gpu_report(platform_name: str) -> None:
    features = _compat.plugin_features(platform_name)
    print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}; "
          f"Triton {triton.__version__}; plugin: {features}")
    # The chains run first, in their own processes, while this one holds no GPU buffers.
    chains = {setting: in_fresh_process("overhead.py", ["chain-worker"], setting)
              for setting in (True, False)}
    on, off = chains[True], chains[False]
    base_on, base_off = on["XLA add, unfused"], off["XLA add, unfused"]
    print(f"\nchain of {CHAIN_LENGTH} adds, µs per kernel (ratio to XLA's unfused add):")
    print_rows([(name, on[name], on[name] / base_on, off.get(name, float("nan")),
                 off.get(name, float("nan")) / base_off) for name in on],
               ("cmdbuf on", "ratio", "cmdbuf off", "ratio"))
    native = "XLA Triton call (xla_native=True)"
    print(f"native route / XLA's unfused add: {on[native] / base_on:.2f} (command buffers on), "
          f"{off[native] / base_off:.2f} (off); goal {NATIVE_GOAL}")

    rows = []
    if features.module_image:
        jtr.clear_caches()
        image_ms = load_and_first_call_ms(num_warps=4)
        jtr.clear_caches()
        with forced_features(module_image=False):
            ptx_ms = load_and_first_call_ms(num_warps=2)
        rows.append(("build + first call, ms: CUBIN in module_image", image_ms, image_ms / ptx_ms))
        rows.append(("build + first call, ms: PTX only (ptxas at load)", ptx_ms, 1.0))
    triton_bw = bandwidth_tb_s(triton_add)
    native_bw = bandwidth_tb_s(native_add)
    xla_bw = bandwidth_tb_s(xla_add)
    rows.append(("1 GiB add, TB/s: Triton, jaxlib FFI target", triton_bw, triton_bw / xla_bw))
    rows.append(("1 GiB add, TB/s: Triton, XLA Triton call", native_bw, native_bw / xla_bw))
    rows.append(("1 GiB add, TB/s: XLA add", xla_bw, 1.0))
    print()
    print_rows(rows)
    print()
    relower.print_report()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", default="gpu", choices=("gpu", "relower",
                                                                   "chain-worker"),
                        help="gpu (default): the whole report, on a GPU; relower: re-lowering "
                             "cost only, anywhere; chain-worker: one process's chain figures "
                             "as JSON (used by gpu)")
    mode = parser.parse_args(argv).mode
    if mode == "relower":
        relower.print_report()
        return 0
    if gpu_missing("overhead.py"):
        return 1
    if mode == "chain-worker":
        print(json.dumps(chain_rows()))
        return 0
    gpu_report(platform())
    return 0


if __name__ == "__main__":
    sys.exit(main())
