"""How `real_kernels.py` checks and times one case in one process: the route its calls take
(from the package's route log), its result against jax.numpy, the package's chain, and the same
chain launched from PyTorch, eagerly and replayed from a CUDA graph.

Not a script: `real_kernels.py` imports it.
"""

from __future__ import annotations

import contextlib
import functools
import glob
import gzip
import json
import logging
import os
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from _common import (chain, median_seconds, plain_add, platform, torch_wall_us, triton_add,
                     xla_add_unfused)
from _real_cases import Case

ROUTE_LOGGER = "jax_triton_rocm"
ADD = "add"  # the 200-small-add chain, measured beside the real kernels


def emit(line: str) -> None:
    """One line on stdout in one write, flushed: the parent reads stdout and stderr through one
    pipe, where two writes could let another line in between."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def progress(text: str) -> None:
    emit(f"real_kernels: {text}")


class RouteLog(logging.Handler):
    """The routes the package's lowerings take while in a `with`: the package logs each at
    DEBUG on the "jax_triton_rocm" logger, with the record attributes `jax_triton_rocm_route`,
    `jax_triton_rocm_kernel` and `jax_triton_rocm_reason` (`routes._primitive.log_route`)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: dict[tuple[str, str], str] = {}

    def emit(self, record: logging.LogRecord) -> None:
        route = getattr(record, "jax_triton_rocm_route", None)
        if route is not None:
            kernel = getattr(record, "jax_triton_rocm_kernel", "?")
            self.seen.setdefault((kernel, route), getattr(record, "jax_triton_rocm_reason", ""))

    def __enter__(self) -> RouteLog:
        logger = logging.getLogger(ROUTE_LOGGER)
        self.saved_level = logger.level
        logger.addHandler(self)
        logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc) -> None:
        logger = logging.getLogger(ROUTE_LOGGER)
        logger.removeHandler(self)
        logger.setLevel(self.saved_level)

    def routes(self) -> list[list[str]]:
        """[kernel, route, reason] for each kernel and route seen, sorted."""
        return [[kernel, route, reason] for (kernel, route), reason in sorted(self.seen.items())]

    def summary(self) -> str:
        """The route ("xla", "jaxlib", ...) where every kernel took the same, else each
        kernel's, named by what its name does not share ("dwdb: xla, dx: jaxlib"); "none
        logged" where no lowering logged one."""
        routes = self.routes()
        if not routes:
            return "none logged"
        if len({route for _, route, _ in routes}) == 1:
            return routes[0][1]
        names = [kernel.removesuffix("_kernel") for kernel, _, _ in routes]
        shared = os.path.commonprefix(names)
        shared = shared[:shared.rfind("_") + 1]
        return ", ".join(f"{name[len(shared):]}: {route}"
                         for name, (_, route, _) in zip(names, routes))


def max_error(outputs, reference, tolerance: tuple[float, float]) -> tuple[float, bool]:
    """The largest absolute difference between `outputs` and `reference` (inf for a NaN or a
    wrong shape), and whether every element is within atol + rtol * |reference|."""
    atol, rtol = tolerance
    worst, within = 0.0, len(outputs) == len(reference)
    for out, ref in zip(outputs, reference):
        out, ref = np.asarray(out, np.float32), np.asarray(ref, np.float32)
        if out.shape != ref.shape:
            return float("inf"), False
        diff = np.abs(out - ref)
        diff = np.where(np.isnan(diff), np.inf, diff)
        worst = max(worst, float(diff.max(initial=0.0)))
        within = within and bool(np.all(diff <= atol + rtol * np.abs(ref)))
    return worst, within


# What a chain returns besides its state: every call's other outputs ("all"), or the last
# call's ("last"); `real_kernels.py --keep` sets it in a worker.
KEEP = "all"


def chain_of(call: Callable, sizes: dict, length: int) -> Callable:
    """(state, consts) -> (state, kept): `length` calls, each on the previous one's first output;
    the others are kept (returned: every call's, or with `KEEP` "last" the last call's). Each
    call's first output feeds the next, so no call may be dropped either way; JAX makes one
    array per returned output at every execution."""
    def chained(state, consts):
        kept = []
        for step in range(length):
            outputs = call(sizes, step, *state, *consts)
            state = tuple(outputs[:1])
            kept.append(tuple(outputs[1:]))
        return state, (kept if KEEP == "all" else kept[-1:])

    return chained


