"""Re-lowering cost of jax_triton_rocm calls against lowering XLA's own add; no GPU needed.

`python benchmarks/relower.py` (or `python benchmarks/overhead.py relower`) lowers for CUDA
(sm_90, under `target_arch`) with JAX's caches cleared before each lowering and the package's
kernel cache kept, and prints, from one run:

1. Same shape: lowering the same jitted add again (the package's lowered-call memo hits), for
   both Triton routes, interleaved with XLA's add. The goal is 1.25 at most.
2. New shape: a jitted add at a new length every round, interleaved with lowering XLA's add at
   the same length. The kernel binary is compiled once, before: the length is the runtime
   scalar `n` (every length a multiple of 128, so its class stays on both routes), only the grid
   changes. Both routes (XLA's call loads `n` from a 0-d constant operand, so a new length is
   no new compile); the goal, for jaxlib's FFI target, is 1.10 at most. Medians of wall time
   and of the lowering thread's CPU time: on a quiet machine they agree; on a busy one the wall
   time also counts the turns of other processes, which CPU time leaves out.

Both tables also lower an add whose kernel calls a `@triton.jit` helper: what following the
kernel's call graph at each lowering costs (every lowering looks its callees up again, so a
rebound helper compiles anew).

Where jax-triton is installed its rows are added (lowered for compute capability 90, as ours):
the goal is also no more than jax-triton. Without it, one line says why.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.cpu_is_enough(__file__, "lowers for CUDA sm_90 under target_arch; under a minute")

import argparse
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state

from _common import add_kernel, native_add, print_rows, triton_add, xla_add

CACHED_GOAL = 1.25
NEW_SHAPE_GOAL = 1.10
BASE_LENGTH = 1024


def _lower(fn, length: int) -> tuple[float, float]:
    """Seconds to trace and lower `fn` on two float32[length], JAX's caches cleared first: wall
    time and this thread's CPU time."""
    x = jax.ShapeDtypeStruct((length,), jnp.float32)
    jax.clear_caches()
    wall, cpu = time.perf_counter(), time.thread_time()
    jax.jit(fn).trace(x, x).lower(lowering_platforms=("cuda",))
    return time.perf_counter() - wall, time.thread_time() - cpu


def interleaved_ms(fns: dict, lengths: list[int]) -> dict[str, tuple[float, float]]:
    """Median ms per function to lower it at each of `lengths` in turn, the functions
    interleaved within a round (so a slow spell of the machine hits them all), each first in
    turn (what one lowering at a new length leaves behind, another may reuse): (wall, CPU), the
    CPU time being this thread's (on a busy machine the wall time also counts other processes'
    turns). Each kernel is compiled by a first lowering, before.

    Raises:
      RuntimeError: a round compiled a kernel (the premise, one compiled binary, broke).
    """
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in fns}
    with jtr.target_arch(cuda="sm_90"):
        for fn in fns.values():
            _lower(fn, BASE_LENGTH)
        compiles = _state.COMPILED_KERNELS.stats["compiles"]
        order = list(fns.items())
        for round_index, length in enumerate(lengths):
            shift = round_index % len(order)
            for name, fn in order[shift:] + order[:shift]:
                times[name].append(_lower(fn, length))
        if _state.COMPILED_KERNELS.stats["compiles"] != compiles:
            raise RuntimeError("a new length compiled a new kernel; the lengths must keep the "
                               "class of n (its divisibility by 16, and by 128 on XLA's route)")
    return {name: tuple(statistics.median(t[i] for t in values) * 1e3 for i in (0, 1))
            for name, values in times.items()}


@triton.jit
def _sum(x, y):
    return x + y


@triton.jit
def helper_add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, _sum(tl.load(x_ptr + offsets, mask=mask),
                                     tl.load(y_ptr + offsets, mask=mask)), mask=mask)


def helper_add(x, y):
    """The add with its sum in a helper, through jaxlib's FFI target."""
    return jtr.triton_call(x, y, x.size, kernel=helper_add_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, 1024),), BLOCK=1024, xla_native=False)


