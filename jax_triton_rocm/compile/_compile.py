"""Compiling a bound kernel with `triton.compile`, through the one shared kernel-key cache and
its pool of threads; docs/design.md, "Compiles start at the trace"."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import inspect
import logging
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.base import _compat, _env, _state
from jax_triton_rocm.compile import _cache, _errors, _folders

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction

    from jax_triton_rocm.plan._plan import Launch
    from jax_triton_rocm.kernel._layout import BoundKernel
    from jax_triton_rocm.kernel._spec import KernelCallSpec

logger = logging.getLogger("jax_triton_rocm")


def stable_text(value: Any) -> str:
    """A text for a constexpr value that is equal exactly when the values compile alike; a
    Triton function by what its call graph resolves to now (`graph_digest`), a Triton builtin
    (`tl.exp`) by its module and name, the same in every process."""
    if is_triton_function(value):
        return f"fn:{graph_digest(value)}"
    if getattr(value, "__triton_builtin__", False):
        return f"builtin:{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
    if type(value).__name__ == "constexpr":
        return f"constexpr:{stable_text(getattr(value, 'value', None))}"
    if isinstance(value, (tuple, list)):
        return f"{type(value).__name__}({','.join(stable_text(v) for v in value)})"
    return f"{type(value).__module__}.{type(value).__qualname__}:{value!r}"


def is_triton_function(value: Any) -> bool:
    """Whether `value` is a Triton function (`@triton.jit`, `@gluon.jit`, a constexpr function)."""
    from triton.runtime.jit import JITCallable

    return isinstance(value, JITCallable) and hasattr(value, "src")


def graph_key(jit_fn: JITFunction, kernel: Any = None,
              record: dict | None = None) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """What decides the code of `jit_fn` and every Triton function it calls, resolved now:
    (functions, globals), per function reached (`jit_fn` first, then its callees depth first) a
    digest of its source, first line and decorator settings, and the globals they read,
    ((module:name, value text), ...) sorted; equal in every process for the same sources and
    values. Each function is parsed once per record (`record`: `kernel`'s, where the caller holds
    it) and again where a callee's path resolves to another object now. Triton's walk
    (`DependenciesFinder`) collects the callees rather than merging their (stale) values."""
    from triton.runtime.jit import DependenciesFinder

    functions: list[str] = []
    values: dict[tuple[str, str], str] = {}
    seen: set[int] = set()
    pending = [jit_fn]
    while pending:
        fn = pending.pop()
        fn = getattr(fn, "__func__", fn)  # a bound constexpr function: the function itself
        if id(fn) in seen or not is_triton_function(fn):
            continue
        seen.add(id(fn))
        held = record if fn is kernel and record is not None else _state.KERNEL_RECORDS.record(fn)
        # What its source references: its digest, the plain values it reads ((scope dict, name)
        # pairs), ((name, attribute, ...), object) per Triton function it calls through a name,
        # its callees in the order found. What names resolve to lives outside the function: a
        # rebound callee is read anew.
        entry = held.get("references")
        if entry is None or any([_resolve(fn, path) is not obj for path, obj in entry[2]]):
            finder = DependenciesFinder(
                name=getattr(fn, "__name__", "?"), globals=fn.__globals__,
                nonlocals=inspect.getclosurevars(fn.fn).nonlocals, src=fn.src)
            callees: list[Any] = []
            finder._update_hash = callees.append  # where Triton's walk would merge a callee
            with _state.LOCKS.triton_language:  # `ast.parse` is not safe across threads on 3.11
                finder.visit(tree := fn.parse())
            reached, paths = {id(callee) for callee in callees}, []
            for node in ast.walk(tree):
                parts, inner = [], node
                while isinstance(inner, ast.Attribute):
                    parts.append(inner.attr)
                    inner = inner.value
                if isinstance(inner, ast.Name) and isinstance(node, (ast.Name, ast.Attribute)):
                    path = (inner.id, *reversed(parts))
                    if id(function := _resolve(fn, path)) in reached:
                        paths.append((path, function))
            names = [(scope, name) for (name, _), (_, scope) in finder.used_global_vals.items()]
            settings = getattr(fn, "noinline", None), getattr(fn, "debug", None)
            text = f"{type(fn).__name__}\n{fn.src}\n{getattr(fn, 'starting_line_number', '')}"
            own = hashlib.sha256(f"{text}\n{settings}".encode()).hexdigest()
            held["references"] = own, tuple(names), tuple(paths), tuple(callees)
        own, names, _, callees = held["references"]
        functions.append(own)
        module = getattr(fn, "__module__", "") or ""
        for scope, name in names:
            if name in scope:
                values[(module, name)] = stable_text(scope[name])
        pending.extend(reversed(callees))
    return tuple(functions), tuple(sorted([(f"{module}:{name}", text)
                                           for (module, name), text in values.items()]))


def call_graph_key(spec: KernelCallSpec, record: dict) -> tuple:
    """`graph_key` of the call's kernel (`record`: `spec.kernel`'s), with the digest of each
    Triton function given as a constexpr (also inside a tuple) added: a memo key of the call."""
    graph = graph_key(spec.unwrapped.jit_fn, spec.kernel, record)
    pending = [value for _, value in spec.metaparams]
    pending += [value for kind, value in spec.positional if kind == "scalar"]
    given = []
    while pending:
        value = pending.pop()
        if isinstance(value, tuple):
            pending.extend(value)
        elif is_triton_function(value):
            given.append(graph_digest(value))
    return graph if not given else (graph[0] + tuple(given), graph[1])


def graph_digest(jit_fn: JITFunction) -> str:
    """`graph_key` as one SHA-256 hex digest."""
    return hashlib.sha256(repr(graph_key(jit_fn)).encode()).hexdigest()


def _resolve(fn: Any, path: tuple[str, ...]) -> Any:
    """What the name and attributes `path` resolve to in `fn`'s scope now, as Python resolves a
    free name (closure cells, an empty one skipped, then module globals); None if nothing."""
    code_fn = getattr(fn, "fn", None)
    closure = getattr(code_fn, "__closure__", None) or ()
    value = fn.__globals__.get(path[0])
    for name, cell in zip(code_fn.__code__.co_freevars if closure else (), closure):
        if name == path[0]:
            with contextlib.suppress(ValueError):  # an empty cell
                value = cell.cell_contents
    for attribute in path[1:]:
        value = getattr(value, attribute, None)
    return getattr(value, "__func__", value)


@dataclasses.dataclass(frozen=True)
class CompiledKernel:
    """What `triton.compile` produced, reduced to what a kernel call needs (`ttir`: the kernel's
    own IR, Triton's or Gluon's; `metadata`: Triton's, whole)."""

    key: str
    name: str
    binary: bytes
    asm: str
    ttir: str
    shared_mem_bytes: int
    num_warps: int
    num_ctas: int
    warp_size: int
    global_scratch_size: int
    global_scratch_align: int
    profile_scratch_size: int
    metadata: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class CompileJob:
    """One kernel to compile: what `triton.compile` takes, and the kernel key it is cached under;
    `arch` as users name it ("sm_90"), `symbol` what the cache entry's binary must define,
    `binary_key` and `asm_key` which of Triton's outputs to read, `widening` what is hashed into
    Triton's on-disk key after its own hash, in turn."""

    jit_fn: JITFunction
    triton_gpu_target: Any
    arch: str
    bound: BoundKernel
    options: dict[str, Any]
    gluon: bool
    binary_key: str
    asm_key: str
    key: str
    symbol: str
    widening: tuple[str, ...]


def make_job(jit_fn: JITFunction, triton_gpu_target: Any, bound: BoundKernel,
             options: dict[str, Any], *, arch: str, gluon: bool, binary_key: str, asm_key: str,
             symbol: str, kernel: Any = None, record: dict | None = None) -> CompileJob:
    """A `CompileJob`, its kernel key a SHA-256 over every input that can change the binary."""
    graph = graph_key(jit_fn, kernel, record)
    constexprs = sorted(bound.constexprs.items())
    texts = [f"{k}={stable_text(v)}" for k, v in constexprs]
    parts = [
        f"sources={graph[0]}",
        f"globals={graph[1]}",
        f"triton={_compat.triton_info().version}",
        f"target={triton_gpu_target.backend}:{triton_gpu_target.arch}:"
        f"{triton_gpu_target.warp_size}",
        f"language={'gluon' if gluon else 'triton'}",
        f"signature={sorted(bound.signature.items())}",
        f"specialization={bound.specializations}",
        "constexprs=" + ";".join(texts),
        "options=" + ";".join([f"{k}={stable_text(v)}" for k, v in sorted(options.items())]),
    ]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()
    # What Triton's on-disk key misses: the call graph as it resolves now (its `cache_key` keeps
    # the first), and the constexprs' types where one is a str (Triton writes them with `str()`,
    # so `BLOCK="256"` would get `BLOCK=256`'s binary).
    functions = [text for text, (_, v) in zip(texts, constexprs) if is_triton_function(v)]
    widening = [f"-{graph}-{functions}"] if len(graph[0]) > 1 or graph[1] or functions else []
    if any([isinstance(v, str) for _, v in constexprs]):
        types = [(k, type(v).__qualname__) for k, v in constexprs]
        widening.append(f"-constexpr-types={types}")
    return CompileJob(jit_fn, triton_gpu_target, arch, bound, dict(options), gluon, binary_key,
                      asm_key, key, symbol, tuple(widening))


def triton_options(launch: Launch, spec: KernelCallSpec, compile_options: tuple[str, ...],
                   option_names: frozenset[str]) -> dict[str, Any]:
    """Options for `triton.compile` of `launch`: the common ones, the vendor's own
    `compile_options` where set, and the call's `backend_options` that name a field of the
    vendor's Triton options (`option_names`); other vendors' are left out, as Triton's are."""
    config = launch.config
    options: dict[str, Any] = {
        "num_warps": launch.num_warps,
        "num_ctas": config.num_ctas,
        "enable_fp_fusion": spec.enable_fp_fusion,
        "debug": spec.debug,
    }
    if config.num_stages is not None:
        options["num_stages"] = config.num_stages
    options.update({name: config.options[name] for name in compile_options
                    if config.options.get(name) is not None})
    options.update({name: value for name, value in spec.backend_options if name in option_names})
    return options


def launch_jobs(launches: list[Launch], spec: KernelCallSpec, backend: Any, answers: Any,
                record: dict | None = None) -> list[CompileJob]:
    """The `CompileJob` of each of `launches`, in order, for `backend` (a `Backend`) and its
    `answers` (`ArchAnswers`): what a lowering compiles, and what a trace starts early."""
    return [make_job(launch.jit_fn, answers.triton_gpu_target, launch.bound,
                     triton_options(launch, spec, backend.compile_options, backend.option_names),
                     arch=answers.arch.arch, gluon=launch.jit_fn.is_gluon(),
                     binary_key=backend.binary_key, asm_key=backend.asm_key,
                     symbol=spec.unwrapped.symbol, kernel=spec.kernel, record=record)
            for launch in launches]


def start_compiles(jobs: list[CompileJob]) -> None:
    """Queues each of `jobs` not compiled yet on the shared compile pool, at most as many as the
    kernel cache keeps; a lowering asking for one waits for it (`compile_job`), errors and all."""
    limit = _env.cache_size(_env.ENV_KERNEL_CACHE_SIZE)
    for job in jobs:
        if job.key not in _state.COMPILED_KERNELS:
            _state.COMPILE_POOL.start(job.key, functools.partial(compile_job, job, counted=False),
                                      threads=thread_count(), limit=limit)


def compiled_launches(launches: list[Launch], jobs: list[CompileJob]) -> list[tuple]:
    """(launch, job, compiled kernel) for each of `launches` (`jobs`: theirs) whose kernel
    compiled, in order (the first in this thread, the others also on the compile pool). As
    Triton's autotuner does, a config whose compile fails a `tl.static_assert` or ptxas is
    dropped when others remain (OutOfResources is a launch error, for jaxlib's autotuner); any
    other error, or every config failing, raises the first config's error."""
    from triton.compiler.errors import CompileTimeAssertionFailure
    from triton.runtime.errors import PTXASError

    if len(jobs) == 1:  # one kernel: its error is the call's, as it is
        return [(launches[0], jobs[0], compile_job(jobs[0]))]
    start_compiles(jobs[1:])  # this thread compiles the first, or waits for it
    results: list[Any] = []
    for job in jobs:  # each config's fate, its error included, is weighed below
        try:
            results.append(compile_job(job))
        except Exception as err:  # noqa: BLE001
            results.append(err)
    skippable = (CompileTimeAssertionFailure, PTXASError)
    errors = [(c, r) for c, r in zip(launches, results) if isinstance(r, BaseException)]
    fatal = [(c, r) for c, r in errors if not isinstance(r, skippable)]
    if fatal or (errors and len(errors) == len(launches)):
        config, error = (fatal or errors)[0]
        note = f"jax_triton_rocm: in autotune config ({config.description})"
        # The kernel cache raises a remembered error again at each lowering: one note each.
        if note not in getattr(error, "__notes__", ()):
            error.add_note(note)
        raise error
    for config, error in errors:
        logger.info("jax_triton_rocm: autotune config (%s) dropped: %s: %s",
                    config.description, type(error).__name__, error)
    return [(config, job, result) for config, job, result in zip(launches, jobs, results)
            if not isinstance(result, BaseException)]


def thread_count() -> int:
    """The most kernels compiling at once (`JAX_TRITON_ROCM_COMPILE_THREADS`; a ValueError where
    it is no non-negative integer)."""
    return max(1, _env.compile_threads() or 1)


def compile_job(job: CompileJob, counted: bool = True) -> CompiledKernel:
    """`job`'s kernel from the shared cache, compiled on a miss (once per key: `claim`); a
    kernel's own compile error is remembered until `clear_caches()`. A hit is `counted` in the
    cache's stats (not by an early compile: its lowering counts it). Raises what
    `_errors.explained` makes of a compile error."""
    kernels = _state.COMPILED_KERNELS
    kernel, held = kernels.claim(job.key, counted)
    if held is None:
        return kernel
    try:
        triton = _compat.triton_info().module
        if job.gluon:
            from triton.experimental.gluon._runtime import GluonASTSource as Source
        else:
            from triton.compiler import ASTSource as Source
        bound = job.bound
        source = Source(job.jit_fn, bound.signature, constexprs=bound.constexprs,
                        attrs=bound.attrs)
        # The front end one thread at a time (CPython 3.11's `ast.parse` is not thread-safe); a
        # Gluon module Triton's verifier rejects explained by its layouts.
        make_ir = source.make_ir

        def make_ir_alone(target: Any, options: Any, *args: Any) -> Any:
            with _state.LOCKS.triton_language:
                try:
                    return make_ir(target, options, *args)
                except RuntimeError as err:
                    if not job.gluon:
                        raise
                    text = _errors.rejected_module_text(source, target, options, *args)
                    raise _errors.layout_error(job.jit_fn, text, warp_size=options.warp_size,
                                               num_warps=options.num_warps,
                                               target=job.arch) from err

        source.make_ir = make_ir_alone
        if job.widening:
            triton_hash = source.hash

            def widened_hash() -> str:
                key = triton_hash()
                for suffix in job.widening:
                    key = hashlib.sha256(f"{key}{suffix}".encode()).hexdigest()
                return key

            source.hash = widened_hash
        with _state.COMPILE_POOL.slot(thread_count()):  # in every thread: a bound on all
            compiled, meta = _folders.compile_in_usable_cache(triton, functools.partial(
                _cache.compile_checked, triton, source, job.triton_gpu_target, job.options,
                job.binary_key, job.asm_key, job.symbol))
        meta.pop("target", None)
        kernel = CompiledKernel(
            key=job.key, name=meta["name"], binary=bytes(compiled.asm[job.binary_key]),
            asm=compiled.asm[job.asm_key],
            # The kernel's own IR, for jaxlib's messages: Triton's "ttir", Gluon's "glir"/"ttgir".
            ttir=compiled.asm.get(source.ext, ""), shared_mem_bytes=int(meta.get("shared", 0)),
            num_warps=int(meta["num_warps"]), num_ctas=int(meta.get("num_ctas", 1)),
            warp_size=int(meta.get("warp_size", job.triton_gpu_target.warp_size)),
            global_scratch_size=int(meta.get("global_scratch_size", 0) or 0),
            global_scratch_align=int(meta.get("global_scratch_align", 1) or 1),
            profile_scratch_size=int(meta.get("profile_scratch_size", 0) or 0), metadata=meta)
    except Exception as err:
        explained = _errors.explained(err, job)
        kernels.finish(job.key, explained, keep=_errors.is_kernel_error(explained))
        if explained is err:
            raise
        raise explained  # its cause set by `_errors.explained`
    else:
        return kernels.finish(job.key, kernel)
    finally:
        held.release()
        del held  # a remembered error's traceback keeps this frame: the lock must not live on