def gpu_spans_us(trace_file: str, split_gap_us: float) -> list[float]:
    """The GPU timeline of each execution in a Perfetto trace that JAX's profiler wrote: from
    the start of an execution's first kernel to the end of its last, idle gaps between its
    kernels included (what CUDA events around the same launches measure). Executions are told
    apart by GPU idle gaps longer than `split_gap_us`. [] where the trace holds no GPU kernels."""
    with gzip.open(trace_file) as file:
        data = json.load(file)
    events = data["traceEvents"] if isinstance(data, dict) else data
    processes = {e["pid"]: e["args"]["name"] for e in events
                 if e.get("ph") == "M" and e.get("name") == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e.get("ph") == "M" and e.get("name") == "thread_name"}
    devices = {pid for pid, name in processes.items() if "/device:GPU" in name}
    kernels = [e for e in events if e.get("ph") == "X" and e.get("pid") in devices]
    # Streams hold the kernels themselves; other lines of a device (XLA ops, modules) span them.
    streams = [e for e in kernels if threads.get((e["pid"], e["tid"]), "").startswith("Stream")]
    intervals = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in (streams or kernels))
    spans, start, end = [], None, None
    for begin, finish in intervals:
        if end is not None and begin - end > split_gap_us:
            spans.append(end - start)
            start = None
        start = begin if start is None else start
        end = finish if end is None else max(end, finish)
    if start is not None:
        spans.append(end - start)
    return spans


def gpu_timeline_us(fn: Callable, args: tuple, length: int, executions: int = 5) -> float | None:
    """µs per call on the GPU's timeline in `executions` runs of `fn(*args)` (a chain of
    `length` calls) under JAX's profiler, the median run: what PyTorch's side measures with CUDA
    events, without the host time JAX spends on each execution before its GPU work starts (the
    wall-clock figure includes it). None where the profiler records no GPU kernels here, or
    where the trace cannot be told apart into `executions` runs (a GPU idle gap of over 1 ms
    inside a run)."""
    jax.block_until_ready(fn(*args))
    with tempfile.TemporaryDirectory() as folder:
        try:
            with jax.profiler.trace(folder, create_perfetto_trace=True):
                for _ in range(executions):
                    jax.block_until_ready(fn(*args))
                    time.sleep(0.005)  # an idle gap that tells the executions apart
        except Exception:  # noqa: BLE001  (no profiler here: the figure is left out)
            return None
        traces = glob.glob(os.path.join(folder, "**", "perfetto_trace.json.gz"), recursive=True)
        spans = gpu_spans_us(traces[0], split_gap_us=1000.0) if traces else []
    if len(spans) != executions:
        return None
    return statistics.median(spans) / length


QUEUED = 10  # executions queued back to back per timed figure


def queued_seconds(fn: Callable, args: tuple, executions: int = QUEUED,
                   repeats: int = 5) -> float:
    """Seconds per execution of `fn(*args)`, `executions` of them queued back to back and only
    the last waited for (median of `repeats`): JAX's asynchronous dispatch prepares each
    execution while the GPU runs the one before, as a training loop runs, and as PyTorch's side
    launches ahead of its GPU work. What is left of JAX's per-execution host time is what the
    GPU work does not hide."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready([fn(*args) for _ in range(executions)])
        times.append((time.perf_counter() - start) / executions)
    return statistics.median(times)


def attempt(what: str, fn: Callable) -> dict:
    """fn()'s result, or {"failed": the error} after printing its traceback as progress."""
    try:
        return fn()
    except Exception as err:  # noqa: BLE001  (reported in the table)
        for line in traceback.format_exc().rstrip().splitlines():
            progress(f"  {what}: {line}")
        return {"failed": f"{type(err).__name__}: {(str(err).splitlines() or [''])[0][:200]}"}


def package_side(case: Case, sizes: dict, state, consts, reference, length: int,
                 repeats: int) -> dict:
    """The package's result checked once, then µs per call in a jitted chain of `length`."""
    single = jax.jit(functools.partial(case.package, sizes, 0))
    error, correct = max_error(single(*state, *consts), reference, case.tolerance)
    progress(f"{case.name}: package max error {error:.2e} ({'ok' if correct else 'WRONG'})")
    found = {"max_error": error, "correct": correct}
    if correct:
        chained = jax.jit(chain_of(case.package, sizes, length))
        found["us"] = median_seconds(chained, state, consts, repeats=repeats) / length * 1e6
        found["queued_us"] = queued_seconds(chained, (state, consts)) / length * 1e6
        gpu_us = gpu_timeline_us(chained, (state, consts), length)
        if gpu_us is not None:
            found["gpu_us"] = gpu_us
        progress(f"{case.name}: package {found['us']:.3f} µs per call, queued "
                 f"{found['queued_us']:.3f}, on the GPU's timeline "
                 f"{'-' if gpu_us is None else f'{gpu_us:.3f}'}")
    return found


def to_torch(array, device: str):
    import torch

    return torch.from_numpy(np.array(array)).to(device)


