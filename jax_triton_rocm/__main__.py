"""`python -m jax_triton_rocm`: run a Triton kernel through the bridge, or show what would run.

On a machine with a GPU (CUDA or ROCm) it runs a vector add and a fused softmax inside
`jax.jit` and checks them against jax.numpy. Without one (the usual case on a laptop or CI), it
runs them on the CPU in Triton's interpreter, says why JAX has no GPU, then cross-compiles them
for named architectures (default sm_90, gfx942, gfx950) and prints the launches a GPU would get.

    python -m jax_triton_rocm [demo] [--arch sm_90 --arch gfx942 ...] [--cross]
    python -m jax_triton_rocm info [--json]     versions, plugins, devices, delivery, caches
    python -m jax_triton_rocm --version

Neither prints a Python traceback: a failure of JAX's start-up, of Triton's import or of a
plugin is told as what failed, the likely cause and the fix, with an exit status (0 done, 1 the
demo failed, 2 bad argument, 3 JAX could not start, 4 Triton missing or broken); --traceback
shows the traceback of a failure as well (of an unexpected error: instead).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
import traceback
from typing import TYPE_CHECKING, NoReturn

from jax_triton_rocm._version import __version__
from jax_triton_rocm.cli import _startup
from jax_triton_rocm.cli._startup import PROG

if TYPE_CHECKING:
    from jax_triton_rocm.api._inspect import EmittedCall

DEFAULT_ARCHS = ("sm_90", "gfx942", "gfx950")


def _functions():
    import jax
    import triton

    import jax_triton_rocm as jtr

    from jax_triton_rocm.cli._kernels import kernels

    add_kernel, softmax_kernel = kernels()["add"], kernels()["softmax"]

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
                    carried = _carried(platform, call, launch)
                    shared = launch["shared_mem_bytes"]
                    print(f"  {arch:7s} {name:10s} -> {summary['target']}: {launch['kernel']} "
                          f"grid={launch['grid']} warps={launch['num_warps']} "
                          + ("" if shared is None else f"shared={shared}B ")
                          + f"params={launch['parameters']}; {carried} ({seconds:.2f} s)")
    return 0


def _carried(platform: str, call: EmittedCall, launch: dict) -> str:
    """What the call carries to the GPU, in words: an embedded binary (jaxlib 0.11.1+), Triton
    IR for XLA, or, on older jaxlibs, PTX that jaxlib's ptxas builds (CUDA) or the path of an
    HSACO file that this process wrote and the plugin deletes once read (ROCm)."""
    if launch["embedded_binary_bytes"]:
        binary = "CUBIN" if platform == "cuda" else "HSACO"
        return f"{binary} of {launch['embedded_binary_bytes']} bytes embedded"
    if "ir_bytes" in launch:
        return f"Triton IR of {launch['ir_bytes']} bytes, built by XLA"
    if platform == "cuda":
        ptx = call.message.kernel_call.kernel.ptx
        return f"PTX of {len(ptx)} bytes, which jaxlib's ptxas builds at load"
    return "HSACO in a file of this process, read (and deleted) by jaxlib's ROCm plugin"


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad argument is one line on stderr (no usage block), exit status 2."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{message} (see {PROG} --help)")


def _fail(message: str, status: int = _startup.EXIT_USAGE) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    sys.exit(status)


def _show_traceback(args: argparse.Namespace, err: BaseException | None) -> None:
    """Prints `err`'s traceback on stderr where the command was given --traceback (before the
    message that tells the failure)."""
    if args.traceback and err is not None:
        traceback.print_exception(err, file=sys.stderr)


class _OneLineHandler(logging.Handler):
    """Prints each warning logged during a command as one line on stderr, with no traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        err = record.exc_info[1] if record.exc_info else None
        message = (record.getMessage().strip().splitlines() or [""])[0]
        print(f"{PROG}: warning: {message}"
              + (f" ({_startup.error_summary(err)})" if err is not None else ""), file=sys.stderr)


def _traceback_option(parser: argparse.ArgumentParser, default: object) -> None:
    parser.add_argument("--traceback", action="store_true", default=default,
                        help="show the Python traceback of a failure (for bug reports)")


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
    _traceback_option(parser, False)
    commands = parser.add_subparsers(dest="command", metavar="{demo,info}")
    demo = commands.add_parser("demo", help="run (or cross-compile) two kernels; the default")
    _demo_options(demo)
    info = commands.add_parser("info", help="versions, plugins, devices, delivery, caches")
    info.add_argument("--json", action="store_true", help="print the report as JSON")
    for command in (demo, info):  # SUPPRESS: a subcommand does not reset a flag given before it
        _traceback_option(command, argparse.SUPPRESS)
    return parser


