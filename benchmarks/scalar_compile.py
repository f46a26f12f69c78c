"""Compile cost of a kernel called with many distinct scalar values: XLA's Triton call against
jaxlib's.

On both routes a runtime scalar is not compiled into the kernel: jaxlib's call passes it as a
parameter, XLA's as a 0-d constant operand the kernel loads. So every value of one
specialisation class shares one Triton compile; a new value only lowers and compiles the XLA
program again (on XLA's route that includes XLA's own compile of the kernel's IR, the cost this
measures).

`python benchmarks/scalar_compile.py [--values 20]` (on a GPU machine) times, for each route,
`jit` + first call of `x * alpha + y` for each of the distinct values of `alpha` (a new jitted
function each time), and prints the first value's seconds, the median of the others, the total,
the Triton compiles, and the ratio of the routes' totals. Each route runs in a fresh process with
a fresh, empty TRITON_CACHE_DIR (removed after), so Triton's on-disk cache serves nothing.

`--dry-run` needs no GPU: the same, lowering for CUDA sm_90 under `target_arch` instead of
compiling and running; it checks the route each call takes and that each route compiled one
kernel in all (exit status 1 otherwise). Without a CUDA or ROCm device
the default mode prints one line saying so and exits with status 1.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.gpu_needed(__file__, unless=("--dry-run", "--worker"))

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state

from _common import DRY_RUN_ARCH, gpu_missing, print_rows, run_fresh

SIZE = 1024
ROUTES = {"jaxlib FFI target": False, "XLA Triton call": True}
TARGETS = {False: "triton_kernel_call_ffi", True: "__gpu$xla.gpu.triton"}
WORKER_TIMEOUT_S = 300.0


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, alpha, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def scale_add(x, y, alpha, xla_native):
    return jtr.triton_call(x, y, alpha, x.size, kernel=scale_add_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, 1024),), BLOCK=1024,
                           xla_native=xla_native)


def alphas(count: int) -> list[float]:
    return [0.5 + i for i in range(count)]  # distinct floats: fp32 runtime scalars


def warm_up(lower_only: bool) -> None:
    """Starts what a process starts once (the backend, XLA's compiler, JAX's lowering), so the
    first value's time is the kernel's own."""
    x = jax.ShapeDtypeStruct((SIZE,), jnp.float32)
    if lower_only:
        jax.jit(lambda a: a + 1).trace(x).lower(lowering_platforms=("cuda",))
    else:
        jax.block_until_ready(jax.jit(lambda a: a + 1)(jnp.ones((SIZE,), jnp.float32)))


def time_values(xla_native: bool, count: int, lower_only: bool) -> dict:
    """Seconds per value for one route, in this process: jit + first call, or (lower_only) the
    lowering for CUDA sm_90; the Triton compiles it took; and a route check per value."""
    seconds, wrong_route = [], []
    warm_up(lower_only)
    compiles = _state.COMPILED_KERNELS.stats["compiles"]
    for alpha in alphas(count):
        fn = jax.jit(lambda x, y, alpha=alpha: scale_add(x, y, alpha, xla_native))
        start = time.perf_counter()
        if lower_only:
            spec = jax.ShapeDtypeStruct((SIZE,), jnp.float32)
            with jtr.target_arch(cuda=DRY_RUN_ARCH):
                text = fn.trace(spec, spec).lower(lowering_platforms=("cuda",)).as_text()
        else:
            x = jnp.ones((SIZE,), jnp.float32)
            out = jax.block_until_ready(fn(x, x))
            text = fn.lower(x, x).as_text()
            if abs(float(out[0]) - (alpha + 1.0)) > 1e-5:
                wrong_route.append(f"alpha={alpha}: got {float(out[0])}")
        seconds.append(time.perf_counter() - start)
        if TARGETS[xla_native] not in text:
            wrong_route.append(f"alpha={alpha}: not lowered to {TARGETS[xla_native]}")
    return {"seconds": seconds, "compiles": _state.COMPILED_KERNELS.stats["compiles"] - compiles,
            "problems": wrong_route}


def route_in_fresh_process(xla_native: bool, count: int, lower_only: bool) -> dict:
    """`time_values` in a fresh process with a fresh, empty Triton cache of its own."""
    cache = tempfile.mkdtemp(prefix="scalar_compile_triton_cache_")
    args = ["--worker", "native" if xla_native else "jaxlib", "--values", str(count)]
    try:
        status, stdout, stderr = run_fresh(
            "scalar_compile.py", args + (["--dry-run"] if lower_only else []), True,
            timeout_s=WORKER_TIMEOUT_S, env={"TRITON_CACHE_DIR": cache})
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if status != 0 or not lines:
        tail = " | ".join(stderr.strip().splitlines()[-3:])[-300:]
        return {"error": f"the worker exited ({status}): {tail}"}
    return json.loads(lines[-1])


def report(count: int, lower_only: bool) -> int:
    """Runs both routes and prints the table; returns 1 if a route failed or misbehaved."""
    results = {name: route_in_fresh_process(native, count, lower_only)
               for name, native in ROUTES.items()}
    what = "lowering for sm_90" if lower_only else "jit + first call"
    print(f"{count} distinct values of a runtime scalar, seconds of {what} per value:")
    rows, failures = [], []
    for name in ROUTES:
        result = results[name]
        if "error" in result:
            failures.append(f"{name}: {result['error']}")
            continue
        seconds = result["seconds"]
        rest = statistics.median(seconds[1:]) if len(seconds) > 1 else float("nan")
        rows.append((name, seconds[0], rest, sum(seconds), str(result["compiles"])))
        failures += [f"{name}: {problem}" for problem in result["problems"]]
        wanted = 1
        if result["compiles"] != wanted:
            failures.append(f"{name}: {result['compiles']} Triton compiles, {wanted} expected")
    if rows:
        print_rows(rows, ("first", "median rest", "total", "compiles"))
    totals = {row[0]: row[3] for row in rows}
    if len(totals) == 2:
        print(f"XLA Triton call / jaxlib FFI target, total: "
              f"{totals['XLA Triton call'] / totals['jaxlib FFI target']:.2f}")
    for line in failures:
        print(f"FAILED: {line}")
    return 1 if failures else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--values", type=int, default=20,
                        help="distinct scalar values per route (default 20)")
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU: lower for CUDA sm_90 instead of compiling and running")
    parser.add_argument("--worker", choices=("jaxlib", "native"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.values < 1:
        parser.error(f"--values={args.values}: give a positive number of values")
    if args.worker is not None:
        print(json.dumps(time_values(args.worker == "native", args.values, args.dry_run)))
        return 0
    if not args.dry_run and gpu_missing("scalar_compile.py"):
        return 1
    if not args.dry_run:
        print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}; "
              f"Triton {triton.__version__}")
    return report(args.values, args.dry_run)


if __name__ == "__main__":
    sys.exit(main())
