"""Compiling the kernels of one call (the configs of an autotuned call) at the same time.

By default in threads of this process: `triton.compile` releases the GIL in ptxas (a
subprocess) and in many of its passes. On the H200 machine (16 cores, jax 0.11.2, Triton 3.6,
benchmarks/autotune_compile.py, 16 sm_90 matmul configs) threads took 0.30 of the serial wall
time, worker processes 0.44 (already running) to 0.58 (started by the lowering). On 2 shared
cores threads took 0.61-0.94 and warm workers 0.49-0.76.

Worker processes (`_compile_worker`) are opt-in (`JAX_TRITON_ROCM_COMPILE_WORKERS`): where the
kernel can be found by name in a fresh process (`_compile_worker.request_for`), the kernels
compile in workers and the lowering thread compiles too while they start: the jobs sit in one
queue that the lowering thread and one thread per worker take from, so a slow-starting worker
never makes the call slower than compiling alone.

Every kernel still goes through the shared kernel-key cache (`_state.KERNELS`): a kernel that
is cached, or being compiled by another lowering, is not compiled again. A job that fails in a
worker is compiled again here, so its error is raised as it would be without workers.

Environment (read at each lowering):
  JAX_TRITON_ROCM_COMPILE_WORKERS: the most worker processes alive at once (default 0: threads
    only).
  JAX_TRITON_ROCM_COMPILE_THREADS: threads for kernels compiled in this process (default: one
    per kernel, at most the CPU count).
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import os
import threading
from collections.abc import Sequence
from typing import Any

from jax_triton_rocm import _compile, _compile_worker, _state

logger = logging.getLogger("jax_triton_rocm")

ENV_COMPILE_WORKERS = "JAX_TRITON_ROCM_COMPILE_WORKERS"
ENV_COMPILE_THREADS = "JAX_TRITON_ROCM_COMPILE_THREADS"

Result = Any  # a CompiledKernel, or the exception its compile raised


def cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _env_count(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{name}={raw!r} must be a non-negative integer (0 turns it off); "
                         f"unset it for the default ({default}).")
    return value


def worker_limit() -> int:
    """The most compile worker processes alive at once (`JAX_TRITON_ROCM_COMPILE_WORKERS`)."""
    return _env_count(ENV_COMPILE_WORKERS, 0)


def thread_count(jobs: int) -> int:
    """Threads for compiling `jobs` kernels in this process (`JAX_TRITON_ROCM_COMPILE_THREADS`)."""
    return max(1, min(jobs, _env_count(ENV_COMPILE_THREADS, cpu_count()) or 1))


def _start_worker(preload: tuple[str, ...]) -> _compile_worker.Worker | None:
    try:
        return _compile_worker.Worker(preload)
    except Exception as err:  # noqa: BLE001  (no worker: this process compiles alone)
        logger.warning("jax_triton_rocm: could not start a compile worker (%s: %s); compiling "
                       "in this process. Set %s=0 to stop trying.", type(err).__name__, err,
                       ENV_COMPILE_WORKERS)
        return None


def _capture(job: _compile.CompileJob, build=None) -> Result:
    try:
        return _compile.compile_job(job, build or _compile.compile_here)
    except Exception as err:  # noqa: BLE001  (returned, so the caller sees every config's fate)
        return err


def compile_jobs(jobs: Sequence[_compile.CompileJob]) -> list[Result]:
    """Compiles `jobs` at once; returns, in order, each CompiledKernel or the error it raised."""
    missing = sum(1 for job in jobs if job.key not in _state.KERNELS)
    if len(jobs) == 1 or missing == 0:  # every re-lowering of a cached call: no pool
        return [_capture(job) for job in jobs]
    limit = worker_limit()
    requests = [_compile_worker.request_for(job) for job in jobs] if missing > 1 and limit else []
    if requests and all(r is not None for r in requests):
        preload = tuple(sorted({r["module"] for r in requests}))
        workers = _state.COMPILE_WORKERS.checkout(missing - 1, limit,
                                                  lambda: _start_worker(preload))
        if workers:
            return _compile_with_workers(jobs, requests, workers)
    with concurrent.futures.ThreadPoolExecutor(
            max_workers=thread_count(missing), thread_name_prefix="jax_triton_rocm") as pool:
        return list(pool.map(_capture, jobs))


def _compile_with_workers(jobs: Sequence[_compile.CompileJob], requests: list[dict],
                          workers: list[_compile_worker.Worker]) -> list[Result]:
    queue = collections.deque(range(len(jobs)))
    queue_lock = threading.Lock()
    results: list[Result] = [None] * len(jobs)

    def next_job() -> int | None:
        with queue_lock:
            return queue.popleft() if queue else None

    def compile_here() -> None:
        while (index := next_job()) is not None:
            results[index] = _capture(jobs[index])

    def compile_in(worker: _compile_worker.Worker) -> None:
        def build(job: _compile.CompileJob, request: dict):
            try:
                if worker.alive():
                    compiled = _compile.from_triton(job, *worker.compile(request))
                    _state.KERNELS.note("worker_compiles")
                    return compiled
            except _compile_worker.WorkerError as err:
                logger.debug("jax_triton_rocm: %s; compiling %s here", err, job.key[:12])
            return _compile.compile_here(job)

        try:
            worker.wait_ready()  # meanwhile, the lowering thread compiles
        except _compile_worker.WorkerError as err:
            logger.debug("jax_triton_rocm: %s", err)
            _state.COMPILE_WORKERS.checkin(worker)
            return
        try:
            while (index := next_job()) is not None:
                request = requests[index]
                results[index] = _capture(jobs[index], lambda job: build(job, request))
        finally:
            _state.COMPILE_WORKERS.checkin(worker)

    threads = [threading.Thread(target=compile_in, args=(worker,), daemon=True,
                                name=f"jax_triton_rocm-worker-{worker.pid}")
               for worker in workers]
    for thread in threads:
        thread.start()
    try:
        compile_here()
    finally:
        for thread in threads:
            thread.join()
    return results
