"""A compile worker: a separate Python process that runs `triton.compile` for the lowering process.

Opt-in (`JAX_TRITON_ROCM_COMPILE_WORKERS`): threads compile the configs of an autotuned call by
default, and measured faster on 16 cores (`_parallel`'s notes); workers sidestep the GIL entirely,
which can pay on machines where threads do not. A worker is started with
`subprocess` (fork and exec, never a bare fork of a process that runs JAX) as
`python -m jax_triton_rocm._compile_worker`, takes the parent's `sys.path`, and then answers
requests one at a time over its stdin and stdout (length-prefixed pickles):

  request: the kernel by module and qualified name, its `JITFunction.cache_key`, and the
           signature, constexprs, specialisation, target and options of one `triton.compile`;
  reply:   ("ok", (outputs, metadata)) or ("error", text).

The worker imports the kernel's module itself and compiles only when the kernel it finds there
has the parent's `cache_key` (the same source, the same called functions, the same constexpr
globals); otherwise it replies with an error and the parent compiles that kernel itself. Any
error does the same, so a failing compile raises in the parent exactly as it would without
workers. Kernels that cannot be found by name (defined in `__main__`, inside a function, or
rebound) never go to a worker.

A worker ignores Ctrl-C (the parent handles it), writes stray prints to stderr, and exits when
its stdin closes (the parent exited) or after `IDLE_EXIT_S` seconds without a request. It uses
Triton's on-disk cache as the parent would (the environment is inherited, never changed).
"""

from __future__ import annotations

import importlib
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
from typing import Any, BinaryIO

logger = logging.getLogger("jax_triton_rocm")

IDLE_EXIT_S = 120.0
_HEADER = struct.Struct("<Q")


class WorkerError(RuntimeError):
    """The worker could not compile a request (the parent then compiles it itself)."""


