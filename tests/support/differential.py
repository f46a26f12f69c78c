"""The differential check as a pytest plugin: `pytest --differential=PATH` (conftest.py loads it).

While it is on, every call a GPU lowering emits (`triton_call`, `triton_call_lowering`, a call
under `jax.vmap`) also emits a host callback that receives the call's operands and results at
each execution. After each test, each execution is launched again by Triton's own launcher from
PyTorch on the same input bytes and compared bitwise (`differential_utils.compare`); one JSON
line per execution goes to PATH (PATH.<worker> under pytest-xdist, joined into PATH at the end):
test, kernel, route, verdict, detail, launch. Lowerings that cannot carry a callback (for
`jax.export`, for another platform or several, inside a sharded body) get one line each, with
verdict "not instrumented"; so do lowerings for the CPU (Triton's interpreter).

The callback changes the computation a little (a host transfer after each call; an aliased
input is copied first so that the callback still sees it); the route, the kernel and its launch
are the package's own.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from typing import Any

import numpy as np
import pytest

from tests.support import differential_utils as du

NOT_INSTRUMENTED = "not instrumented"
MAX_CALLS_PER_TEST = 64  # executions kept per test; later ones are counted, not compared
MAX_BYTES_PER_TEST = 1 << 30


class DifferentialPlugin:
    """Instruments GPU lowerings, keeps each execution's buffers, compares them after the test."""

    def __init__(self, path: str, worker: str | None) -> None:
        self.path, self.worker = path, worker
        self.lock = threading.Lock()
        self.test = "(outside a test)"
        self.pending: list[tuple[str, du.CallDescription, list, list] | dict] = []
        self.kept_bytes = 0
        self.local = threading.local()
        self.launcher: Any = None
        self.instrumented = False  # a callback was emitted in this process
        self.part = f"{path}.{worker or 'main'}"
        if worker is None:  # an earlier run's parts
            for name in _parts(path):
                os.remove(name)
        open(self.part, "w").close()

    def patches(self) -> list[tuple[Any, str, Any]]:
        """(object, attribute, value): the GPU routes' lowering wrapped, and the route log's
        `log_route` that tells it the route taken."""
        from jax_triton_rocm.routes import _primitive

        original_lower, original_log_route = _primitive.GpuRoutes.lower, _primitive.log_route
        plugin = self

        def log_route(route: str, spec: Any, reason: str) -> None:
            plugin.local.noted = (route, reason)
            if route == _primitive.INTERPRETER:
                plugin.pending.append({
                    "test": plugin.test, "kernel": spec.kernel_name, "route": route,
                    "reason": reason, "verdict": NOT_INSTRUMENTED,
                    "detail": "Triton's interpreter on the CPU: no GPU launch to compare"})
            original_log_route(route, spec, reason)

        def lower(routes: Any, ctx: Any, operands: Any, spec: Any) -> list:
            plugin.local.noted = None
            results = original_lower(routes, ctx, operands, spec)
            route, reason = plugin.local.noted or ("?", "")
            return plugin.instrument(routes.backend, ctx, operands, results, spec, route, reason)

        return [(_primitive, "log_route", log_route), (_primitive.GpuRoutes, "lower", lower)]

    def instrument(self, backend: Any, ctx: Any, operands: Any, results: Any, spec: Any,
                   route: str, reason: str) -> Any:
        """`results` of the lowering, with the host callback emitted after them."""
        why = self.uninstrumentable(backend, ctx)
        if why is not None:
            self.pending.append({"test": self.test, "kernel": spec.kernel_name, "route": route,
                                 "reason": reason, "verdict": NOT_INSTRUMENTED, "detail": why})
            return results
        from jax_triton_rocm.compile import _compile

        try:
            call = du.describe(spec.unwrapped.jit_fn, spec.kernel_name, route, reason, spec,
                               ctx.avals_in, ctx.avals_out,
                               planned_launches(backend, ctx, spec, route),
                               lambda launch: _compile.triton_options(
                                   launch, spec, backend.compile_options, backend.option_names))
            if (why := foreign_target(backend, ctx, spec)) is not None:
                call = dataclasses.replace(call, launches=(), not_compared=why)
        except Exception as err:  # noqa: BLE001  (the test goes on; the line says why)
            call = du.CallDescription(spec.unwrapped.jit_fn, spec.kernel_name, route, reason,
                                      (), (), (), not_compared=f"planning failed: {err!r}"[:300])
        from jax_triton_rocm.routes.cpu import _shard_callbacks

        buffers = [] if call.not_compared else [*operands, *results]
        avals = [] if call.not_compared else [*ctx.avals_in, *ctx.avals_out]
        try:
            _shard_callbacks.host_callback(
                ctx, buffers, avals, [], lambda *arrays: self.received(call, arrays), True)
            self.instrumented = True
        except Exception as err:  # noqa: BLE001  (the test goes on; the line says why)
            self.pending.append({"test": self.test, "kernel": spec.kernel_name, "route": route,
                                 "reason": reason, "verdict": NOT_INSTRUMENTED,
                                 "detail": f"the callback could not be emitted: {err!r}"[:300]})
        return results

    @staticmethod
    def uninstrumentable(backend: Any, ctx: Any) -> str | None:
        """Why a lowering cannot carry the callback, or None."""
        from jax._src import sharding_impls

        from jax_triton_rocm.routes import _arch

        module = ctx.module_context
        if _arch.for_export(ctx):
            return "lowered for jax.export"
        if tuple(module.platforms) != (backend.platform,):
            return f"lowered for platforms {tuple(module.platforms)}"
        context = module.axis_context
        if not (isinstance(context, sharding_impls.ShardingContext)
                and context.num_devices == 1):
            return f"lowered for several devices or a sharded body ({type(context).__name__})"
        from tests.support.gpu_utils import gpu_platform

        if gpu_platform() != backend.platform:
            return f"lowered for {backend.platform} without its GPU here"
        return None

    def received(self, call: du.CallDescription, arrays: tuple) -> tuple:
        """The callback: keeps the execution's inputs and outputs for the test's end."""
        try:
            with self.lock:
                size = sum(np.asarray(a).nbytes for a in arrays)
                count = sum(1 for entry in self.pending if isinstance(entry, tuple))
                if call.not_compared is None and (
                        count >= MAX_CALLS_PER_TEST
                        or self.kept_bytes + size > MAX_BYTES_PER_TEST):
                    call = du.CallDescription(
                        call.kernel, call.kernel_name, call.route, call.reason, (), (), (),
                        not_compared=f"over the check's budget of {MAX_CALLS_PER_TEST} calls "
                                     f"or {MAX_BYTES_PER_TEST >> 20} MiB per test")
                    arrays = ()
                copies = [np.array(a, copy=True) for a in arrays]
                self.kept_bytes += size if arrays else 0
                n_in = len(call.in_avals)
                self.pending.append((self.test, call, copies[:n_in], copies[n_in:]))
        except Exception as err:  # noqa: BLE001  (never fail the computation: reported)
            with self.lock:
                self.pending.append(self.line(self.test, call, du.ERROR,
                                              f"the callback failed: {type(err).__name__}: "
                                              f"{err}"[:500], ""))
        return ()

    def line(self, test: str, call: du.CallDescription, verdict: str, detail: str,
             launch: str) -> dict:
        return {"test": test, "kernel": call.kernel_name, "route": call.route,
                "reason": call.reason, "verdict": verdict, "detail": detail, "launch": launch,
                "xla_native_env": os.environ.get("JAX_TRITON_ROCM_XLA_NATIVE")}

    def drain(self) -> None:
        """Waits for the callbacks of computations still running: a device runs its
        executions in order, so once a new one ends, the ones before it have called back."""
        import jax

        from tests.support.gpu_utils import gpu_devices

        for device in gpu_devices():
            jax.block_until_ready(_tick(jax.device_put(np.float32(0), device)))

    def flush(self) -> None:
        """Compares what the test's executions left, and writes their lines."""
        if self.instrumented:
            try:
                self.drain()
            except Exception:  # noqa: BLE001  (a device the test broke: compare what came)
                pass
        with self.lock:
            pending, self.pending, self.kept_bytes = self.pending, [], 0
        lines = []
        for entry in pending:
            if isinstance(entry, dict):
                lines.append(entry)
                continue
            test, call, inputs, outputs = entry
            try:
                if call.not_compared is None and self.launcher is None:
                    self.launcher = du.TorchLauncher()
                verdict = du.compare(call, inputs, outputs, self.launcher)
            except du.NotComparable as why:
                verdict = (du.NOT_COMPARED, str(why), "")
            except Exception as err:  # noqa: BLE001  (reported, the run goes on)
                verdict = (du.ERROR, f"{type(err).__name__}: {err}"[:500], "")
            lines.append(self.line(test, call, *verdict))
        if self.launcher is not None and pending:
            self.launcher.release()
        with open(self.part, "a") as file:
            for line in lines:
                file.write(json.dumps(line) + "\n")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item):
        self.flush()
        self.test = item.nodeid
        yield  # the launches come after the test's teardown, once its patches are undone
        self.flush()
        self.test = "(outside a test)"

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session):
        self.flush()
        if self.worker is not None:
            return
        with open(self.path, "w") as joined:
            for part in _parts(self.path):
                with open(part) as file:
                    joined.write(file.read())
                os.remove(part)


