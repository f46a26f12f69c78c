"""Launch overhead, first-call latency, bandwidth and re-lowering cost of jax_triton_rocm calls.

`python benchmarks/overhead.py` (on a GPU machine) prints, from one run (the machines are shared
and noisy: compare within a run, not across):

1. Per-kernel time in one jitted chain of 200 small adds (1024 floats), with XLA's command
   buffers on and off (`--xla_gpu_enable_command_buffer=` in XLA_FLAGS; each setting runs in a
   fresh process, as XLA reads its flags once): the default route of a plain kernel (pointer
   and constexpr parameters only: jaxlib's typed-FFI target), XLA's Triton call asked for
   (`xla_native=True`) and jaxlib's typed-FFI target for the add whose length is a runtime
   scalar, the legacy target (forced),
   XLA's own add unfused (`lax.optimization_barrier` between adds) and fused (one kernel for
   the chain), and, where PyTorch with CUDA is installed, the same Triton kernel from PyTorch
   eager and replayed from a CUDA graph. Ratios are to XLA's unfused add of the same setting;
   the goal for the default route of a plain kernel is 1.15 at most.
2. Building an executable and its first call (module load + launch; the Triton compile is done
   before): CUBIN carried in `module_image` (jax 0.11.1+) against PTX only (jaxlib runs ptxas
   at load), each on fresh kernels.
3. Bandwidth of a 1 GiB float32 add: the Triton kernel against XLA's add.
4. Re-lowering, at the same shape and at a new one (`relower.py`).

`python benchmarks/overhead.py --runs 3` (on a GPU machine) measures part 1's goal alone: the
default route of the plain kernel, jaxlib's FFI target and XLA's unfused add, in 3 runs, each a
fresh process per command-buffer setting that measures every chain 3 times, interleaved; it
prints every figure, the worst ratio per setting and whether it meets the goal (exit status 1
if not, or if a chain did not take its route). With `--dry-run` it needs no GPU: the same
processes lower each chain for CUDA sm_90 under `target_arch`, check the route it takes, and
time nothing.

`python benchmarks/overhead.py relower` runs anywhere (no GPU): `relower.py`'s report.

Without a CUDA or ROCm device the GPU modes print one line saying so and exit with status 1.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.gpu_needed(__file__, unless=("--dry-run", "relower", "chain-worker"))

import argparse
import contextlib
import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import triton

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _compat

import relower
from _common import (CHAIN_LENGTH, DRY_RUN_ARCH, add_kernel, chain, forced_features,
                     call_target, gpu_missing, in_fresh_process, median_seconds, native_add,
                     plain_add, platform, print_rows, torch_wall_us, triton_add, xla_add,
                     xla_add_unfused)

GOAL = 1.15
# key -> (label, function of x and y, the custom call it must emit: None for XLA's own ops,
# "default" for whatever the package's rule picks here).
CHAINS = {
    "plain": ("default route: plain add (pointers and constexprs)", plain_add, "default"),
    "native": ("XLA Triton call (xla_native=True): add, runtime n", native_add,
               _compat.XLA_TRITON_CALL_NAME),
    "ffi": ("jaxlib FFI target: add, runtime n", triton_add, _compat.FFI_CALL_NAME),
    "unfused": ("XLA add, unfused", xla_add_unfused, None),
    "fused": ("XLA add, fused by XLA", xla_add, None),
}
GOAL_ROWS = ("plain", "ffi", "unfused")


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

    def run_chain():
        for _ in range(length):
            add_kernel[(1,)](x, x, x.numel(), out, BLOCK=1024)

    def timed(run, repeats=30):
        return torch_wall_us(run, length, repeats)

    eager = timed(run_chain)
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        run_chain()  # warm up on the capture stream
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            run_chain()
    return {"PyTorch eager": eager, "PyTorch CUDA graph": timed(graph.replay)}


def emitted_target(text: str) -> str:
    """The Triton custom call a lowered module's text holds ("" for none)."""
    for target in (_compat.XLA_TRITON_CALL_NAME, _compat.FFI_CALL_NAME, _compat.LEGACY_CALL_NAME):
        if f"@{target}(" in text or f'@"{target}"(' in text:
            return target
    return ""


