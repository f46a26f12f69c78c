"""Compiling the kernels of one call (the configs of an autotuned call) at the same time.

The kernels compile in threads of this process: `triton.compile` releases the GIL in ptxas (a
subprocess) and in many of its passes (`benchmarks/autotune_compile.py` compares the threaded
compile with a serial one). Every kernel still goes through the shared kernel-key cache
(`_state.COMPILED_KERNELS`): a kernel that is cached, or being compiled by another lowering, is not
compiled again.

Environment (read at each lowering):
  JAX_TRITON_ROCM_COMPILE_THREADS: threads for the kernels of one call (default: one per
    kernel, at most the CPU count).
"""

from __future__ import annotations

import concurrent.futures
import functools
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.base import _env, _state

if TYPE_CHECKING:  # `_compile` compiles through this module, handing it `compile_job`
    from jax_triton_rocm.compile._compile import CompileJob

logger = logging.getLogger("jax_triton_rocm")

Result = Any  # a CompiledKernel, or the exception its compile raised


def thread_count(jobs: int) -> int:
    """Threads for compiling `jobs` kernels (`JAX_TRITON_ROCM_COMPILE_THREADS`).

    Raises:
      ValueError: the variable is set to something other than a non-negative integer.
    """
    limit = _env.compile_threads()
    return max(1, min(jobs, limit or 1))


def _capture(compile_job: Callable[[CompileJob], Any], job: CompileJob) -> Result:
    try:
        return compile_job(job)
    except Exception as err:  # noqa: BLE001  (returned, so the caller sees every config's fate)
        return err


def compile_jobs(jobs: Sequence[CompileJob],
                 compile_job: Callable[[CompileJob], Any]) -> list[Result]:
    """Compiles `jobs` at once, each by `compile_job` (`_compile.compile_job`); returns, in
    order, each CompiledKernel or the error it raised."""
    missing = len([job for job in jobs if job.key not in _state.COMPILED_KERNELS])
    if len(jobs) == 1 or missing == 0:  # every re-lowering of a cached call: no pool
        return [_capture(compile_job, job) for job in jobs]
    with concurrent.futures.ThreadPoolExecutor(
            max_workers=thread_count(missing), thread_name_prefix="jax_triton_rocm") as pool:
        return list(pool.map(functools.partial(_capture, compile_job), jobs))


def compiled_configs(configs: list, jobs: list,
                     compile_job: Callable[[CompileJob], Any]) -> list[tuple]:
    """`jobs` compiled at once (`compile_jobs`), one per config: (config, job, compiled kernel)
    for each config whose kernel compiled, as `kept_configs` keeps them."""
    return kept_configs(configs, jobs, compile_jobs(jobs, compile_job))


def kept_configs(configs: list, jobs: list, results: list) -> list[tuple]:
    """(config, job, compiled kernel) for each config whose kernel compiled, in order.

    As Triton's autotuner does, a config whose compile fails a `tl.static_assert`
    (CompileTimeAssertionFailure) or ptxas (PTXASError, NVIDIA only) is dropped when others
    remain; OutOfResources is a launch error, which jaxlib's autotuner handles. Any other error,
    or every config failing, raises the first config's error.
    """
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime.errors import PTXASError

    skippable = (CompileTimeAssertionFailure, PTXASError) if len(configs) > 1 else ()
    errors = [(c, r) for c, r in zip(configs, results) if isinstance(r, BaseException)]
    fatal = [(c, r) for c, r in errors if not isinstance(r, skippable)]
    if fatal or (errors and len(errors) == len(configs)):
        config, error = (fatal or errors)[0]
        note = f"jax_triton_rocm: in autotune config ({config.description})"
        # The kernel cache raises a remembered error again at each lowering: one note each.
        if len(configs) > 1 and note not in getattr(error, "__notes__", ()):
            error.add_note(note)
        raise error
    for config, error in errors:
        logger.info("jax_triton_rocm: autotune config (%s) dropped: %s: %s",
                    config.description, type(error).__name__, error)
    return [(config, job, result) for config, job, result in zip(configs, jobs, results)
            if not isinstance(result, BaseException)]