def cuda_event_us(run: Callable, length: int, repeats: int) -> float:
    """µs per call of `run()`, `length` calls, timed by CUDA events (median of `repeats`)."""
    import torch

    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3 / length)
    return statistics.median(times)


def torch_side(case: Case, sizes: dict, state, consts, reference, length: int,
               repeats: int, device: str) -> dict:
    """PyTorch's result checked once, then µs per call of the same chain launched eagerly, by
    wall clock and between CUDA events, one chain and `QUEUED` chains between the CUDA events (as
    the package's side queues its executions), and replayed from a CUDA graph (the kernels
    alone)."""
    import torch

    state = tuple(to_torch(a, device) for a in state)
    consts = tuple(to_torch(a, device) for a in consts)
    outputs = [out.cpu() for out in case.torch(sizes, 0, *state, *consts)]
    error, correct = max_error(outputs, reference, case.tolerance)
    progress(f"{case.name}: PyTorch max error {error:.2e} ({'ok' if correct else 'WRONG'})")
    found = {"max_error": error, "correct": correct}
    if not correct:
        return found
    chained = chain_of(case.torch, sizes, length)

    def run():
        return chained(state, consts)

    found["us"] = cuda_event_us(run, length, repeats)
    found["wall_us"] = torch_wall_us(run, length, repeats)
    found["queued_us"] = cuda_event_us(lambda: [run() for _ in range(QUEUED)], length * QUEUED,
                                       max(3, repeats // 3))
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()  # capture wants its warm-up on a side stream
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run()
    found["alone_us"] = cuda_event_us(graph.replay, length, repeats)
    del graph
    torch.cuda.empty_cache()
    progress(f"{case.name}: PyTorch {found['wall_us']:.3f} µs per call by wall clock, "
             f"{found['us']:.3f} between CUDA events, queued "
             f"{found['queued_us']:.3f}, alone "
             f"{found['alone_us']:.3f}")
    return found


def torch_device() -> tuple[str | None, str]:
    """("cuda", version) where PyTorch sees a GPU (NVIDIA or AMD), else (None, why not)."""
    try:
        import torch
    except ImportError:
        return None, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return None, f"PyTorch {torch.__version__} sees no GPU"
    return "cuda", torch.__version__


def tma_missing() -> str | None:
    """Why host-side TMA descriptors cannot run here, or None."""
    device = jax.devices()[0]
    if platform() != "cuda":
        return f"needs an NVIDIA sm_90+ GPU for host TMA; this is {device.device_kind}"
    capability = str(getattr(device, "compute_capability", "0"))
    if float(capability) < 9.0:
        return f"needs sm_90+ for host TMA; this GPU is sm_{capability.replace('.', '')}"
    return None


ENV_XLA_NATIVE = "JAX_TRITON_ROCM_XLA_NATIVE"
FORCED_ROUTES = (("jaxlib", "0"), ("xla", "1"))  # each route, as its variable forces it


@contextlib.contextmanager
def forced_route(flag: str | None):
    """Every call lowered in the `with` takes the route JAX_TRITON_ROCM_XLA_NATIVE=`flag`
    forces ("0": jaxlib's, "1": XLA's; None: the default); every cache is emptied on both
    sides, so that no lowering made under another setting is served."""
    import jax_triton_rocm as jtr

    saved = os.environ.get(ENV_XLA_NATIVE)
    if flag is None:
        os.environ.pop(ENV_XLA_NATIVE, None)
    else:
        os.environ[ENV_XLA_NATIVE] = flag
    jtr.clear_caches()
    try:
        yield
    finally:
        os.environ.pop(ENV_XLA_NATIVE, None)
        if saved is not None:
            os.environ[ENV_XLA_NATIVE] = saved
        jtr.clear_caches()


def bitwise_difference(package: list, torch_runs: list[list]) -> dict:
    """The package's outputs against two launches of the same kernel from PyTorch, byte for
    byte: "equal", "unequal" (with the bytes that differ), or "nondeterministic" where the two
    PyTorch launches disagree (those bytes are not held against the package)."""
    first, second = torch_runs
    if len(package) != len(first):
        return {"verdict": "unequal", "detail": f"{len(package)} outputs against "
                                                f"{len(first)} from PyTorch"}
    total = differing = unstable = 0
    for mine, a, b in zip(package, first, second):
        mine, a, b = (np.ascontiguousarray(x).reshape(-1).view(np.uint8) for x in (mine, a, b))
        if mine.shape != a.shape:
            return {"verdict": "unequal", "detail": f"{mine.size} bytes against {a.size}"}
        total += a.size
        unstable += int((a != b).sum())
        differing += int(((mine != a) & (a == b)).sum())
    verdict = "nondeterministic" if unstable else "unequal" if differing else "equal"
    return {"verdict": verdict, "differing": differing, "unstable": unstable, "bytes": total}


def bitwise_side(case: Case, sizes: dict, state, consts, device: str) -> dict:
    """The package's outputs on its default route and on each forced route, each against the
    same kernel launched twice by Triton's launcher from PyTorch on the same inputs."""
    torch_state = tuple(to_torch(a, device) for a in (*state, *consts))
    torch_runs = [[out.cpu().numpy() for out in case.torch(sizes, 0, *torch_state)]
                  for _ in range(2)]
    found = {}
    for route, flag in (("default", None), *FORCED_ROUTES):
        with forced_route(flag), RouteLog() as log:
            outputs = jax.jit(functools.partial(case.package, sizes, 0))(*state, *consts)
            outputs = [np.asarray(out) for out in outputs]
        found[route] = {"route": log.summary(), **bitwise_difference(outputs, torch_runs)}
        progress(f"{case.name}: bitwise, {route} route ({found[route]['route']}): "
                 f"{found[route]['verdict']}")
    return found


def measure_case(case: Case, length: int, repeats: int, bitwise: bool = False,
                 timing: bool = True) -> dict:
    """One case in this process: routes, results and times of both sides (with `timing`), and
    (with `bitwise`) the package's outputs on each route against PyTorch's, bitwise."""
    result = {"kernel": case.name, "title": case.title}
    if case.needs_tma and (why := tma_missing()):
        return dict(result, skipped=why)
    sizes = case.full
    state, consts = case.inputs(sizes, jax.random.key(0))
    device, why = torch_device()
    if timing:
        reference = [np.asarray(r, np.float32) for r in
                     jax.jit(functools.partial(case.reference, sizes, 0))(*state, *consts)]
        with RouteLog() as log:
            result["package"] = attempt(f"{case.name} package", lambda: package_side(
                case, sizes, state, consts, reference, length, repeats))
        result["route"], result["routes"] = log.summary(), log.routes()
        progress(f"{case.name}: route {result['route']}")
        result["torch"] = attempt(f"{case.name} PyTorch", lambda: torch_side(
            case, sizes, state, consts, reference, length, repeats, device)) if device else {
            "unavailable": why}
    if bitwise:
        result["bitwise"] = attempt(f"{case.name} bitwise", lambda: bitwise_side(
            case, sizes, state, consts, device)) if device else {"unavailable": why}
    return result


def measure_add(length: int) -> dict:
    """The chain of `length` small adds (runtime `n`) on the package's default route against
    XLA's own add kept unfused (`_common`'s chain, median of 30), by wall clock, queued, and on
    the GPU's timeline; on the timeline also the same add with `n` compiled in (`plain_add`),
    which tells what loading `n` from its operand costs the kernel from the host's share."""
    add = functools.partial(triton_add, xla_native=None)
    x = jnp.arange(1024, dtype=jnp.float32)

    def timed(op) -> tuple[float, float, float | None]:
        """µs per call by wall clock, queued and on the GPU's timeline, of one jitted chain."""
        chained = chain(op, length)
        return (median_seconds(chained, x, x) / length * 1e6,
                queued_seconds(chained, (x, x)) / length * 1e6,
                gpu_timeline_us(chained, (x, x), length))

    with RouteLog() as log:
        correct = bool(jnp.array_equal(chain(add, 2)(x, x), 3 * x))
        package = timed(add) if correct else (None, None, None)
    progress(f"add: route {log.summary()}, result {'ok' if correct else 'WRONG'}")
    xla = timed(xla_add_unfused)
    compiled_in = bool(jnp.array_equal(chain(plain_add, 2)(x, x), 3 * x))
    return {"kernel": ADD, "route": log.summary(), "routes": log.routes(), "correct": correct,
            "package_us": package[0], "xla_us": xla[0], "package_queued_us": package[1],
            "xla_queued_us": xla[1], "package_gpu_us": package[2], "xla_gpu_us": xla[2],
            "compiled_correct": compiled_in,
            "compiled_gpu_us": gpu_timeline_us(chain(plain_add, length), (x, x), length)
            if compiled_in else None}


def worker(names: list[str], cases: dict[str, Case], length: int, repeats: int,
           add_length: int, bitwise: bool = False, timing: bool = True) -> None:
    """Measures `names` in turn, one JSON line each on stdout as it is done."""
    for name in names:
        progress(f"{name}: start")
        if name == ADD:
            result = attempt(name, lambda: measure_add(add_length))
        else:
            result = attempt(name, lambda: measure_case(cases[name], length, repeats, bitwise,
                                                        timing))
        emit(json.dumps({"kernel": name, **result}))
