"""Battery cases of issue 29: a changed callee, Triton's folders that cannot be written, 0-d
arrays for scalars, parameter annotations, the autotune store, its unclear errors, and the memory
of many variants.

No `from __future__ import annotations` here: it turns a kernel's annotations into strings, and
Triton reads `tl.pointer_type(tl.float32)` written as a string as no annotation at all.
"""

import contextlib
import gc
import json
import logging
import os
import shutil
import tempfile
import threading
import time

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from harness import (N, X, accept, add, copy_kernel, in_fresh_process, interpret, lower,
                     primitive, ramp, refuse)
from jax_triton_rocm.base import _env, _state
from jax_triton_rocm.routes import _arch, _choices
from tests.support import callee_helpers, callee_kernels
from tests.support.lowering_utils import LOWER_ADD_LOGGING_WARNINGS, capture_one
from tests.support.subprocess_utils import mount_namespaces


@contextlib.contextmanager
def rebound(owner, name, value):
    saved = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, saved)


def _binary(kernel, platform):
    call = lambda x: jtr.triton_call(x, kernel=kernel, out_shape=x, grid=(1,), BLOCK=256,  # noqa
                                     xla_native=False)
    compiled = capture_one(call, jax.ShapeDtypeStruct((256,), jnp.float32),
                           platform=platform).kernels[0]
    return compiled.ttir, compiled.binary


def changed_callee(kernel, owner, name, value, constant, route, clear=False):
    """A run lowering `kernel` (or running it on the CPU), rebinding `owner.name` to `value`,
    and lowering it again; returns (old, new) outcomes and the new constant expected."""
    kernel = getattr(callee_kernels, kernel)

    def outcome():
        if route == "cpu":
            call = lambda x: jtr.triton_call(x, kernel=kernel, out_shape=x, grid=(1,),  # noqa
                                             BLOCK=256)
            return str(np.unique(interpret(call, jnp.zeros(256, jnp.float32)))), None
        return _binary(kernel, {"sm_90": "cuda", "gfx942": "rocm"}[route])

    def run():
        before = outcome()
        with rebound(owner, name, value):
            if clear:
                jtr.clear_caches()
            after = outcome()
        jtr.clear_caches()
        return before, after, constant

    return run


def new_binary(result):
    (old_text, old_binary), (new_text, new_binary), constant = result
    return (constant in new_text and constant not in old_text
            and (old_binary is None or old_binary != new_binary))


def _callees():
    G = "callees"
    other, leaf = callee_kernels.other_helper, callee_helpers.other_leaf
    cases = []
    for route, constant in (("sm_90", "2.000000e+03"), ("gfx942", "2.000000e+03"),
                            ("cpu", "2000.")):
        for clear in (False, True):
            when = " after clear_caches" if clear else ""
            cases.append(accept(f"a helper rebound in the kernel's module{when} [{route}]", G,
                                changed_callee("calls_helper_kernel", callee_kernels, "helper",
                                               other, constant, route, clear), check=new_binary))
    cases += [
        accept("a helper's helper rebound, through a module attribute [sm_90]", G,
               changed_callee("calls_through_module_kernel", callee_helpers, "leaf", leaf,
                              "2.000000e+02", "sm_90"), check=new_binary),
        accept("a trampoline kernel's callee's helper rebound [gfx942]", G,
               changed_callee("trampoline_kernel", callee_kernels, "helper", other,
                              "2.000000e+03", "gfx942"), check=new_binary),
        accept("a helper rebound to one that reads a global [sm_90]", G,
               changed_callee("calls_helper_kernel", callee_kernels, "helper",
                              callee_kernels.global_helper, "3.000000e+03", "sm_90"),
               check=new_binary),
        accept("a helper re-decorated with noinline=True [sm_90]", G,
               changed_callee("calls_scalar_helper_kernel", callee_kernels, "program_offset",
                              callee_kernels.program_offset_noinline, "tt.call", "sm_90"),
               check=new_binary),
    ]
    return cases




