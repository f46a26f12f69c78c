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


def show_cross_compiled(targets: list[tuple[str, str]]) -> int:
    """Lowers the demo kernels for each (platform, canonical arch) and prints the launches."""
    import jax
    import jax.numpy as jnp

    import jax_triton_rocm as jtr
    from jax_triton_rocm.cli import _kernels

    x = jax.ShapeDtypeStruct((1 << 20,), jnp.float32)
    m = jax.ShapeDtypeStruct((512, 1000), jnp.float32)
    print("Cross-compiling and showing what would be launched, and by whom.")
    for platform, arch in targets:
        with jtr.target_arch(**{platform: arch}):
            for name, fn, args in (("vector add", _kernels.add(), (x, x)),
                                   ("softmax", _kernels.softmax, (m,))):
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
    """What the call carries to the GPU, in words."""
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
    if args.traceback and err is not None:
        traceback.print_exception(err, file=sys.stderr)


class _OneLineHandler(logging.Handler):
    """Prints each warning logged during a command as one line on stderr, with no traceback."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"{PROG}: warning: {_startup.one_line(record)}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"jax_triton_rocm {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="{demo,info}")
    demo = commands.add_parser("demo", help="run (or cross-compile) two kernels; the default")
    info = commands.add_parser("info", help="versions, plugins, devices, delivery, caches")
    info.add_argument("--json", action="store_true", help="print the report as JSON")
    for command in (parser, demo):
        command.add_argument("--arch", action="append",
                             help="architecture to cross-compile for (sm_90, 9.0, gfx942, ...); "
                                  "repeatable; default: " + ", ".join(DEFAULT_ARCHS))
        command.add_argument("--cross", action="store_true",
                             help="cross-compile even when a GPU is present")
    # SUPPRESS: a subcommand does not reset a flag given before it
    for command, default in ((parser, False), (demo, argparse.SUPPRESS), (info, argparse.SUPPRESS)):
        command.add_argument("--traceback", action="store_true", default=default,
                             help="show the Python traceback of a failure (for bug reports)")
    return parser


def _checked_targets(archs: list[str] | None) -> list[tuple[str, str]]:
    """(platform, canonical arch) for each --arch that the installed Triton compiles for; a
    default whose Triton backend is missing is left out with a warning."""
    from jax_triton_rocm import backends
    from jax_triton_rocm.backends import _vendors
    from jax_triton_rocm.routes import _arch

    targets = []
    for arch in archs or DEFAULT_ARCHS:
        platform = "rocm" if str(arch).strip().lower().startswith("gfx") else "cuda"
        try:
            canonical = _vendors.normalize_arch(platform, arch, what="--arch")
        except ValueError as err:
            _fail(str(err) if platform == "rocm" else
                  f"--arch {arch!r} is neither a CUDA architecture (sm_90, 9.0, 90) nor an AMD "
                  f"one (gfx90a, gfx942, gfx950, gfx1100).")
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
        return _kernels.run_checked(gpu)
    if gpu is None:
        # Without a GPU plugin this is the expected path, and the first line says so.
        print("Running on the CPU, " + ("as on any machine without a GPU"
                                         if not _vendors.installed_gpu_platforms()
                                         else "as JAX started no GPU device here")
              + ": the kernels in Triton's interpreter, then cross-compiled for GPUs.")
        print(f"  {_no_gpu.no_gpu_reason(startup.problems)}")
        from jax_triton_rocm.routes.cpu import _interpret  # imports Triton, checked above

        _interpret.mark_explained()  # the line above says why: no warning as well
        _kernels.run_checked("cpu")
    return show_cross_compiled(targets)


def main(argv: list[str] | None = None) -> int:
    """Runs the command line; returns its exit status (docs/cli.md's table lists them)."""
    args = _parser().parse_args(argv)
    root = logging.getLogger()
    if not root.handlers:  # the program owns logging: warnings as one line each
        root.addHandler(_OneLineHandler(logging.WARNING))
    try:
        from jax_triton_rocm.cli import _info

        startup = _startup.start()
        _show_traceback(args, startup.error)
        if args.command != "info":
            return _demo(args, startup)
        report = _info.collect(startup)
        print(json.dumps(report, indent=2) if args.json else _info.format_report(report))
        if startup.failure:
            return _startup.EXIT_JAX_DID_NOT_START
        return _startup.EXIT_NO_TRITON if "error" in report["triton"] else _startup.EXIT_OK
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
