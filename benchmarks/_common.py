"""What the benchmark scripts share: the add kernel and its routes, chain timing, fresh processes
with command buffers on or off, the no-GPU message, and printing rows side by side.

Not a script: the scripts beside it import it (their folder is on `sys.path` when run).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

# Several processes share the GPU in turn; none may take most of its memory up front.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402  (after the environment)
import jax.numpy as jnp  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import jax_triton_rocm as jtr  # noqa: E402
from jax_triton_rocm.backends import _vendors  # noqa: E402
from jax_triton_rocm.base import _env  # noqa: E402

CHAIN_LENGTH = 200
COMMAND_BUFFER_FLAG = "--xla_gpu_enable_command_buffer="
# What each command-buffer setting of a fresh process puts after COMMAND_BUFFER_FLAG (None: the
# flag left out, XLA's default list). "no-custom-calls" takes CUSTOM_CALL off XLA's default list
# (a "-" entry removes one type from it): every custom call, jaxlib's Triton calls among them, is
# then launched one by one while XLA's own kernels are still recorded.
COMMAND_BUFFER_SETTINGS = {"on": None, "off": "", "no-custom-calls": "-CUSTOM_CALL"}
DRY_RUN_ARCH = "sm_90"


@triton.jit
def add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets,
                                                                                 mask=mask),
             mask=mask)


def triton_add(x, y, block=1024, num_warps=4, xla_native=False):
    return jtr.triton_call(x, y, x.size, kernel=add_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, block),), BLOCK=block, num_warps=num_warps,
                           xla_native=xla_native)


def native_add(x, y):
    return triton_add(x, y, xla_native=True)


@triton.jit
def plain_add_kernel(x_ptr, y_ptr, n: tl.constexpr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets,
                                                                                 mask=mask),
             mask=mask)


def plain_add(x, y):
    """x + y through a plain kernel (pointer and constexpr parameters only: the length is
    compiled in), on the default route (no `xla_native`)."""
    return jtr.triton_call(x, y, x.size, kernel=plain_add_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, 1024),), BLOCK=1024)


def xla_add(x, y):
    return x + y


def xla_add_unfused(x, y):
    # The barrier keeps XLA from fusing the chain into one kernel: one launch per add.
    return jax.lax.optimization_barrier(x + y)


def platform() -> str:
    """JAX's default platform, "gpu" named as the vendor's ("cuda")."""
    found = jax.devices()[0].platform
    return {"gpu": "cuda"}.get(found, found)


def gpu_missing(script: str) -> bool:
    """True, after one line on stderr saying so, when JAX has no CUDA or ROCm device here."""
    if platform() in ("cuda", "rocm"):
        return False
    from jax_triton_rocm.backends import _no_gpu

    print(f"benchmarks/{script}: needs a CUDA or ROCm GPU, and JAX has none here: "
          f"{_no_gpu.no_gpu_reason()}", file=sys.stderr)
    return True


class call_target:
    """Makes calls with one kernel take the target `setting` ("ffi" or "legacy"), as
    `JAX_TRITON_ROCM_CALL_TARGET` does, while in force (JAX's caches cleared on both sides)."""

    def __init__(self, setting: str):
        self.setting = setting

    def __enter__(self):
        self.original = os.environ.get(_env.ENV_CALL_TARGET)
        os.environ[_env.ENV_CALL_TARGET] = self.setting
        jax.clear_caches()

    def __exit__(self, *exc):
        if self.original is None:
            os.environ.pop(_env.ENV_CALL_TARGET, None)
        else:
            os.environ[_env.ENV_CALL_TARGET] = self.original
        jax.clear_caches()


class forced_features:
    """Makes lowerings see a plugin without some feature (for comparison only)."""

    def __init__(self, platform_name: str | None = None, **changes):
        self.platform = platform_name
        self.changes = changes

    def __enter__(self):
        self.original = _vendors.plugin_features
        platform_name = self.platform or platform()
        real = self.original(platform_name) or _vendors.assumed_features(platform_name)
        forced = dataclasses.replace(real, **self.changes)
        _vendors.plugin_features = lambda platform_name: forced
        jax.clear_caches()

    def __exit__(self, *exc):
        _vendors.plugin_features = self.original
        jax.clear_caches()


def median_seconds(fn, *args, repeats=30):
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def torch_wall_us(run: Callable, length: int, repeats: int = 30) -> float:
    """µs per call of PyTorch's `run()` (`length` launches), by `time.perf_counter()` from before
    the first launch to the return of `torch.cuda.synchronize()` after the last (median of
    `repeats`, after one warm-up): what a user waits for, as the package's side is timed."""
    import torch

    run()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times) / length * 1e6


def chain(op: Callable, length: int = CHAIN_LENGTH) -> Callable:
    """A jitted chain of `length` calls of `op(x, y)`, each on the previous result."""
    @jax.jit
    def chained(x, y):
        for _ in range(length):
            x = op(x, y)
        return x

    return chained


