"""Compile wall time of a 16-config autotuned matmul, or of a program of distinct kernels: serial
against parallel.

    python benchmarks/autotune_compile.py [--arch sm_90] [--repeat 1] [--program N]

Lowers an autotuned fp16 matmul (`tests.support.autotune_utils.tuned_matmul`: 16 `triton.Config`s,
none pruned at 1024x1024x1024) for CUDA under `target_arch`, which compiles every config (no GPU is
needed: only the CPU works). Each
measurement runs in a fresh process with a fresh, empty `TRITON_CACHE_DIR` of its own (set here,
in that process's environment), so Triton's on-disk cache never serves a config. Modes:

  serial          JAX_TRITON_ROCM_COMPILE_THREADS=1
  threads         the default: one thread per config, at most the CPU count

Prints one line per mode and the threaded mode's ratio to serial (the goal: <= 0.4 on 16 cores).

`--program N` lowers instead one `jax.jit` of N distinct 128x128x64 matmul kernels (fp16, each a
plain call, none autotuned): they compile in parallel only because each starts when its call is
traced (JAX_TRITON_ROCM_EARLY_COMPILE). A third mode, `late` (early compiles off), shows the
lowering compiling them one after another. The goal: threads <= 0.75 of serial, 4 kernels on 2
cores.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.cpu_is_enough(__file__, "compiles 16 matmul configs for sm_90 in a fresh process per "
                                   "mode, each with an empty Triton cache; minutes")

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import jax
import jax.numpy as jnp

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = 1024

MODES = {
    "serial": {"JAX_TRITON_ROCM_COMPILE_THREADS": "1"},
    "threads": {},
    "late": {"JAX_TRITON_ROCM_EARLY_COMPILE": "0"},
}
GOALS = {False: 0.4, True: 0.75}  # threads / serial, by whether a program is lowered


def _lower(fn, *avals, arch: str) -> None:
    import jax_triton_rocm as jtr

    with jtr.target_arch(cuda=arch):
        jax.jit(fn).trace(*avals).lower(lowering_platforms=("cuda",))


def program(kernels: int):
    """A function of two fp16 matrices calling `kernels` distinct matmul kernels: the test
    matmul, each call with its own value of a constexpr it adds (`COPY`, unused)."""
    import triton

    import jax_triton_rocm as jtr
    from tests.support import kernels as test_kernels

    source = test_kernels.matmul_kernel.src.replace(
        "BLOCK_K: tl.constexpr)", "BLOCK_K: tl.constexpr, COPY: tl.constexpr)")
    kernel = test_kernels.kernel_from_source(f"@triton.jit\n{source}", "matmul_kernel")

    def matmuls(a, b):
        m, k = a.shape
        out = jax.ShapeDtypeStruct((m, b.shape[1]), a.dtype)
        return [jtr.triton_call(a, b, kernel=kernel, out_shape=out, M=m, N=out.shape[1], K=k,
                                grid=(triton.cdiv(m, 128), triton.cdiv(out.shape[1], 128)),
                                BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, COPY=copy)
                for copy in range(kernels)]

    return matmuls


def measure(mode: str, arch: str, kernels: int = 0) -> dict:
    """Runs in the measuring process: times one lowering of the 16-config matmul, or of a
    `program` of `kernels` matmul kernels."""
    from jax_triton_rocm.base import _state
    from jax_triton_rocm.base import _values
    from jax_triton_rocm.compile import _compile
    from tests.support import autotune_utils

    def matmul(a, b):
        return autotune_utils.tuned_matmul(a, b)

    _lower(lambda x: jnp.sin(x), jax.ShapeDtypeStruct((8,), jnp.float32), arch=arch)
    assert len(autotune_utils.MATMUL_CONFIGS) == 16
    if kernels:
        matmul = program(kernels)
    compiles_before = _state.COMPILED_KERNELS.stats["compiles"]
    spec = jax.ShapeDtypeStruct((SIZE, SIZE), jnp.float16)
    start = time.perf_counter()
    _lower(matmul, spec, spec, arch=arch)
    seconds = time.perf_counter() - start
    return {
        "mode": mode,
        "seconds": seconds,
        "compiles": _state.COMPILED_KERNELS.stats["compiles"] - compiles_before,
        "threads": min(_compile.thread_count(), kernels or len(autotune_utils.MATMUL_CONFIGS)),
        "cpus": _values.cpu_count(),
    }


def _run(mode: str, arch: str, kernels: int) -> dict:
    cache_dir = tempfile.mkdtemp(prefix="triton-cache-bench-")
    env = {**os.environ, **MODES[mode], "TRITON_CACHE_DIR": cache_dir,
           "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")]))}
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    code = ("import json, benchmarks.autotune_compile as b; "
            f"print('RESULT', json.dumps(b.measure({mode!r}, {arch!r}, {kernels!r})))")
    try:
        run = subprocess.run([sys.executable, "-c", code], env=env, cwd=REPO,
                             capture_output=True, text=True)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    if run.returncode:
        raise RuntimeError(f"measuring {mode} failed (exit {run.returncode}):\n{run.stderr}")
    out = run.stdout
    line = next(l for l in out.splitlines() if l.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="sm_90", help="CUDA architecture to compile for")
    parser.add_argument("--repeat", type=int, default=1, help="measurements per mode")
    parser.add_argument("--modes", default="serial,threads", help="comma-separated, of "
                        f"{', '.join(MODES)}")
    parser.add_argument("--program", type=int, default=0, metavar="N",
                        help="lower N distinct matmul kernels in one jit instead")
    args = parser.parse_args()
    best: dict[str, float] = {}
    for _ in range(args.repeat):
        for mode in args.modes.split(","):
            result = _run(mode, args.arch, args.program)
            best[mode] = min(best.get(mode, float("inf")), result["seconds"])
            print(f"{mode:8s} {result['seconds']:7.2f} s  compiles={result['compiles']}  "
                  f"threads={result['threads']} ({result['cpus']} CPUs)", flush=True)
    if "serial" in best:
        for mode, seconds in best.items():
            if mode != "serial":
                print(f"ratio {mode:8s} {seconds / best['serial']:.2f}  "
                      f"(goal <= {GOALS[bool(args.program)]})")


if __name__ == "__main__":
    main()