def _parts(path: str) -> list[str]:
    """The per-process files of the report at `path` (PATH.main, PATH.gw0, ...)."""
    folder, base = os.path.split(path)
    return sorted(os.path.join(folder, name) for name in os.listdir(folder or ".")
                  if name.startswith(base + ".") and name[len(base) + 1:].isalnum())


def _tick(x: Any) -> Any:
    """A computation that does almost nothing (`DifferentialPlugin.drain`)."""
    return x + 1


def foreign_target(backend: Any, ctx: Any, spec: Any) -> str | None:
    """Why the launcher cannot build the call's binary: the call compiles for an architecture
    other than the devices' (`compute_capability=`, `target_arch`), and Triton's launcher
    compiles for the device; None where they agree."""
    from jax_triton_rocm.routes import _arch

    target, _ = _arch.resolve_arch(backend, ctx, spec)
    devices = (_arch.named_arch(backend.platform)
               or _arch.lowering_arch(backend.platform, ctx.module_context))
    if target.arch == devices.arch:
        return None
    return (f"compiled for {target.arch} (from {target.source}) on {devices.arch} devices; "
            f"Triton's launcher compiles for the device")


def planned_launches(backend: Any, ctx: Any, spec: Any, route: str) -> list:
    """The launches the lowering planned, in the user's kernel's layout: jaxlib's chosen ones
    (the lowered call is kept, so asking again returns it), or XLA's one."""
    from jax_triton_rocm.plan import _plan
    from jax_triton_rocm.routes import _arch, _lowering
    from jax_triton_rocm.routes.jaxlib import _jaxlib_call

    if route == "xla" and spec.unwrapped.autotuner is None:
        target, _ = _arch.resolve_arch(backend, ctx, spec)
        return _plan.launches(spec, tuple(ctx.avals_in), tuple(ctx.avals_out),
                              backend.answers(target).launch_site)
    return list(_lowering.lowered_call(_jaxlib_call.ROUTE, backend, ctx, spec).launches)


def configure(config) -> None:
    """Registers the plugin where `--differential` is given (conftest.py's `pytest_configure`)."""
    path = config.getoption("differential", None)
    if not path:
        return
    workerinput = getattr(config, "workerinput", None)
    plugin = DifferentialPlugin(os.path.abspath(path),
                                None if workerinput is None else workerinput["workerid"])
    for owner, name, value in plugin.patches():  # for the whole session
        setattr(owner, name, value)
    config.pluginmanager.register(plugin, "differential")
