"""What one launch through jaxlib's Triton FFI target costs, by what the call carries.

`python benchmarks/launch_cost.py` (on a GPU machine) prints, from one run, µs per kernel in a
jitted chain of 200 calls (1024 float32 each), with XLA's command buffers on and off (each
setting in a fresh process), and the ratio to XLA's own add kept unfused, for:

- the embedded binary's size: the small add kernel, and the same add with a dead, unrolled
  branch (taken only for negative data) whose CUBIN is about 20 times larger;
- the number of parameters: 4 (the add) against 30 (14 inputs, 15 scalars, 1 output);
- what the proto carries besides: the CUBIN in `module_image` with `TritonKernel.ttir` empty
  and the CUBIN's copy of its PTX text left out (the package's default), the same with that
  copy kept (`JAX_TRITON_ROCM_KEEP_PTX_TEXT=1`), with `ttir` filled, and PTX only (no `module_image`: the
  `ptx` field holds the PTX text, which jaxlib's handler of 0.11.1+ hashes and copies at each
  launch, as it copies `ttir`);
- autotuned calls (2 configs) against single ones, on the default (legacy) target and on the
  FFI target (forced);
- XLA's own Triton call (`xla_native=True`) for the same kernels, as the reference route.

`--rows KEY,KEY` measures (or checks) those rows only, XLA's add always with them.
`--dry-run` needs no GPU: it lowers every row for CUDA sm_90 under `target_arch`, checks the
route each takes and what its opaque carries (binary sizes and their ratio, `ttir`, PTX,
parameter and config counts), prints them, and exits with 1 if a check fails. Without a CUDA
or ROCm device the default mode prints one line saying so and exits with status 1.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.gpu_needed(__file__, unless=("--dry-run", "--worker"))

import argparse
import json
import sys

import jax
import triton

import jax_triton_rocm as jtr

from _common import (CHAIN_LENGTH, DRY_RUN_ARCH, chain_per_kernel_us, gpu_missing, print_rows,
                     run_fresh)
from _launch_cases import (BASELINE, BASELINE_KEY, COMPARISONS, ROWS, TUNED_CONFIGS, SIZE, Row,
                           check_route, expected_target, lowered_chain, plugin_features, row_op,
                           variant_context)

WORKER_TIMEOUT_S = 240.0
MIN_BINARY_RATIO = 15.0  # what "about 20 times larger" must at least be for the rows to mean it

def measure_rows(length: int, platform_name: str | None = None, from_row: int = 0) -> None:
    """Prints, one JSON line per row (from `from_row` on) as it is done, the row's per-kernel
    µs in this process (its XLA flags set), or the error's text where it fails: one broken row
    (or a crash) never costs the rows before it. The platform is the device's unless named."""
    if platform_name is None:
        platform_name = {"gpu": "cuda"}.get(jax.devices()[0].platform,
                                            jax.devices()[0].platform)
    for row in ROWS[from_row:]:
        try:
            with variant_context(row.variant, platform_name):
                problem = check_route(row, lowered_chain(row, platform_name, 2).as_text())
                if problem:
                    raise RuntimeError(problem)
                value = chain_per_kernel_us(row_op(row), length, SIZE)
        except Exception as err:  # noqa: BLE001  (reported in the table)
            value = f"failed: {type(err).__name__}: {str(err).splitlines()[0][:90]}"
        print(json.dumps({row.key: value}), flush=True)


def worker_results(length: int, command_buffers: bool) -> dict[str, float | str]:
    """The rows measured by worker processes. A worker that dies (or hangs) on a row marks that
    row failed, with the end of its stderr, and a fresh worker goes on from the next row."""
    results: dict[str, float | str] = {}
    start = 0
    while start < len(ROWS):
        status, stdout, stderr = run_fresh(
            "launch_cost.py", ["--worker", str(length), "--from-row", str(start), "--rows",
                               ",".join(row.key for row in ROWS)],
            command_buffers, timeout_s=WORKER_TIMEOUT_S)
        for line in stdout.splitlines():
            if line.startswith("{"):
                results.update(json.loads(line))
        left = [i for i in range(start, len(ROWS)) if ROWS[i].key not in results]
        if not left:
            break
        tail = " | ".join(stderr.strip().splitlines()[-3:])[-300:]
        results[ROWS[left[0]].key] = f"failed: the worker exited ({status}) on it: {tail}"
        start = left[0] + 1
    return results


def quotient(values: dict, numerator: str, denominator: str) -> str:
    top, bottom = values.get(numerator), values.get(denominator)
    if isinstance(top, float) and isinstance(bottom, float):
        return f"{top / bottom:.3f}"
    return "-"


def carried(lowered) -> dict:
    """What the first Triton call of a lowered chain carries: sizes and counts."""
    [first, *_] = jtr.kernel_calls(lowered)
    message = first.message
    if message.HasField("autotuned_kernel_call"):
        calls = [c.kernel_call for c in message.autotuned_kernel_call.configs]
    else:
        calls = [message.kernel_call]
    kernel = calls[0].kernel
    return {"opaque": len(first.opaque), "configs": len(calls),
            "image": kernel.module_image.object_file,
            "binary": len(kernel.module_image.object_file) if kernel.HasField("module_image")
            else 0,
            "ttir": max(len(c.kernel.ttir) for c in calls),
            "ptx": len(kernel.ptx), "params": len(calls[0].parameters)}


