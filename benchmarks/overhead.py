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
4. Re-lowering (as `relower` below).

`python benchmarks/overhead.py relower` runs anywhere (no GPU): the time to lower again a jitted
function whose kernel is cached (JAX's caches cleared, the package's kept), for CUDA under
`target_arch`, against lowering XLA's own add; both Triton routes. The goal is 1.25 at most.

Without a CUDA or ROCm device the default mode prints one line saying so and exits with status 1.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time

# Several processes share the GPU in turn; none may take most of its memory up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402  (after the environment)
import jax.numpy as jnp  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import jax_triton_rocm as jtr  # noqa: E402
from jax_triton_rocm.base import _compat  # noqa: E402
from jax_triton_rocm.lowering import _jaxlib_call

CHAIN_LENGTH = 200
COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer="
NATIVE_GOAL = 1.15
RELOWER_GOAL = 1.25


@triton.jit
def add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets,
                                                                                 mask=mask),
             mask=mask)


def triton_add(x, y, block=1024, num_warps=4, xla_native=False):
    return jtr.triton_call(x, y, x.size, kernel=add_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, block),), BLOCK=block, num_warps=num_warps,
                           xla_native=xla_native)


def native_add(x, y):
    return triton_add(x, y, xla_native=True)


def xla_add(x, y):
    return x + y


def xla_add_unfused(x, y):
    # The barrier keeps XLA from fusing the chain into one kernel: one launch per add.
    return jax.lax.optimization_barrier(x + y)


def _platform() -> str:
    platform = jax.devices()[0].platform
    return {"gpu": "cuda"}.get(platform, platform)


class legacy_target:
    """Makes calls with one kernel take the legacy target (for comparison only)."""

    def __enter__(self):
        self.original = _jaxlib_call.emit

        def emit_legacy(ctx, operands, lowered):
            lowered = dataclasses.replace(lowered, custom_call_target=_compat.LEGACY_TARGET)
            return self.original(ctx, operands, lowered)

        _jaxlib_call.emit = emit_legacy
        jax.clear_caches()

    def __exit__(self, *exc):
        _jaxlib_call.emit = self.original
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


def chain_per_kernel_us(add, length=CHAIN_LENGTH):
    @jax.jit
    def chain(x, y):
        for _ in range(length):
            x = add(x, y)
        return x

    x = jnp.ones((1024,), jnp.float32)
    return _median_seconds(chain, x, x) / length * 1e6


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
    if _platform() == "cuda":
        rows.update(torch_chain_per_kernel_us())
    return rows


def chain_rows_in_subprocess(command_buffers: bool) -> dict[str, float]:
    """`chain_rows` in a fresh process whose XLA_FLAGS turn command buffers on or off."""
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith(COMMAND_BUFFER_FLAG)]
    if not command_buffers:
        flags.append(COMMAND_BUFFER_FLAG)  # an empty list of command types: none
    env = dict(os.environ, XLA_FLAGS=" ".join(flags))
    result = subprocess.run([sys.executable, os.path.abspath(__file__), "chain-worker"],
                            env=env, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"the chain measurement (command buffers "
                           f"{'on' if command_buffers else 'off'}) failed:\n"
                           f"{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


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


def relower_ms(fn, repeats=100) -> float:
    """Median time to trace and lower `fn` for CUDA (sm_90) again, JAX's caches cleared each
    time and the package's kernel cache kept: what every new jit of a cached kernel costs."""
    x = jax.ShapeDtypeStruct((1024,), jnp.float32)
    with jtr.target_arch(cuda="sm_90"):
        jax.jit(fn).trace(x, x).lower(lowering_platforms=("cuda",))  # compiles the kernel
        times = []
        for _ in range(repeats):
            jax.clear_caches()
            start = time.perf_counter()
            jax.jit(fn).trace(x, x).lower(lowering_platforms=("cuda",))
            times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def jax_triton_relower_ms() -> float | str:
    """Re-lowering the same add through jax-triton (0.3), where it is installed and lowers here;
    else why not. jax-triton asks the GPU for its architecture, so this needs one."""
    try:
        import jax_triton

        def add(x, y):
            return jax_triton.triton_call(
                x, y, x.size, kernel=add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                grid=(triton.cdiv(x.size, 1024),), BLOCK=1024)

        return relower_ms(add)
    except Exception as err:  # noqa: BLE001  (a comparison row, never the benchmark's failure)
        return f"{type(err).__name__}: {str(err).splitlines()[0][:80]}"


def relower_rows(with_jax_triton: bool = False) -> list[tuple[str, float, float]]:
    xla = relower_ms(xla_add)
    ffi = relower_ms(triton_add)
    native = relower_ms(native_add)
    rows = [("re-lower, ms: XLA add", xla, 1.0),
            ("re-lower, ms: Triton add, jaxlib FFI target", ffi, ffi / xla),
            ("re-lower, ms: Triton add, XLA Triton call", native, native / xla)]
    if with_jax_triton:
        other = jax_triton_relower_ms()
        if isinstance(other, str):
            print(f"re-lower through jax-triton: not measured ({other})")
        else:
            rows.append(("re-lower, ms: Triton add, jax-triton", other, other / xla))
    return rows


def print_rows(rows, value_names=("value", "ratio")) -> None:
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':{width}s}  " + "  ".join(f"{n:>9s}" for n in value_names))
    for name, *values in rows:
        print(f"{name:{width}s}  " + "  ".join(
            f"{v:9.3f}" if isinstance(v, float) else f"{str(v):>9s}" for v in values))


def gpu_report(platform: str) -> None:
    features = _compat.plugin_features(platform)
    print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}; "
          f"Triton {triton.__version__}; plugin: {features}")
    # The chains run first, in their own processes, while this one holds no GPU buffers.
    chains = {setting: chain_rows_in_subprocess(setting) for setting in (True, False)}
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
    rows.extend(relower_rows(with_jax_triton=True))
    print()
    print_rows(rows)


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
        rows = relower_rows()
        print_rows(rows)
        print(f"goal: {RELOWER_GOAL} at most")
        return 0
    platform = _platform()
    if platform not in ("cuda", "rocm"):
        from jax_triton_rocm.base import _no_gpu

        print(f"benchmarks/overhead.py: needs a CUDA or ROCm GPU, and JAX has none here: "
              f"{_no_gpu.no_gpu_reason()}", file=sys.stderr)
        return 1
    if mode == "chain-worker":
        print(json.dumps(chain_rows()))
        return 0
    gpu_report(platform)
    return 0


if __name__ == "__main__":
    sys.exit(main())
