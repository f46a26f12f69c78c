"""Lowers a fixed set of calls and writes each lowered module's text to a file, so that a change
meant to keep the package's output (a refactor) can be checked byte for byte. Runs on a CPU.

    python tools/lowered_snapshot.py DIR                 write DIR/<case>.txt
    python tools/lowered_snapshot.py DIR --compare OLD   write, then compare with OLD's files

The calls, from the tests' kernels (tests/support): a plain add, an autotuned add, scalars of
each type (float, int, bool; float64, int64, uint64), an add in place (`input_output_aliases`)
and a Gluon copy, each lowered for CUDA sm_90 and ROCm gfx942 (under `target_arch`) on jaxlib's
route and on XLA's (`JAX_TRITON_ROCM_XLA_NATIVE`, one fresh process per route). A call that
does not lower writes its error instead, which must not change either.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROUTES = {"jaxlib": "0", "xla": "1"}
TARGETS = {"cuda": ("sm_90", 32), "rocm": ("gfx942", 64)}


def _cases() -> dict:
    """Case name -> (function, its arguments' shapes and dtypes, Gluon's warp size or None)."""
    import jax.numpy as jnp
    import numpy as np
    import triton

    import jax_triton_rocm as jtr
    from tests.support import autotune_utils, gluon_kernels, kernels

    def scalars(scale, shift, flip):
        def call(x):
            return jtr.triton_call(x, scale, shift, flip, x.size, kernel=kernels.scale_shift_kernel,
                                   out_shape=x, grid=(triton.cdiv(x.size, 256),), BLOCK=256)
        return call

    f32 = ((1000,), jnp.float32)
    return {
        "add": (kernels.add, [f32, f32]),
        "autotuned_add": (autotune_utils.tuned_add, [f32, f32]),
        "scalars_float_int_bool": (scalars(2.5, 3, True), [f32]),
        "scalars_64_bit": (scalars(np.float64(0.5), 2**40, np.uint64(2**64 - 1)), [f32]),
        "add_in_place": (kernels.add_inplace, [f32, f32]),
        "gluon_copy": ("gluon", [((1024,), jnp.float32)]),
    }, gluon_kernels


def write(folder: str) -> None:
    """Lowers every case on this process's route (`JAX_TRITON_ROCM_XLA_NATIVE`) into `folder`."""
    import jax

    import jax_triton_rocm as jtr

    route = {v: k for k, v in ROUTES.items()}[os.environ["JAX_TRITON_ROCM_XLA_NATIVE"]]
    cases, gluon_kernels = _cases()
    for platform, (arch, warp_size) in TARGETS.items():
        for name, (fn, shapes) in cases.items():
            if fn == "gluon":
                def fn(x, warp_size=warp_size):
                    return gluon_kernels.copy(x, warp_size=warp_size)
            args = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in shapes]
            try:
                with jtr.target_arch(**{platform: arch}):
                    text = jax.jit(fn).trace(*args).lower(
                        lowering_platforms=(platform,)).as_text()
            except Exception as err:  # the error is the output to keep
                text = f"error: {type(err).__name__}: {err}\n"
            with open(os.path.join(folder, f"{route}-{platform}-{name}.txt"), "w") as file:
                file.write(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="where to write one file per case")
    parser.add_argument("--compare", help="a folder written before, to compare with")
    parser.add_argument("--route", choices=ROUTES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.route:
        sys.path.insert(0, ROOT)
        write(args.folder)
        return
    os.makedirs(args.folder, exist_ok=True)
    for route, flag in ROUTES.items():
        env = {**os.environ, "JAX_PLATFORMS": "cpu", "JAX_TRITON_ROCM_XLA_NATIVE": flag}
        subprocess.run([sys.executable, os.path.abspath(__file__), args.folder, "--route", route],
                       env=env, cwd=ROOT, check=True)
    names = sorted(os.listdir(args.folder))
    print(f"{len(names)} lowered modules in {args.folder}")
    if args.compare:
        differ = [n for n in sorted(set(names) | set(os.listdir(args.compare)))
                  if _read(args.folder, n) != _read(args.compare, n)]
        print(f"differ from {args.compare}: {', '.join(differ) or 'none'}")
        sys.exit(1 if differ else 0)


def _read(folder: str, name: str) -> bytes | None:
    path = os.path.join(folder, name)
    if not os.path.isfile(path):
        return None
    with open(path, "rb") as file:
        return file.read()


if __name__ == "__main__":
    main()