def _checked_targets(archs: list[str] | None) -> list[tuple[str, str]]:
    """(platform, canonical arch) for each --arch, each one checked against the installed Triton.

    Exits with one line on stderr (status 2) for a name that is not an architecture, or one
    Triton cannot compile for. Of the defaults, those whose Triton backend is missing are left
    out with a warning (status 4 if none is left).
    """
    from jax_triton_rocm.cli import _info
    from jax_triton_rocm import backends
    from jax_triton_rocm.routes import _arch

    targets = []
    for arch in archs or DEFAULT_ARCHS:
        try:
            platform, canonical = _info.canonical_arch(arch)
        except ValueError as err:
            _fail(str(err))
        try:
            backends.backend(platform)
        except ImportError as err:
            if archs:
                _fail(f"--arch {arch}: {err}")
            print(f"{PROG}: warning: not cross-compiling for {arch}: {err}", file=sys.stderr)
            continue
        problem = _arch.arch_problem(platform, canonical) if archs else None
        if problem is not None:
            _fail(f"--arch {arch}: {canonical} {problem}.")
        targets.append((platform, canonical))
    if not targets:
        _fail("the installed Triton has no backend for any default architecture.",
              _startup.EXIT_NO_TRITON)
    return targets


def _demo(args: argparse.Namespace, startup: _startup.Startup) -> int:
    """The demo on the GPU JAX started, else on the CPU and cross-compiled; returns the status."""
    from jax_triton_rocm.cli import _kernels
    from jax_triton_rocm import backends
    from jax_triton_rocm.backends import _no_gpu, _vendors
    from jax_triton_rocm.base import _compat, _env
    from jax_triton_rocm.routes.cpu import _interpret

    if startup.failure is not None:
        _fail(startup.failure.text().lstrip(), _startup.EXIT_JAX_DID_NOT_START)
    try:
        _compat.triton_info()
    except ImportError as err:
        _show_traceback(args, err)
        _fail(str(err), _startup.EXIT_NO_TRITON)
    try:
        _env.check_variables()
    except ValueError as err:
        _fail(str(err))
    targets = _checked_targets(args.arch)
    gpu = next((p for p in _vendors.GPU_PLATFORMS if p in startup.platforms), None)
    for problem in startup.problems:
        if gpu is not None or problem.platform is None:  # else the no-GPU reason tells it
            print(f"{PROG}: warning: {problem.text().lstrip()}", file=sys.stderr)
    if gpu is not None and not args.cross:
        try:
            backends.backend(gpu)
        except ImportError as err:
            _fail(str(err), _startup.EXIT_NO_TRITON)
        return run_on_gpu(gpu)
    if gpu is None:
        # Without a GPU plugin this is the expected path, and the first line says so.
        print("Running on the CPU, " + ("as on any machine without a GPU"
                                         if not _vendors.installed_gpu_platforms()
                                         else "as JAX started no GPU device here")
              + ": the kernels in Triton's interpreter, then cross-compiled for GPUs.")
        print(f"  {_no_gpu.no_gpu_reason(startup.problems)}")
        _interpret.mark_explained()  # the line above says why: no warning as well
        _kernels.run_on_cpu(*_functions())
    return show_cross_compiled(targets)


def _run(args: argparse.Namespace) -> int:
    from jax_triton_rocm.cli import _info

    startup = _startup.start()
    _show_traceback(args, startup.error)
    if args.command != "info":
        return _demo(args, startup)
    report = _info.collect(startup)
    print(json.dumps(report, indent=2) if args.json else _info.format_report(report))
    return _info.exit_status(report)


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns its exit status (docs/cli.md's table lists them)."""
    args = _parser().parse_args(argv)
    root = logging.getLogger()
    if not root.handlers:  # the program owns logging: warnings as one line each
        root.addHandler(_OneLineHandler(logging.WARNING))
    try:
        return _run(args)
    except Exception as err:  # noqa: BLE001  (the last guard: a message, not a traceback)
        if args.traceback:
            raise
        print(f"{PROG}: error: the {args.command or 'demo'} failed: "
              f"{_startup.error_summary(err)}\n  likely cause: a bug in jax_triton_rocm or a "
              f"broken install of jax, jaxlib or Triton\n  fix: run `{PROG} info` and report both "
              f"outputs (add --traceback for the traceback)", file=sys.stderr)
        return _startup.EXIT_DEMO_FAILED


if __name__ == "__main__":
    sys.exit(main())