def carried_problem(row: Row, seen: dict, embeds: bool) -> str | None:
    """Why what a row's call carries is not what the row is meant to measure, or None; `embeds`
    says whether the plugin loads the binary from `module_image` (jax 0.11.1+)."""
    if row.variant in ("default", "ffi") and seen["ttir"]:
        return "expected ttir empty"
    if row.variant in ("default", "ffi", "ttir", "ptx_text") and bool(seen["binary"]) != embeds:
        return f"expected the binary {'in' if embeds else 'not in'} module_image"
    if row.variant == "ttir" and not seen["ttir"]:
        return "expected ttir filled"
    if row.variant == "ptx_only" and (seen["binary"] or seen["ptx"] < 1000):
        return "expected no module_image and the PTX text in ptx"
    if embeds and row.variant in ("default", "ptx_text") and (
            (b".entry " in seen["image"]) != (row.variant == "ptx_text")):
        return ("expected the CUBIN's PTX text " + ("kept" if row.variant == "ptx_text"
                                                    else "left out"))
    if row.op.startswith("tuned") and seen["configs"] != len(TUNED_CONFIGS):
        return f"expected {len(TUNED_CONFIGS)} configs"
    if row.op == "wide" and seen["params"] != 30:
        return "expected 30 parameters"
    return None


def dry_run() -> int:
    """Lowers every row for CUDA sm_90 and checks its route and what it carries; prints them.

    Returns 1 if a check fails (or a row does not lower), else 0.
    """
    table, failures, binaries = [], [], {}
    features = plugin_features("cuda")
    # Without module_image (jax < 0.11.1) the binary is the PTX text in `ptx`.
    size_of = "binary" if features.module_image else "ptx"
    with jtr.target_arch(cuda=DRY_RUN_ARCH):
        for row in ROWS:
            try:
                with variant_context(row.variant, "cuda"):
                    lowered = lowered_chain(row, "cuda", 2)
                problem = check_route(row, lowered.as_text())
                seen = carried(lowered) if row.variant not in ("xla", "native") else {}
                problem = problem or (carried_problem(row, seen, features.module_image)
                                      if seen else None)
            except Exception as err:  # noqa: BLE001  (reported below)
                seen, problem = {}, f"{type(err).__name__}: {str(err).splitlines()[0][:90]}"
            if row.variant == "default" and seen:
                binaries[row.op] = seen[size_of]
            target = expected_target(row) if row.variant != "xla" else "XLA"
            table.append((row.label, target,
                          *(str(seen.get(k, "-")) for k in ("opaque", "binary", "ttir", "ptx",
                                                            "params", "configs")),
                          "ok" if problem is None else "FAILED"))
            if problem:
                failures.append(f"{row.label}: {problem}")
    print_rows(table, ("target", "opaque B", "binary B", "ttir", "ptx", "params", "configs",
                       "check"))
    if "big" in binaries and "small" in binaries:
        ratio = binaries["big"] / max(binaries["small"], 1)
        what = "CUBIN" if features.module_image else "PTX"
        print(f"big / small binary (sm_90 {what}): {ratio:.1f}x (at least {MIN_BINARY_RATIO} "
              f"wanted)")
        if ratio < MIN_BINARY_RATIO:
            failures.append(f"the big kernel's binary is only {ratio:.1f}x the small one's")
    for line in failures:
        print(f"FAILED: {line}")
    return 1 if failures else 0


def report(length: int) -> int:
    measured = {}
    for setting in (True, False):  # each setting's figures printed as soon as they are in
        measured[setting] = worker_results(length, setting)
        print(f"command buffers {'on' if setting else 'off'}: {json.dumps(measured[setting])}",
              flush=True)
    on, off = measured[True], measured[False]
    print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}; "
          f"Triton {triton.__version__}")
    print(f"\nchain of {length} calls, µs per kernel (ratio to {BASELINE}):")

    def ratio(values: dict, name: str) -> float | str:
        value, base = values.get(name), values.get(BASELINE_KEY)
        ok = isinstance(value, float) and isinstance(base, float)
        return value / base if ok else "-"

    def cell(values: dict, name: str) -> float | str:
        value = values.get(name, "-")
        return value if isinstance(value, float) else "failed"  # why: listed below the table

    print_rows([(row.label, cell(on, row.key), ratio(on, row.key),
                 cell(off, row.key), ratio(off, row.key)) for row in ROWS],
               ("cmdbuf on", "ratio", "cmdbuf off", "ratio"))
    print("\nside by side (command buffers on, off):")
    for what, numerator, denominator in COMPARISONS:
        print(f"  {what}: {quotient(on, numerator, denominator)}, "
              f"{quotient(off, numerator, denominator)}")
    failed = [f"{key} (command buffers {setting}): {value}"
              for setting, values in (("on", on), ("off", off))
              for key, value in values.items() if not isinstance(value, float)]
    for line in failed:
        print(line)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU: lower every row for CUDA sm_90 and check what it carries")
    parser.add_argument("--length", type=int, default=CHAIN_LENGTH,
                        help=f"calls per chain (default {CHAIN_LENGTH})")
    parser.add_argument("--rows", help="the rows to measure, by key (e.g. small/default,big/ttir;"
                                       " the baseline is always measured); default: all")
    parser.add_argument("--worker", type=int, metavar="LENGTH", help=argparse.SUPPRESS)
    parser.add_argument("--from-row", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.length < 1:
        parser.error(f"--length={args.length}: give a positive number of calls")
    if args.rows:
        global ROWS
        known = {row.key: row for row in ROWS}
        unknown = sorted(set(args.rows.split(",")) - set(known))
        if unknown:
            parser.error(f"--rows: no row {', '.join(unknown)}; rows: {', '.join(known)}")
        ROWS = tuple(row for row in ROWS
                     if row.key == BASELINE_KEY or row.key in args.rows.split(","))
    if args.dry_run:
        return dry_run()
    if gpu_missing("launch_cost.py"):
        return 1
    if args.worker is not None:
        measure_rows(args.worker, from_row=args.from_row)
        return 0
    return report(args.length)


if __name__ == "__main__":
    sys.exit(main())