def folder_case(env, prefix=(), setup=None):
    """A run lowering an add in a fresh process with `env` (TRITON_CACHE_DIR unset unless
    `env` sets it); returns its stdout and stderr lines from the package's logger."""
    def run():
        scratch = tempfile.mkdtemp(prefix="battery_folders_")
        try:
            values = {k: v.replace("SCRATCH", scratch) for k, v in env.items()}
            if setup is not None:
                setup(scratch)
            unset = "" if "TRITON_CACHE_DIR" in env else \
                "import os; os.environ.pop('TRITON_CACHE_DIR', None)\n"
            code = unset + "import sys; sys.stderr = sys.stdout\n" + LOWER_ADD_LOGGING_WARNINGS
            return in_fresh_process(code, values, tuple(a.replace("SCRATCH", scratch)
                                                        for a in prefix))
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    return run


def one_warning_naming(variable):
    def check(out):
        warnings = [line for line in out.splitlines() if "cannot be written" in line]
        return "lowered 1" in out and len(warnings) == 1 and f"{variable}=" in warnings[0]
    return check


def _a_file(scratch):
    open(os.path.join(scratch, "a-file"), "w").close()


def _read_only_home(scratch):
    os.mkdir(os.path.join(scratch, "home"))


def _folders():
    G = "cache folders"
    read_only = ("unshare", "-rm", "sh", "-c", "mount --bind SCRATCH/home SCRATCH/home && "
                 "mount -o remount,ro,bind SCRATCH/home SCRATCH/home && exec \"$@\"", "sh")
    cases = [
        accept("HOME under a file, TRITON_CACHE_DIR unset", G,
               folder_case({"HOME": "SCRATCH/a-file/home"}, setup=_a_file),
               check=one_warning_naming("HOME")),
        accept("HOME that cannot be made", G, folder_case({"HOME": "/proc/no-home"}),
               check=one_warning_naming("HOME")),
        accept("TRITON_HOME a file", G, folder_case({"TRITON_HOME": "SCRATCH/a-file"},
                                                    setup=_a_file),
               check=one_warning_naming("TRITON_HOME")),
        accept("TRITON_CACHE_DIR of 5000 characters", G,
               folder_case({"TRITON_CACHE_DIR": "SCRATCH/" + "d" * 5000}),
               check=one_warning_naming("TRITON_CACHE_DIR")),
        accept("TRITON_CACHE_DIR beyond PATH_MAX", G,
               folder_case({"TRITON_CACHE_DIR": "SCRATCH/" + "/".join(["d" * 200] * 25)}),
               check=one_warning_naming("TRITON_CACHE_DIR")),
        accept("TRITON_DUMP_DIR under a file", G,
               folder_case({"TRITON_KERNEL_DUMP": "1", "TRITON_ALWAYS_COMPILE": "1",
                            "TRITON_DUMP_DIR": "SCRATCH/a-file/dump", "TMPDIR": "SCRATCH"},
                           setup=_a_file), check=one_warning_naming("TRITON_DUMP_DIR")),
    ]
    if mount_namespaces():
        cases.append(accept("a read-only HOME", G, folder_case(
            {"HOME": "SCRATCH/home"}, prefix=read_only, setup=_read_only_home),
            check=one_warning_naming("HOME")))
    return cases


@triton.jit
def scale_kernel(x_ptr, alpha, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, alpha * tl.load(x_ptr + offsets))


@triton.jit
def declared_kernel(x_ptr, alpha: tl.float32, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, alpha * tl.load(x_ptr + offsets))


