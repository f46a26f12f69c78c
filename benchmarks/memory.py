"""Memory held by many kernel variants, and what `clear_caches()` gives back. Runs on a CPU.

Each run is a fresh process that lowers one jitted kernel call for sm_90 (under `target_arch`)
with `VARIANTS` different constexpr values, so every variant is a kernel of its own, and
prints its resident memory (RSS) and the live `CompiledKernel` objects: before the variants,
after them, after `clear_caches()` with a garbage collection, and after glibc's `malloc_trim`
(which hands freed heap pages back, so RSS shows what was really released).

    python benchmarks/memory.py                       this checkout, default cache sizes
    python benchmarks/memory.py --before /work/main   another checkout beside this one
    python benchmarks/memory.py --variants 500 --cache-size 64

Runs share one Triton cache folder, filled by a first unmeasured run, so that every measured
run loads the same binaries from disk instead of compiling some of them.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.cpu_is_enough(__file__, "lowers thousands of kernel variants for sm_90, in a fresh "
                                   "process per row after one that fills Triton's cache; minutes")

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_CHILD = r'''
import ctypes, gc, json, os, sys
sys.path.insert(0, ROOT)
import jax, jax.numpy as jnp, triton, triton.language as tl
import jax_triton_rocm as jtr


@triton.jit
def scale_kernel(x_ptr, n, out_ptr, SCALE: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * SCALE, mask=mask)


def lower(scale):
    def fn(x):
        return jtr.triton_call(x, x.size, kernel=scale_kernel, out_shape=x, grid=(4,),
                               SCALE=scale, BLOCK=256)
    jax.jit(fn).trace(x).lower(lowering_platforms=("cuda",))


def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def kernels_alive():
    return sum(type(o).__name__ == "CompiledKernel" for o in gc.get_objects())


x = jax.ShapeDtypeStruct((1024,), jnp.float32)
figures = {}
with jtr.target_arch(cuda="sm_90"):
    lower(-1)  # imports and first-use set-up
    gc.collect()
    figures["start"] = (rss_mb(), kernels_alive())
    for scale in range(VARIANTS):
        lower(scale)
    gc.collect()
    figures["after variants"] = (rss_mb(), kernels_alive())
    jtr.clear_caches()
    gc.collect()
    figures["after clear_caches"] = (rss_mb(), kernels_alive())
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    figures["after malloc_trim"] = (rss_mb(), kernels_alive())
print(json.dumps(figures))
'''


def run(root: str, variants: int, env: dict[str, str]) -> dict:
    """One measured process for the checkout at `root`."""
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "variants.py")  # Triton reads kernels from files
        with open(script, "w") as file:
            file.write(_CHILD.replace("ROOT", repr(root)).replace("VARIANTS", str(variants)))
        result = subprocess.run([sys.executable, script], capture_output=True, text=True,
                                env={**os.environ, "JAX_PLATFORMS": "cpu", **env}, cwd=root)
    if result.returncode:
        raise RuntimeError(f"run in {root} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", help="another checkout to measure beside this one")
    parser.add_argument("--variants", type=int, default=2000)
    parser.add_argument("--cache-size", type=int, action="append", default=[],
                        help="also run this checkout with JAX_TRITON_ROCM_KERNEL_CACHE_SIZE and "
                             "JAX_TRITON_ROCM_CALL_CACHE_SIZE set to this (repeatable)")
    args = parser.parse_args()
    runs = [("before", args.before, {})] if args.before else []
    runs.append(("this checkout", ROOT, {}))
    for size in args.cache_size:
        runs.append((f"caches of {size}", ROOT, {"JAX_TRITON_ROCM_KERNEL_CACHE_SIZE": str(size),
                                                 "JAX_TRITON_ROCM_CALL_CACHE_SIZE": str(size)}))
    with tempfile.TemporaryDirectory() as cache:
        env = {"TRITON_CACHE_DIR": cache}
        run(ROOT, args.variants, env)  # fills the Triton cache; not measured
        figures = [(label, run(root, args.variants, {**env, **extra}))
                   for label, root, extra in runs]
    print(f"{args.variants} kernel variants lowered for sm_90 on the CPU "
          f"(RSS in MB / live CompiledKernel objects)")
    width = max(len(label) for label, _ in figures)
    stages = list(figures[0][1])
    print(f"{'':{width}}  " + "  ".join(f"{stage:>20}" for stage in stages))
    for label, values in figures:
        cells = [f"{values[s][0]:8.1f} / {values[s][1]:>5}" for s in stages]
        print(f"{label:{width}}  " + "  ".join(f"{cell:>20}" for cell in cells))
    for label, values in figures:
        grown = values["after variants"][0] - values["start"][0]
        kept = values["after malloc_trim"][0] - values["start"][0]
        print(f"{label}: +{grown:.1f} MB for the variants ({grown * 1024 / args.variants:.1f} KB "
              f"each), +{kept:.1f} MB still held after clear_caches and malloc_trim")


if __name__ == "__main__":
    main()