def chain_per_kernel_us(op: Callable, length: int = CHAIN_LENGTH, size: int = 1024) -> float:
    """µs per call in a jitted chain of `length` calls of `op` on `size` floats (median of 30)."""
    x = jnp.ones((size,), jnp.float32)
    return median_seconds(chain(op, length), x, x) / length * 1e6


def fresh_environment(command_buffers: bool | str, env: dict[str, str] | None = None) -> dict:
    """This process's environment with `env` added and XLA_FLAGS setting XLA's command buffers,
    for a fresh process (XLA reads its flags once per process): True or "on" (XLA's default),
    False or "off" (none), or "no-custom-calls" (XLA's default less custom calls), the keys of
    COMMAND_BUFFER_SETTINGS. Any command-buffer flag already in XLA_FLAGS is replaced.

    Raises ValueError for another setting.
    """
    if isinstance(command_buffers, bool):
        command_buffers = "on" if command_buffers else "off"
    if command_buffers not in COMMAND_BUFFER_SETTINGS:
        raise ValueError(f"command_buffers={command_buffers!r}: give one of "
                         f"{', '.join(map(repr, COMMAND_BUFFER_SETTINGS))}, or True or False")
    flags = [f for f in os.environ.get("XLA_FLAGS", "").split()
             if not f.startswith(COMMAND_BUFFER_FLAG)]
    types = COMMAND_BUFFER_SETTINGS[command_buffers]
    if types is not None:
        flags.append(COMMAND_BUFFER_FLAG + types)  # "": an empty list of command types, none
    return dict(os.environ, **(env or {}), XLA_FLAGS=" ".join(flags))


def _script_path(script: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), script)


def run_fresh(script: str, args: list[str], command_buffers: bool,
              timeout_s: float | None = None,
              env: dict[str, str] | None = None) -> tuple[int | str, str, str]:
    """Runs `script` (beside this file) with `args` in a fresh process whose XLA_FLAGS turn
    command buffers on or off (XLA reads its flags once per process), with `env` added to its
    environment.

    Returns:
      (exit status, or "timed out after N s"; its stdout; its stderr), what it printed before
      a timeout included.
    """
    try:
        result = subprocess.run([sys.executable, _script_path(script), *args],
                                env=fresh_environment(command_buffers, env), capture_output=True,
                                text=True, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired as err:
        def text(out):
            return out.decode(errors="replace") if isinstance(out, bytes) else (out or "")

        return f"timed out after {timeout_s} s", text(err.stdout), text(err.stderr)
    return result.returncode, result.stdout, result.stderr


def stream_fresh(script: str, args: list[str], command_buffers: bool,
                 on_line: Callable[[str], None], idle_timeout_s: float | None = None,
                 env: dict[str, str] | None = None) -> int | str:
    """`run_fresh`, handing each line the process prints (stdout and stderr together) to
    `on_line` as it comes, and killing the process when it prints nothing for `idle_timeout_s`.

    Returns:
      the exit status, or "printed nothing for N s" where it was killed for that.
    """
    env = dict(fresh_environment(command_buffers, env), PYTHONUNBUFFERED="1")
    process = subprocess.Popen([sys.executable, _script_path(script), *args], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               errors="replace", bufsize=1)
    last_line, killed = [time.monotonic()], threading.Event()

    def watch():
        while process.poll() is None:
            if idle_timeout_s is not None and time.monotonic() - last_line[0] > idle_timeout_s:
                killed.set()
                process.kill()
                return
            time.sleep(0.5)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    for line in process.stdout:
        last_line[0] = time.monotonic()
        on_line(line.rstrip("\n"))
    status = process.wait()
    watcher.join()
    return f"printed nothing for {idle_timeout_s} s" if killed.is_set() else status


def in_fresh_process(script: str, args: list[str], command_buffers: bool) -> dict:
    """`run_fresh`, returning the JSON object on the last line of the process's stdout.

    Raises:
      RuntimeError: the process failed, with the end of its stderr.
    """
    status, stdout, stderr = run_fresh(script, args, command_buffers)
    if status != 0:
        raise RuntimeError(f"{script} {' '.join(args)} (command buffers "
                           f"{'on' if command_buffers else 'off'}) failed ({status}):\n"
                           f"{stderr[-3000:]}")
    return json.loads(stdout.strip().splitlines()[-1])


def print_rows(rows, value_names=("value", "ratio")) -> None:
    """Rows of (name, value, ...) as a table; floats with three decimals."""
    cells = [[f"{v:.3f}" if isinstance(v, float) else str(v) for v in values]
             for _, *values in rows]
    widths = [max(len(n), *(len(c[i]) for c in cells)) for i, n in enumerate(value_names)]
    width = max(len("measure"), *(len(r[0]) for r in rows))
    print(f"{'measure':{width}s}  " + "  ".join(f"{n:>{w}s}" for n, w in zip(value_names,
                                                                          widths)))
    for (name, *_), row_cells in zip(rows, cells):
        print(f"{name:{width}s}  " + "  ".join(f"{c:>{w}s}" for c, w in zip(row_cells, widths)))