@triton.jit
def f32_pointer_kernel(x_ptr: tl.pointer_type(tl.float32), out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


@triton.jit
def typed_kernel(x_ptr, v: tl.int32, w: tl.uint32, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + v + w.to(tl.float32))


def scaled(kernel, alpha, route="cpu", jit_argument=False):
    def call(x, *a):
        return jtr.triton_call(x, a[0] if a else alpha, kernel=kernel, out_shape=x,
                               grid=(N // 256,), BLOCK=256)

    if route == "cpu":
        return lambda: interpret(call, ramp(), alpha) if jit_argument else interpret(call, ramp())
    return lambda: lower({"sm_90": "cuda", "gfx942": "rocm"}[route], call, X)


def typed(v, w, route="sm_90"):
    call = lambda x: jtr.triton_call(x, v, w, kernel=typed_kernel, out_shape=x,  # noqa: E731
                                     grid=(N // 256,), BLOCK=256)
    if route == "cpu":
        return lambda: interpret(call, ramp())
    return lambda: lower({"sm_90": "cuda", "gfx942": "rocm"}[route], call, X)


def is_scaled(result):
    return np.allclose(result, 2.5 * np.arange(N))


def _scalars():
    G = "0-d scalars"
    return [
        accept("np.array(2.5) for a tl.float32 parameter [cpu]", G,
               scaled(declared_kernel, np.array(2.5)), check=is_scaled),
        accept("jnp.float32(2.5) made outside jit for a tl.float32 parameter [cpu]", G,
               scaled(declared_kernel, jnp.float32(2.5)), check=is_scaled),
        refuse("a traced 0-d jit argument for a tl.float32 parameter [cpu]", G,
               scaled(declared_kernel, jnp.float32(2.5), jit_argument=True), "alpha",
               "tl.float32", "static_argnums"),
        refuse("jnp.float32(2.5) for an unannotated scalar [sm_90]", G,
               scaled(scale_kernel, jnp.float32(2.5), "sm_90"), "alpha", "0-d array",
               "pointer"),
        refuse("np.array(2.5) for an unannotated scalar [cpu]", G,
               scaled(scale_kernel, np.array(2.5)), "alpha", "0-d array", "pointer"),
        refuse("a traced 0-d jit argument for an unannotated scalar [gfx942]", G,
               lambda: lower("rocm", lambda x, a: jtr.triton_call(
                   x, a, kernel=scale_kernel, out_shape=x, grid=(4,), BLOCK=256), X,
                   jax.ShapeDtypeStruct((), jnp.float32)), "alpha", "0-d array", "static"),
        accept("autotune(fn, x, 2.5) [cpu]", G, lambda: np.asarray(jtr.autotune(
            lambda x, a: jtr.triton_call(x, a, kernel=scale_kernel, out_shape=x,
                                         grid=(N // 256,), BLOCK=256),
            jax.device_put(ramp(), jax.devices("cpu")[0]), 2.5)), check=is_scaled),
        refuse("autotune(fn, x, jnp.float32(2.5)) for a tl.float32 parameter [cpu]", G,
               lambda: jtr.autotune(lambda x, a: jtr.triton_call(
                   x, a, kernel=declared_kernel, out_shape=x, grid=(N // 256,), BLOCK=256),
                   jax.device_put(ramp(), jax.devices("cpu")[0]), jnp.float32(2.5)),
               "alpha", "tl.float32"),
    ]


def _annotations():
    G = "annotations"
    kinds = lambda calls: calls[0].summary()["launches"][0]["parameters"]  # noqa: E731
    return [
        refuse("2**40 for v: tl.int32 [sm_90]", G, typed(2**40, 1), "v", "1099511627776",
               "tl.int32"),
        refuse("-1 for w: tl.uint32 [cpu]", G, typed(1, -1, "cpu"), "w", "-1", "tl.uint32"),
        refuse("np.uint32(2**32-1) for v: tl.int32 [gfx942]", G,
               typed(np.uint32(2**32 - 1), 1, "gfx942"), "v", "4294967295", "tl.int32"),
        refuse("2.5 for v: tl.int32 [sm_90]", G, typed(2.5, 1), "v", "2.5", "tl.int32"),
        accept("1 for v: tl.int32 stays a runtime i32 [sm_90]", G, typed(1, 7),
               check=lambda calls: kinds(calls) == ["array", "i32", "u32", "array"]),
        accept("2**32-1 for w: tl.uint32 [cpu]", G, typed(0, 2**32 - 1, "cpu"),
               check=lambda out: np.allclose(out, np.arange(N) + np.float32(2**32 - 1))),
        refuse("an int32 array for x_ptr: tl.pointer_type(tl.float32) [sm_90]", G,
               lambda: lower("cuda", lambda x: jtr.triton_call(
                   x, kernel=f32_pointer_kernel, out_shape=x, grid=(4,), BLOCK=256),
                   jax.ShapeDtypeStruct((N,), jnp.int32)), "x_ptr", "int32"),
    ]


def _stand_in_device():
    return rebound(_arch, "device_kind", lambda platform, context: "Battery GPU")


@triton.autotune(configs=[triton.Config({"BLOCK": 256}), triton.Config({"BLOCK": 512})],
                 key=["n"])
@triton.jit
def tuned_copy_kernel(x_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


def _tuned_lowering():
    call = lambda x: jtr.triton_call(x, x.size, kernel=tuned_copy_kernel, out_shape=x,  # noqa
                                     grid=lambda meta: (triton.cdiv(N, meta["BLOCK"]),))
    return capture_one(call, X, platform="cuda")


def store_case(damage):
    """A run that stores a choice for an autotuned call in a fresh folder, `damage(path,
    record)`s it, and lowers the call again in a thread (a read that blocks would show);
    returns (undecided again, warnings logged, what damage returned)."""
    def run():
        folder = tempfile.mkdtemp(prefix="battery_choices_")
        warnings = []
        handler = logging.Handler()
        handler.emit = lambda record: warnings.append(record.getMessage())
        logger = logging.getLogger("jax_triton_rocm")
        saved_env = os.environ.get(_env.ENV_AUTOTUNE_DIR)
        os.environ[_env.ENV_AUTOTUNE_DIR] = folder
        logger.addHandler(handler)
        try:
            with _stand_in_device():
                jtr.clear_caches()
                undecided = _tuned_lowering().undecided
                _choices.STORE.put(undecided.key, _choices.Choice(1, undecided.descriptions[1]))
                path = os.path.join(folder, undecided.key[:2], f"{undecided.key}.json")
                with open(path) as file:
                    extra = damage(path, json.load(file))
                _choices._swept.discard(folder)  # as a new process would
                jtr.clear_caches()
                out = []
                thread = threading.Thread(target=lambda: out.append(_tuned_lowering()),
                                          daemon=True)
                thread.start()
                thread.join(30)
                if thread.is_alive():
                    raise RuntimeError("the lowering blocked reading the autotune store")
                return out[0].undecided is not None, warnings, extra(path) if extra else None
        finally:
            logger.removeHandler(handler)
            os.environ.pop(_env.ENV_AUTOTUNE_DIR)
            if saved_env is not None:
                os.environ[_env.ENV_AUTOTUNE_DIR] = saved_env
            jtr.clear_caches()
            shutil.rmtree(folder, ignore_errors=True)

    return run


def rewritten(**fields):
    def damage(path, record):
        with open(path, "w") as file:
            file.write(json.dumps({**record, **fields}))
    return damage


def fifo(path, record):
    os.remove(path)
    os.mkfifo(path)


def stale_temporary(path, record):
    old, young = path + ".dead.tmp", path + ".live.tmp"
    for leftover in (old, young):
        open(leftover, "w").close()
    os.utime(old, (time.time() - 61,) * 2)
    return lambda path: (os.path.exists(old), os.path.exists(young))


def ignored_with_one_warning(result):
    again, warnings, _ = result
    return again and len([w for w in warnings if "ignoring the autotune choice" in w]) == 1


def _store():
    G = "autotune store"
    return [accept(f"a choice with {name}", G, store_case(rewritten(**fields)),
                   check=ignored_with_one_warning)
            for name, fields in (("format 999", {"format": 999}), ("index '1'", {"index": "1"}),
                                 ("index true", {"index": True}),
                                 ("a NaN time", {"times_ms": [float("nan"), 1.0]}))] + [
        accept("a FIFO at a choice's path", G, store_case(fifo), check=ignored_with_one_warning),
        accept("a dead writer's .tmp a minute old", G, store_case(stale_temporary),
               check=lambda result: result[2] == (False, True)),
    ]


def _two_calls(route):
    def rule(ctx, x):
        grid, constexprs = (N // 256,), {"BLOCK": 256}
        [doubled] = jtr.triton_call_lowering(ctx, copy_kernel, x, grid=grid,
                                             constexprs=constexprs)
        return jtr.triton_call_lowering(ctx, copy_kernel, doubled, grid=grid,
                                        constexprs=constexprs)

    def run():
        prim = primitive(lambda x: [x], rule, multiple_results=True)
        fn = lambda x: prim.bind(x)[0]  # noqa: E731
        return interpret(fn, ramp()) if route == "cpu" else lower("cuda", fn, X)

    return run


@triton.autotune(configs=[{"BLOCK": 256}], key=[])
@triton.jit
def dict_config_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


def _with_env(name, value, run):
    def wrapped():
        saved = os.environ.get(name)
        os.environ[name] = value
        try:
            return run()
        finally:
            os.environ.pop(name)
            if saved is not None:
                os.environ[name] = saved
    return wrapped


def _errors():
    G = "errors"
    copy = lambda **call: (lambda x: jtr.triton_call(  # noqa: E731
        x, **{"kernel": copy_kernel, "out_shape": x, "grid": (4,), "BLOCK": 256, **call}))
    interpret_code = ("import os; os.environ['TRITON_INTERPRET'] = '1'\n"
                      "import jax, jax.numpy as jnp\nfrom tests.support.kernels import add\n"
                      "x = jax.device_put(jnp.ones(1024), jax.devices('cpu')[0])\n"
                      "jax.jit(add)(x, x)\n")
    return [
        refuse("TRITON_INTERPRET=1 with a CPU run", G,
               lambda: in_fresh_process(interpret_code, {}), "TRITON_INTERPRET", "add_kernel"),
        refuse("JAX_TRITON_ROCM_KERNEL_CACHE_SIZE='\u00b2'", G, _with_env(
            "JAX_TRITON_ROCM_KERNEL_CACHE_SIZE", "\u00b2",
            lambda: lower("cuda", lambda x, y: add(x, y, BLOCK=128), X, X)),
            "JAX_TRITON_ROCM_KERNEL_CACHE_SIZE", "'\u00b2'"),
        refuse("operands as one tuple to triton_call_lowering [sm_90]", G,
               lambda: lower("cuda", lambda x: primitive(
                   lambda x: [x], lambda ctx, x: jtr.triton_call_lowering(
                       ctx, copy_kernel, (x,), grid=4, constexprs={"BLOCK": 256}),
                   multiple_results=True).bind(x)[0], X), "array_args[0]", "tuple"),
        refuse("a tuple for a pointer parameter [cpu]", G,
               lambda: interpret(lambda x: jtr.triton_call((x,), kernel=copy_kernel,
                                                           out_shape=x, grid=(4,), BLOCK=256),
                                 ramp()), "x_ptr", "tuple"),
        refuse("a config list holding a dict [sm_90]", G, lambda: lower(
            "cuda", lambda x: jtr.triton_call(x, kernel=dict_config_kernel, out_shape=x,
                                              grid=(4,)), X), "configs[0]", "dict"),
        refuse("an out_shape with a negative dimension [sm_90]", G, lambda: lower(
            "cuda", copy(out_shape=jax.ShapeDtypeStruct((-4,), jnp.float32)), X),
            "out_shape", "(-4,)"),
        refuse("a lambda as a constexpr [sm_90]", G, lambda: lower(
            "cuda", copy(BLOCK=lambda meta: 256), X), "BLOCK", "function"),
        refuse("a big-endian '>f4' NumPy input", G, lambda: jtr.triton_call(
            np.arange(N, dtype=">f4"), kernel=copy_kernel, out_shape=X, grid=(4,), BLOCK=256),
            "argument 0", "'>f4'"),
        accept("two triton_call_lowering calls in one rule [cpu]", G, _two_calls("cpu"),
               check=lambda out: np.allclose(out, np.arange(N))),
        accept("two triton_call_lowering calls in one rule [sm_90]", G, _two_calls("sm_90"),
               check=lambda calls: len(calls) == 2),
    ]


def many_variants():
    """Lowers 40 kernel variants with the package's caches bounded at 8; returns the largest
    cache seen, and the CompiledKernel objects alive after clear_caches()."""
    def run():
        largest = 0
        call = lambda s: (lambda x, y: add(x, y, BLOCK=64 << (s % 4), num_warps=1 + s % 2,  # noqa
                                           num_stages=1 + s // 8))
        for s in range(40):
            lower("cuda", call(s), X, X)
            largest = max(largest, max(len(cache) for cache in _state.CACHES))
        jtr.clear_caches()
        gc.collect()
        alive = sum(type(o).__name__ == "CompiledKernel" for o in gc.get_objects())
        return largest, alive

    for name in ("JAX_TRITON_ROCM_KERNEL_CACHE_SIZE", "JAX_TRITON_ROCM_CALL_CACHE_SIZE"):
        run = _with_env(name, "8", run)
    return run


def _memory():
    return [accept("40 kernel variants with caches of 8, then clear_caches()", "memory",
                   many_variants(), check=lambda result: result[0] <= 8 and result[1] == 0)]


def cases():
    return _callees() + _folders() + _scalars() + _annotations() + _store() + _errors() + \
        _memory()