def _send(stream: BinaryIO, obj: Any) -> None:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(payload)) + payload)
    stream.flush()


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    chunks = []
    while size:
        chunk = stream.read(size)
        if not chunk:
            raise EOFError("the other end closed the pipe")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _recv(stream: BinaryIO) -> Any:
    (size,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    return pickle.loads(_read_exact(stream, size))


def kernel_address(jit_fn: Any) -> tuple[str, str] | None:
    """(module, qualified name) under which a fresh process finds `jit_fn`, or None.

    The name must resolve, in the module as imported here, to `jit_fn` itself or to
    `@triton.autotune` / `@triton.heuristics` wrappers around it.
    """
    fn = getattr(jit_fn, "fn", None)
    module_name = getattr(fn, "__module__", None)
    qualname = getattr(fn, "__qualname__", "")
    if not module_name or module_name == "__main__" or "<locals>" in qualname:
        return None
    module = sys.modules.get(module_name)
    if module is None:
        return None
    try:
        return (module_name, qualname) if _find_kernel(module, qualname) is jit_fn else None
    except (AttributeError, TypeError):
        return None


def _find_kernel(module: Any, qualname: str) -> Any:
    """The JITFunction named `qualname` in `module`, through autotune/heuristics wrappers."""
    from jax_triton_rocm import _kernel

    node = module
    for part in qualname.split("."):
        node = getattr(node, part)
    return _kernel.unwrap(node).jit_fn


def _compile_request(request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    from jax_triton_rocm import _compile
    from triton.backends.compiler import GPUTarget

    module = importlib.import_module(request["module"])
    jit_fn = _find_kernel(module, request["qualname"])
    if jit_fn.cache_key != request["cache_key"]:
        raise WorkerError(
            f"{request['module']}.{request['qualname']} here is not the parent's kernel (its "
            f"source or constexpr globals differ)")
    backend, arch, warp_size = request["target"]
    job = _compile.CompileJob(
        jit_fn=jit_fn,
        triton_target=GPUTarget(backend, arch, warp_size),
        bound=request["bound"],
        options=request["options"],
        gluon=request["gluon"],
        binary_key=request["binary_key"],
        asm_key=request["asm_key"],
        key=request["key"],
    )
    return _compile.run_triton(job)


def serve() -> None:
    """The worker's main loop (runs in the worker process)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # prints from imported modules or Triton must not reach the reply pipe
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    init = _recv(requests)
    sys.path[:] = init["sys_path"]
    idle_exit_s = init["idle_exit_s"]
    for module in init["preload"]:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001  (the request that needs it replies with the error)
            pass
    _send(replies, ("ready", os.getpid()))
    while True:
        ready, _, _ = select.select([requests], [], [], idle_exit_s)
        if not ready:
            return
        try:
            request = _recv(requests)
        except EOFError:
            return
        try:
            reply = ("ok", _compile_request(request))
        except BaseException as err:  # noqa: BLE001  (the parent recompiles and raises)
            reply = ("error", f"{type(err).__name__}: {err}")
        _send(replies, reply)


class Worker:
    """The parent's handle on one worker process; used by one thread at a time.

    Starting returns at once; `wait_ready` blocks until the worker has imported Triton and the
    `preload` modules (a second or two), so the caller can compile meanwhile.
    """

    def __init__(self, preload: tuple[str, ...] = ()) -> None:
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            filter(None, [package_root, env.get("PYTHONPATH", "")]))
        self._process = subprocess.Popen(
            [sys.executable, "-m", "jax_triton_rocm._compile_worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0, env=env, close_fds=True)
        self.broken = False
        self.ready = False
        sys_path = [entry or os.getcwd() for entry in sys.path]
        self._call_raw({"sys_path": sys_path, "idle_exit_s": IDLE_EXIT_S,
                        "preload": ("triton.compiler", *preload)}, reply=False)

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        return not self.broken and self._process.poll() is None

    def _call_raw(self, message: Any, *, send: bool = True, reply: bool = True) -> Any:
        try:
            if send:
                _send(self._process.stdin, message)
            return _recv(self._process.stdout) if reply else None
        except (OSError, EOFError, pickle.PickleError) as err:
            self.broken = True
            raise WorkerError(f"compile worker {self.pid} stopped: {type(err).__name__}: {err}"
                              ) from err

    def wait_ready(self) -> None:
        """Blocks until the worker can compile.

        Raises:
          WorkerError: the worker stopped while starting.
        """
        if not self.ready:
            self._call_raw(None, send=False)
            self.ready = True

    def compile(self, request: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Triton's outputs and metadata for `request`.

        Raises:
          WorkerError: the worker failed, stopped, or did not find the same kernel.
        """
        self.wait_ready()
        status, payload = self._call_raw(request)
        if status != "ok":
            raise WorkerError(f"compile worker {self.pid}: {payload}")
        return payload

    def detach(self) -> None:
        """Closes this process's ends of the pipes without writing (a forked child's copy)."""
        for stream in (self._process.stdin, self._process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.broken = True

    def close(self) -> None:
        """Closes the pipes; the worker exits when it reads the end of its input."""
        self.detach()


def request_for(job: Any) -> dict[str, Any] | None:
    """The worker request for a `CompileJob`, or None when a worker cannot compile it.

    None for a kernel that a fresh process cannot find by name (`kernel_address`) and for
    constexprs or options that do not pickle (a JITFunction passed as a constexpr, say).
    """
    address = kernel_address(job.jit_fn)
    if address is None:
        return None
    target = job.triton_target
    request = {
        "module": address[0],
        "qualname": address[1],
        "cache_key": job.jit_fn.cache_key,
        "bound": job.bound,
        "options": job.options,
        "gluon": job.gluon,
        "target": (target.backend, target.arch, target.warp_size),
        "binary_key": job.binary_key,
        "asm_key": job.asm_key,
        "key": job.key,
    }
    try:
        pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001  (any value that does not pickle keeps the job here)
        return None
    return request


if __name__ == "__main__":
    serve()
