"""`python -m jax_triton_rocm`: run a Triton kernel through the bridge, or show what would run.

On a machine with a GPU (CUDA or ROCm) it runs a vector add and a fused softmax inside
`jax.jit` and checks them against jax.numpy. Without one, it says why no GPU could be used,
cross-compiles the same kernels for named architectures (default sm_90, gfx942, gfx950) and
prints the launches jaxlib would get.

    python -m jax_triton_rocm [demo] [--arch sm_90 --arch gfx942 ...] [--cross]
    python -m jax_triton_rocm info [--json]     versions, plugins, devices, delivery, caches
    python -m jax_triton_rocm --version
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import NoReturn

from jax_triton_rocm._version import __version__

PROG = "python -m jax_triton_rocm"
DEFAULT_ARCHS = ("sm_90", "gfx942", "gfx950")


def _kernels():
    import triton
    import triton.language as tl

    @triton.jit
    def add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        y = tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x + y, mask=mask)

    @triton.jit
    def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
        num = tl.exp(x - tl.max(x, axis=0))
        tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)

    return add_kernel, softmax_kernel


def _functions():
    import jax
    import triton

    import jax_triton_rocm as jtr

    add_kernel, softmax_kernel = _kernels()

    def add(x, y):
        return jtr.triton_call(x, y, x.size, kernel=add_kernel, out_shape=x,
                               grid=(triton.cdiv(x.size, 1024),), BLOCK=1024)

    def softmax(x):
        rows, cols = x.shape
        return jtr.triton_call(x, kernel=softmax_kernel,
                               out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(rows,),
                               n_cols=cols, BLOCK=triton.next_power_of_2(cols))

    return add, softmax


def run_on_gpu(platform: str) -> int:
    import jax
    import jax.numpy as jnp
    import numpy as np

    add, softmax = _functions()
    device = jax.devices(platform)[0]
    print(f"Running on {device.device_kind} ({platform}, {device.compute_capability}).")
    x = jax.random.normal(jax.random.key(0), (1 << 20,), jnp.float32)
    y = jax.random.normal(jax.random.key(1), (1 << 20,), jnp.float32)
    start = time.perf_counter()
    out = jax.jit(add)(x, y).block_until_ready()
    first = time.perf_counter() - start
    np.testing.assert_allclose(out, x + y, rtol=1e-6)
    print(f"  vector add of 2^20 floats: matches jnp (first call, with compile: {first:.3f} s)")
    m = jax.random.normal(jax.random.key(2), (512, 1000), jnp.float32)
    np.testing.assert_allclose(jax.jit(softmax)(m), jax.nn.softmax(m, axis=-1), rtol=1e-5,
                               atol=1e-6)
    print("  fused softmax 512x1000: matches jax.nn.softmax")
    return 0


def show_cross_compiled(targets: list[tuple[str, str]]) -> int:
    """Lowers the demo kernels for each (platform, canonical arch) and prints the launches."""
    import jax
    import jax.numpy as jnp

    import jax_triton_rocm as jtr

    add, softmax = _functions()
    x = jax.ShapeDtypeStruct((1 << 20,), jnp.float32)
    m = jax.ShapeDtypeStruct((512, 1000), jnp.float32)
    print("Cross-compiling and showing what would be launched, and by whom.")
    for platform, arch in targets:
        with jtr.target_arch(**{platform: arch}):
            for name, fn, args in (("vector add", add, (x, x)), ("softmax", softmax, (m,))):
                start = time.perf_counter()
                lowered = jax.jit(fn).trace(*args).lower(lowering_platforms=(platform,))
                seconds = time.perf_counter() - start
                for call in jtr.kernel_calls(lowered):
                    summary = call.summary()
                    launch = summary["launches"][0]
                    binary = ("CUBIN" if platform == "cuda" else "HSACO")
                    carried = (f"{binary} of {launch['embedded_binary_bytes']} bytes embedded"
                               if launch["embedded_binary_bytes"] else
                               f"Triton IR of {launch['ir_bytes']} bytes, built by XLA"
                               if "ir_bytes" in launch else f"binary at {launch['ptx_field']}")
                    shared = launch["shared_mem_bytes"]
                    print(f"  {arch:7s} {name:10s} -> {summary['target']}: {launch['kernel']} "
                          f"grid={launch['grid']} warps={launch['num_warps']} "
                          + ("" if shared is None else f"shared={shared}B ")
                          + f"params={launch['parameters']}; {carried} ({seconds:.2f} s)")
    return 0


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{message} (see {PROG} --help)")


def _fail(message: str) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(2)


def _demo_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", action="append",
                        help="architecture to cross-compile for (sm_90, 9.0, gfx942, ...); "
                             "repeatable; default: " + ", ".join(DEFAULT_ARCHS))
    parser.add_argument("--cross", action="store_true",
                        help="cross-compile even when a GPU is present")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"jax_triton_rocm {__version__}")
    _demo_options(parser)
    commands = parser.add_subparsers(dest="command", metavar="{demo,info}")
    demo = commands.add_parser("demo", help="run (or cross-compile) two kernels; the default")
    _demo_options(demo)
    info = commands.add_parser("info", help="versions, plugins, devices, delivery, caches")
    info.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def _checked_targets(archs: list[str] | None) -> list[tuple[str, str]]:
    """(platform, canonical arch) for each --arch, each one compiled once by Triton to check it.

    Exits with one line on stderr for a name that is not an architecture, or one Triton cannot
    compile for.
    """
    from jax_triton_rocm import _info

    targets = []
    for arch in archs or DEFAULT_ARCHS:
        try:
            platform, canonical = _info.canonical_arch(arch)
        except ValueError as err:
            _fail(str(err))
        if archs:  # the defaults are known to compile
            try:
                from jax_triton_rocm import backends
                from jax_triton_rocm.lowering import _target

                backends.backend(platform)
                problem = _target.arch_problem(platform, canonical)
            except ImportError as err:
                _fail(f"--arch {arch}: {err}")
            if problem is not None:
                _fail(f"--arch {arch}: {canonical} {problem}.")
        targets.append((platform, canonical))
    return targets


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "info":
        from jax_triton_rocm import _info

        report = _info.collect()
        print(json.dumps(report, indent=2) if args.json else _info.format_report(report))
        return 0
    targets = _checked_targets(args.arch)
    import jax

    platform = jax.devices()[0].platform
    platform = {"gpu": "cuda"}.get(platform, platform)
    if platform in ("cuda", "rocm") and not args.cross:
        return run_on_gpu(platform)
    if platform not in ("cuda", "rocm"):
        from jax_triton_rocm import _info

        print(f"No GPU here: {_info.no_gpu_reason()}")
    return show_cross_compiled(targets)


if __name__ == "__main__":
    sys.exit(main())
