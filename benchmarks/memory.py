"""Memory held by many kernel variants, and what `clear_caches()` gives back. Runs on a CPU.

Each row is a fresh process that makes `--variants` kernel variants (one kernel, a different
constexpr each), and prints its resident memory (RSS), the live `CompiledKernel` objects and the
entries of the package's caches: before the variants, after them, after the release step with a
garbage collection, and after glibc's `malloc_trim` (which hands freed heap pages back, so RSS
shows what was really released). Rows, side by side:

  this checkout   each variant a jitted `triton_call` lowered for sm_90 (`target_arch`);
                  released by `clear_caches()`
  Triton only     the same kernel compiled by `triton.compile` for sm_90, nothing of the package
                  or JAX's lowering; released by dropping the compiled kernels
  JAX only        a jitted multiply by each constant lowered for the CPU, no Triton; released by
                  `jax.clear_caches()`

    python benchmarks/memory.py                       100 variants, well under a minute
    python benchmarks/memory.py --variants 20000      what issue 29 measured (compiles for long)
    python benchmarks/memory.py --before /work/main   another checkout beside this one
    python benchmarks/memory.py --cache-size 64       also with the package's caches bounded at 64

Runs share one Triton cache folder, filled by an unmeasured run first, so that every measured run
loads the same binaries from disk instead of compiling some of them. Without jax, jaxlib or
Triton it says so in one line, at once.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.cpu_is_enough(__file__, "lowers thousands of kernel variants for sm_90, in a fresh "
                                   "process per row after one that fills Triton's cache; minutes")

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_COMMON = r'''
import ctypes, gc, json, os, sys
sys.path.insert(0, ROOT)
import triton, triton.language as tl


@triton.jit
def scale_kernel(x_ptr, n, out_ptr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * SCALE, mask=mask)


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def kernels_alive():
    return sum(type(o).__name__ == "CompiledKernel" for o in gc.get_objects())


def measure(make, release, entries=lambda: 0):
    make(-1)  # imports and first-use set-up
    gc.collect()
    figures = {"start": (rss_mb(), kernels_alive(), entries())}
    for scale in range(VARIANTS):
        make(scale)
    gc.collect()
    figures["after variants"] = (rss_mb(), kernels_alive(), entries())
    release()
    gc.collect()
    figures["after release"] = (rss_mb(), kernels_alive(), entries())
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    figures["after malloc_trim"] = (rss_mb(), kernels_alive(), entries())
    print(json.dumps(figures))
'''

_PACKAGE = r'''
import jax, jax.numpy as jnp
import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state

x = jax.ShapeDtypeStruct((1024,), jnp.float32)


def lower(scale):
    def fn(x):
        return jtr.triton_call(x, x.size, kernel=scale_kernel, out_shape=x, grid=(4,),
                               SCALE=scale, BLOCK=256)
    jax.jit(fn).trace(x).lower(lowering_platforms=("cuda",))


with jtr.target_arch(cuda="sm_90"):
    measure(lower, jtr.clear_caches, lambda: sum(len(cache) for cache in _state.CACHES))
'''

_TRITON = r'''
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

compiled, target = [], GPUTarget("cuda", 90, 32)
signature = {"x_ptr": "*fp32", "n": "i32", "out_ptr": "*fp32", "SCALE": "constexpr",
             "BLOCK": "constexpr"}


def compile_one(scale):
    source = ASTSource(scale_kernel, signature, constexprs={(3,): scale, (4,): 256})
    compiled.append(triton.compile(source, target=target, options={"enable_fp_fusion": True}))


measure(compile_one, compiled.clear)
'''

_JAX = r'''
import jax, jax.numpy as jnp

x = jax.ShapeDtypeStruct((1024,), jnp.float32)


def lower(scale):
    jax.jit(lambda x: x * scale).trace(x).lower(lowering_platforms=("cpu",))


measure(lower, jax.clear_caches)
'''


def run(root: str, body: str, variants: int, env: dict[str, str]) -> dict:
    """One measured process running `body` with the checkout at `root` on the path."""
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "variants.py")  # Triton reads kernels from files
        with open(script, "w") as file:
            file.write((_COMMON + body).replace("ROOT", repr(root))
                       .replace("VARIANTS", str(variants)))
        result = subprocess.run([sys.executable, script], capture_output=True, text=True,
                                env={**os.environ, "JAX_PLATFORMS": "cpu",
                                     "TRITON_DEFAULT_FP_FUSION": "1", **env}, cwd=root)
    if result.returncode:
        raise RuntimeError(f"run in {root} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def missing(before: str | None) -> str | None:
    """What the benchmark needs and does not have, in one line; None when all is there."""
    needs = [name for name in ("jax", "jaxlib", "triton") if importlib.util.find_spec(name) is None]
    if needs:
        return f"needs {' and '.join(needs)} (pip install jax '.[test]')"
    if not os.path.exists("/proc/self/statm"):
        return "needs Linux (/proc/self/statm, for the resident memory)"
    if before and not os.path.isdir(os.path.join(before, "jax_triton_rocm")):
        return f"needs a checkout of jax_triton_rocm at --before {before!r}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="another checkout to measure beside this one")
    parser.add_argument("--variants", type=int, default=100,
                        help="kernel variants per process (default 100)")
    parser.add_argument("--cache-size", type=int, action="append", default=[],
                        help="also run this checkout with JAX_TRITON_ROCM_KERNEL_CACHE_SIZE and "
                             "JAX_TRITON_ROCM_CALL_CACHE_SIZE set to this (repeatable)")
    args = parser.parse_args(argv)
    if args.variants < 1:
        parser.error(f"--variants={args.variants}: give a positive number")
    problem = missing(args.before)
    if problem is not None:
        print(problem)
        return 2
    runs = [("before", args.before, _PACKAGE, {})] if args.before else []
    runs.append(("this checkout", ROOT, _PACKAGE, {}))
    for size in args.cache_size:
        runs.append((f"caches of {size}", ROOT, _PACKAGE,
                     {"JAX_TRITON_ROCM_KERNEL_CACHE_SIZE": str(size),
                      "JAX_TRITON_ROCM_CALL_CACHE_SIZE": str(size)}))
    runs += [("Triton only", ROOT, _TRITON, {}), ("JAX only", ROOT, _JAX, {})]
    with tempfile.TemporaryDirectory() as cache:
        env = {"TRITON_CACHE_DIR": cache}
        run(ROOT, _PACKAGE + _TRITON, args.variants, env)  # fills the Triton cache; not measured
        figures = [(label, run(root, body, args.variants, {**env, **extra}))
                   for label, root, body, extra in runs]
    report(figures, args.variants)
    return 0


def report(figures: list[tuple[str, dict]], variants: int) -> None:
    print(f"{variants} kernel variants per process, on the CPU "
          f"(RSS in MB / live CompiledKernel objects / entries in the package's caches)")
    width = max(len(label) for label, _ in figures)
    stages = list(figures[0][1])
    print(f"{'':{width}}  " + "  ".join(f"{stage:>26}" for stage in stages))
    for label, values in figures:
        cells = [f"{values[s][0]:8.1f} / {values[s][1]:>5} / {values[s][2]:>5}" for s in stages]
        print(f"{label:{width}}  " + "  ".join(f"{cell:>26}" for cell in cells))
    for label, values in figures:
        grown = values["after variants"][0] - values["start"][0]
        kept = values["after malloc_trim"][0] - values["start"][0]
        print(f"{label}: +{grown:.1f} MB for the variants ({grown * 1000 / variants:.1f} MB per "
              f"1000), +{kept:.1f} MB ({kept * 1000 / variants:.1f} MB per 1000) still held "
              f"after the release and malloc_trim")


if __name__ == "__main__":
    sys.exit(main())