def chain_figures(names: list[str], measurements: int, dry_run: bool = False) -> dict:
    """For each chain in `names` (`CHAINS`), the route it took and `measurements` per-kernel µs,
    measured in turn (a slow spell of the machine hits every chain alike).

    With `dry_run` the chains are lowered for CUDA sm_90 under `target_arch` and nothing is
    timed (an empty list per chain).

    Raises:
      RuntimeError: a chain took another route than its own.
    """
    x = jnp.ones((1024,), jnp.float32)
    routes, jitted = {}, {}
    for name in names:
        label, op, wanted = CHAINS[name]
        # The FFI row forces its target: `auto` takes the legacy one where XLA_FLAGS turns
        # command buffers off.
        with call_target("ffi") if wanted == _compat.FFI_CALL_NAME else contextlib.nullcontext():
            if dry_run:
                jitted[name] = chain(op)
                arg = jax.ShapeDtypeStruct((1024,), jnp.float32)
                with jtr.target_arch(cuda=DRY_RUN_ARCH):
                    text = jax.jit(chain(op, 2)).trace(arg, arg).lower(
                        lowering_platforms=("cuda",)).as_text()
            else:
                jitted[name] = chain(op).lower(x, x).compile()
                text = jax.jit(chain(op, 2)).lower(x, x).as_text()
        routes[name] = emitted_target(text) or "XLA"
        if wanted not in (None, "default") and routes[name] != wanted:
            raise RuntimeError(f"{label}: took {routes[name]}, not {wanted}; the "
                               f"'jax_triton_rocm' logger says why at DEBUG level")
    figures: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(0 if dry_run else measurements):
        for name in names:
            figures[name].append(median_seconds(jitted[name], x, x) / CHAIN_LENGTH * 1e6)
    return {"routes": routes, "us": figures}


def full_chain_rows() -> dict[str, float]:
    """Per-kernel µs of every chain in this process (its XLA flags already set)."""
    found = chain_figures(list(CHAINS), 1)
    rows = {CHAINS[name][0]: values[0] for name, values in found["us"].items()}
    x = jnp.ones((1024,), jnp.float32)
    with call_target("legacy"):
        taken = emitted_target(jax.jit(chain(triton_add, 2)).lower(x, x).as_text())
        if taken != _compat.LEGACY_CALL_NAME:
            raise RuntimeError(f"the forced legacy chain took {taken}")
        rows["jaxlib legacy target (forced): add, runtime n"] = (
            median_seconds(chain(triton_add), x, x) / CHAIN_LENGTH * 1e6)
    if platform() == "cuda":
        rows.update(torch_chain_per_kernel_us())
    return {"rows": rows, "routes": found["routes"]}


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


def goal_line(on: dict, off: dict) -> str:
    plain, unfused = CHAINS["plain"][0], CHAINS["unfused"][0]
    return (f"default route of a plain kernel / XLA's unfused add: "
            f"{on[plain] / on[unfused]:.2f} (command buffers on), "
            f"{off[plain] / off[unfused]:.2f} (off); goal {GOAL} at most")


def gpu_report(platform_name: str) -> None:
    features = _vendors.plugin_features(platform_name)
    print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}; "
          f"Triton {triton.__version__}; plugin: {features}")
    # The chains run first, in their own processes, while this one holds no GPU buffers.
    chains = {setting: in_fresh_process("overhead.py", ["chain-worker"], setting)
              for setting in (True, False)}
    on, off = chains[True]["rows"], chains[False]["rows"]
    base = CHAINS["unfused"][0]
    print(f"\nchain of {CHAIN_LENGTH} adds, µs per kernel (ratio to XLA's unfused add):")
    print_rows([(name, on[name], on[name] / on[base], off.get(name, float("nan")),
                 off.get(name, float("nan")) / off[base]) for name in on],
               ("cmdbuf on", "ratio", "cmdbuf off", "ratio"))
    print(f"the default route of the plain add took: {chains[True]['routes']['plain']}")
    print(goal_line(on, off))

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


