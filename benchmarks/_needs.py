"""What a benchmark script needs, said in its first line, before it imports JAX (so within a
second of starting).

Every script calls `gpu_needed` or `cpu_is_enough` first thing when run as a script. A script
that needs a GPU exits with status 1 after one line on stderr where this machine has no GPU
device at all (no /dev/nvidia* or /dev/kfd); where there is one, JAX's own check follows
(`_common.gpu_missing`, which also names why JAX could not use it). Imports nothing heavy.
"""

from __future__ import annotations

import glob
import os
import sys

# Device files a GPU driver makes: NVIDIA's per-GPU nodes, AMD's compute interface.
GPU_DEVICE_FILES = ("/dev/nvidia[0-9]*", "/dev/kfd")


def gpu_device_files() -> list[str]:
    """The GPU device files present here; empty on a machine without a GPU driver."""
    return sorted(path for pattern in GPU_DEVICE_FILES for path in glob.glob(pattern))


def _name(script: str) -> str:
    return f"benchmarks/{os.path.basename(script)}"


def gpu_needed(script: str, *, unless: tuple[str, ...] = ()) -> None:
    """For a script that needs a GPU unless its arguments hold one of `unless` (modes or flags
    that run on the CPU, or workers its parent starts): exits now, with one line on stderr,
    where there is no GPU device here. `--help` is always answered."""
    args = sys.argv[1:]
    if any(arg in ("-h", "--help") or arg in unless for arg in args) or gpu_device_files():
        return
    print(f"{_name(script)}: needs a CUDA or ROCm GPU, and this machine has none (no "
          f"{' or '.join(GPU_DEVICE_FILES)} device)", file=sys.stderr, flush=True)
    sys.exit(1)


def cpu_is_enough(script: str, what: str) -> None:
    """For a script that runs on the CPU: says so on stdout, with what it does (and for how
    long), before anything slow. Silent for `--help`."""
    if not any(arg in ("-h", "--help") for arg in sys.argv[1:]):
        print(f"{_name(script)}: runs on the CPU (no GPU needed): {what}", flush=True)


def chosen_kernels(parser, text: str, known: tuple[str, ...]) -> list[str]:
    """The kernels `--kernels` names (comma-separated `text`), in its order; an unknown name
    ends the run through `parser.error`, listing the known ones."""
    kernels = [k for k in text.split(",") if k]
    unknown = sorted(set(kernels) - set(known))
    if unknown:
        parser.error(f"--kernels: unknown {', '.join(unknown)}; the kernels are "
                     f"{', '.join(known)}")
    return kernels
