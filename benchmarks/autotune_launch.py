"""What an autotuned call costs: per launch in a long chain, and at its first call.

`python benchmarks/autotune_launch.py` (on a GPU machine) prints, from one run, for the same add
kernel (1024 floats) with three autotune configs and with its fastest config alone:

1. µs per kernel in one jitted chain of 200 calls, command buffers (CUDA graphs) on and off
   (each setting in a fresh process, as XLA reads its flags once), for: the autotuned call on
   jaxlib's legacy target (the default for a call with no remembered choice), the same on the
   typed-FFI target (JAX_TRITON_ROCM_AUTOTUNE_TARGET=ffi, unsafe for operands computed in the
   program), the call after `jax_triton_rocm.autotune` picked its config (lowered as that config
   alone), and the kernel with one config (a plain call). Ratios are to the plain call.
2. ms for building the executable and its first call (jaxlib's trials included), for the same
   four, the median over five kernels no other measurement in its process has loaded; the
   remembered choices were made by an earlier process, as a user's later run finds them.

Without a CUDA or ROCm device it prints one line saying so and exits with status 1.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.gpu_needed(__file__, unless=("worker", "tune-first-calls"))

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402  (after the environment)
import jax.numpy as jnp  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import jax_triton_rocm as jtr  # noqa: E402
from jax_triton_rocm.base import _env  # noqa: E402

CHAIN_LENGTH = 200
FIRST_CALL_SIZE = 1 << 20
ROUTES = ("legacy target", "FFI target (forced)", "remembered choice", "one config")


def _configs(scale):
    # One program of 1024 elements whatever the config, so that a picked config launches like
    # "one config"; `scale` makes each measurement's kernels new to jaxlib (it caches them).
    return [triton.Config({"BLOCK": 1024, "SCALE": scale}, num_warps=warps)
            for warps in (2, 8, 4)]


@triton.jit
def scaled_add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr, SCALE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * SCALE + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def _call(route: str, scale: int):
    """A function x, y -> x * scale + y launching the kernel as `route` does."""
    if route == "one config":
        def add(x, y):
            return jtr.triton_call(x, y, x.size, kernel=scaled_add_kernel, out_shape=x,
                                   grid=(triton.cdiv(x.size, 1024),), num_warps=4, BLOCK=1024,
                                   SCALE=scale)
        return add
    kernel = triton.autotune(configs=_configs(scale), key=["n"])(scaled_add_kernel)

    def tuned(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernel, out_shape=x,
                               grid=lambda meta: (triton.cdiv(x.size, meta["BLOCK"]),))
    return tuned


def _chain(add, length=CHAIN_LENGTH):
    def chain(x, y):
        for _ in range(length):
            x = add(x, y)
        return x
    return chain


def _prepared(route: str, chain, x, tune: bool = True):
    """Sets the environment for `route`; tunes on `x` first where the route needs a choice
    (unless `tune` is False: another process made it)."""
    if route == "FFI target (forced)":
        os.environ[_env.ENV_AUTOTUNE_TARGET] = "ffi"
    else:
        os.environ.pop(_env.ENV_AUTOTUNE_TARGET, None)
    if route == "remembered choice" and tune:
        jtr.autotune(chain, x, x)
    return jax.jit(chain)


def per_kernel_us(route: str, scale: int, repeats: int = 30) -> float:
    x = jnp.ones((1024,), jnp.float32)
    fn = _prepared(route, _chain(_call(route, scale)), x)
    fn(x, x).block_until_ready()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn(x, x).block_until_ready()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / CHAIN_LENGTH * 1e6


def first_call_ms(route: str, scales: range, size: int = FIRST_CALL_SIZE) -> float:
    """Executable build and first call of a one-call program (its Triton compile done before),
    the median over fresh kernels (one per scale); a remembered choice was made by an earlier
    process (`tune_first_calls`)."""
    times = []
    for scale in scales:
        x = jnp.ones((size,), jnp.float32)
        fn = _prepared(route, _call(route, scale), x, tune=False)
        fn.lower(x, x)  # the Triton compile, outside the timed region
        start = time.perf_counter()
        fn.lower(x, x).compile()(x, x).block_until_ready()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def _first_call_scales(route: str) -> range:
    start = 10 + 5 * ROUTES.index(route)
    return range(start, start + 5)


def tune_first_calls(size: int = FIRST_CALL_SIZE) -> None:
    """Picks the configs of the first-call kernels, so that the worker, a new process, starts
    with them on disk as a user's later process would."""
    x = jnp.ones((size,), jnp.float32)
    for scale in _first_call_scales("remembered choice"):
        jtr.autotune(_call("remembered choice", scale), x, x)


def worker() -> None:
    """Every route's figures in this process (its XLA flags already set), as JSON."""
    chain = {route: per_kernel_us(route, 2 + i) for i, route in enumerate(ROUTES)}
    first = {route: first_call_ms(route, _first_call_scales(route)) for route in ROUTES}
    print(json.dumps({"chain": chain, "first": first}))


def _in_subprocess(command_buffers: bool, choices: str) -> dict:
    from _common import fresh_environment

    env = fresh_environment(command_buffers, {_env.ENV_AUTOTUNE_DIR: choices})
    for mode in ("tune-first-calls", "worker"):
        result = subprocess.run([sys.executable, os.path.abspath(__file__), mode], env=env,
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            break
    if result.returncode != 0:
        raise RuntimeError(f"the measurement (command buffers "
                           f"{'on' if command_buffers else 'off'}) failed:\n"
                           f"{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _table(title: str, unit: str, on: dict, off: dict) -> None:
    base_on, base_off = on["one config"], off["one config"]
    print(f"\n{title}\n| route | cmd buffers on ({unit}) | ratio | cmd buffers off ({unit}) | "
          f"ratio |\n| --- | --- | --- | --- | --- |")
    for route in ROUTES:
        print(f"| {route} | {on[route]:.3f} | {on[route] / base_on:.2f} | {off[route]:.3f} | "
              f"{off[route] / base_off:.2f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", nargs="?", default="report",
                        choices=("report", "worker", "tune-first-calls"))
    args = parser.parse_args()
    if args.mode != "report":
        {"worker": worker, "tune-first-calls": tune_first_calls}[args.mode]()
        return 0
    if jax.devices()[0].platform not in ("cuda", "rocm", "gpu"):
        from jax_triton_rocm.backends import _no_gpu

        print(f"benchmarks/autotune_launch.py: needs a CUDA or ROCm GPU, and JAX has none here: "
              f"{_no_gpu.no_gpu_reason()}", file=sys.stderr)
        return 1
    print(f"jax {jax.__version__}, Triton {triton.__version__}, "
          f"{jax.devices()[0].device_kind}; chain of {CHAIN_LENGTH} adds of 1024 floats")
    with tempfile.TemporaryDirectory() as choices:
        on = _in_subprocess(True, choices)
    with tempfile.TemporaryDirectory() as choices:
        off = _in_subprocess(False, choices)
    _table("Per kernel in the chain", "µs", on["chain"], off["chain"])
    _table("Executable build and first call", "ms", on["first"], off["first"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