def runs_report(runs: int, measurements: int, dry_run: bool) -> int:
    """The goal's chains in `runs` runs (fresh processes per command-buffer setting), each
    measured `measurements` times; prints every figure and the worst ratio per setting.

    Returns 1 if a run failed or a ratio misses the goal, else 0.
    """
    args = ["chain-worker", "--rows", ",".join(GOAL_ROWS), "--measurements", str(measurements)]
    worst, failed = {True: 0.0, False: 0.0}, False
    for run in range(1, runs + 1):
        for setting in (True, False):
            label = f"run {run}, command buffers {'on' if setting else 'off'}"
            try:
                found = in_fresh_process("overhead.py", args + ["--dry-run"] * dry_run, setting)
            except RuntimeError as err:  # one failed run never hides the others' figures
                print(f"{label}: FAILED: {err}")
                failed = True
                continue
            us, routes = found["us"], found["routes"]
            if dry_run:
                print(f"{label}: routes {json.dumps(routes)} (dry run: nothing timed)")
                continue
            ratios = [a / b for a, b in zip(us["plain"], us["unfused"])]
            worst[setting] = max(worst[setting], *ratios)
            print(f"{label} (the plain add's default route took {routes['plain']}), µs per "
                  f"kernel:")
            for name in GOAL_ROWS:
                print(f"  {CHAINS[name][0]}: " + ", ".join(f"{v:.3f}" for v in us[name]))
            print("  default route / XLA's unfused add: "
                  + ", ".join(f"{r:.3f}" for r in ratios))
    if dry_run or failed:
        return 1 if failed else 0
    met = max(worst.values()) <= GOAL
    print(f"worst ratio, default route of a plain kernel / XLA's unfused add: "
          f"{worst[True]:.3f} (command buffers on), {worst[False]:.3f} (off); goal {GOAL} at "
          f"most: {'met' if met else 'NOT met'}")
    return 0 if met else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", default="gpu", choices=("gpu", "relower",
                                                                   "chain-worker"),
                        help="gpu (default): the whole report, on a GPU; relower: re-lowering "
                             "cost only, anywhere; chain-worker: one process's chain figures "
                             "as JSON (used by the other modes)")
    parser.add_argument("--runs", type=int, help="measure the goal's chains alone, in this "
                                                 "many runs (fresh processes)")
    parser.add_argument("--measurements", type=int, default=3,
                        help="measurements of each chain per run (default 3)")
    parser.add_argument("--dry-run", action="store_true",
                        help="with --runs: no GPU; lower each chain for CUDA sm_90 and check "
                             "its route, time nothing")
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for name in ("runs", "measurements"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name}={getattr(args, name)}: give a positive number")
    if args.mode == "relower":
        relower.print_report()
        return 0
    if args.mode == "chain-worker" and args.rows:
        if not args.dry_run and gpu_missing("overhead.py"):
            return 1
        print(json.dumps(chain_figures(args.rows.split(","), args.measurements, args.dry_run)))
        return 0
    if args.runs is not None:
        if not args.dry_run and gpu_missing("overhead.py"):
            return 1
        return runs_report(args.runs, args.measurements, args.dry_run)
    if args.dry_run:
        parser.error("--dry-run goes with --runs")
    if gpu_missing("overhead.py"):
        return 1
    if args.mode == "chain-worker":
        print(json.dumps(full_chain_rows()))
        return 0
    gpu_report(platform())
    return 0


if __name__ == "__main__":
    sys.exit(main())