def ffi_add(x, y):
    """The add through jaxlib's FFI target, taking (x, y) like the other functions (jit reads a
    function's signature at every trace)."""
    return triton_add(x, y)


def new_lengths(rounds: int) -> list[int]:
    """Distinct lengths, multiples of 128 like BASE_LENGTH: n keeps its class (Triton's
    divisibility by 16, and on XLA's route its power-of-two scale, 128)."""
    return [BASE_LENGTH + 128 * i for i in range(1, rounds + 1)]


def jax_triton_add() -> tuple[object | None, str]:
    """jax-triton's call of the same kernel, and its version; (None, why) where it is absent.

    jax-triton 0.3 sets TRITON_CACHE_DIR to "" when imported, which breaks every later
    `triton.compile` in the process; the variable is put back as it was.
    """
    saved = os.environ.get("TRITON_CACHE_DIR")
    try:
        import jax_triton
    except Exception as err:  # noqa: BLE001  (a comparison row, never the benchmark's failure)
        return None, f"{type(err).__name__}: {str(err).splitlines()[0][:80]}"
    finally:
        if saved is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved

    def add(x, y):
        return jax_triton.triton_call(
            x, y, x.size, kernel=add_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            grid=(triton.cdiv(x.size, 1024),), BLOCK=1024, compute_capability=90)

    return add, getattr(jax_triton, "__version__", "?")


def _table(title: str, times: dict[str, tuple[float, float]]) -> list[tuple]:
    xla_wall, xla_cpu = times["XLA add"]
    return [(f"re-lower, {title}, ms: {name}", wall, wall / xla_wall, cpu, cpu / xla_cpu)
            for name, (wall, cpu) in times.items()]


def relower_rows(rounds: int = 80) -> list[tuple]:
    """The rows of both tables; prints a line where jax-triton is left out, and why."""
    fns = {"XLA add": xla_add, "Triton add, jaxlib FFI target": ffi_add,
           "Triton add calling a helper, FFI target": helper_add,
           "Triton add, XLA Triton call": native_add}
    jt_add, jt_version = jax_triton_add()
    jt_name = f"Triton add, jax-triton {jt_version}"
    if jt_add is not None:
        try:
            interleaved_ms({jt_name: jt_add}, new_lengths(2))
            fns[jt_name] = jt_add
        except Exception as err:  # noqa: BLE001  (a comparison row, never the report's failure)
            jt_add, jt_version = None, f"{type(err).__name__}: {str(err).splitlines()[0][:80]}"
    if jt_add is None:
        print(f"jax-triton: not measured ({jt_version})")
    rows = _table("same shape", interleaved_ms(fns, [BASE_LENGTH] * max(rounds, 100)))
    return rows + _table("new shape", interleaved_ms(fns, new_lengths(rounds)))


def print_report(rounds: int = 80) -> None:
    rows = relower_rows(rounds)
    print("median ms of wall time and of the lowering thread's CPU time, the functions "
          "interleaved:")
    print_rows(rows, ("wall", "ratio", "CPU", "ratio"))
    new = {row[0].split("ms: ")[1]: row[1:] for row in rows if "new shape" in row[0]}
    same = {row[0].split("ms: ")[1]: row[1:] for row in rows if "same shape" in row[0]}
    ours = "Triton add, jaxlib FFI target"
    for what, goal, values in (("same shape", CACHED_GOAL, same[ours]),
                               ("new shape", NEW_SHAPE_GOAL, new[ours])):
        print(f"goal, {what}: {goal} at most; measured {values[1]:.3f} wall, {values[3]:.3f} "
              f"CPU")
    for name, values in new.items():
        if "jax-triton" in name:
            for route in ("jaxlib FFI target", "XLA Triton call"):
                mine = new[f"Triton add, {route}"]
                print(f"new shape, {route} / {name.removeprefix('Triton add, ')}: "
                      f"{mine[0] / values[0]:.3f} wall, {mine[2] / values[2]:.3f} CPU "
                      f"(goal: 1.0 at most)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=80,
                        help="new lengths lowered per function (default 80)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds={args.rounds}: give a positive number of rounds")
    print_report(args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
