"""What a failed compile tells the user (what the call gave the kernel; a Gluon layout that does
not fit the launch, which Triton's verifier rejects with a bare "error encountered during
parsing"), and whether the kernel cache remembers it (the kernel's own errors only)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import tempfile
from typing import Any

from jax_triton_rocm.plan import _trampoline
from jax_triton_rocm.kernel import _spec
from jax_triton_rocm.kernel._spec import kernel_name


class KernelPassFailure(RuntimeError):
    """Triton's compiler passes rejected a kernel for its target (Triton's own error says only
    "PassManager::run failed"; its diagnostics go to stderr)."""


# What a message says to do about a value a kernel cannot compile with.
_FIX = ("fix the value where the call passes it (a keyword of triton_call, constexprs= of "
        "triton_call_lowering, an autotune config or a heuristic) or fix the kernel; a None "
        "positional argument is a constexpr too, as in Triton")


def explained(err: Exception, job: Any) -> Exception:
    """What to raise for `err`, raised compiling `job` (a `_compile.CompileJob`): a Triton
    compile error (the kernel's own, not a trampoline's) with a note of the target and the
    constexprs, an MLIR pass failure as a `KernelPassFailure`, else `err`; each with
    `layout_hints`. A failed ptxas run's files are deleted from the temporary folder."""
    from triton.compiler.errors import CompilationError

    if type(err).__name__ == "PTXASError":
        folder = os.path.realpath(tempfile.gettempdir())
        for path in set(_PTXAS_FILE.findall(str(err))):
            if os.path.dirname(os.path.realpath(path)) != folder:
                continue  # only Triton's own temporary files, never a user's file
            for leftover in (path, path + ".o"):
                with contextlib.suppress(OSError):
                    os.remove(leftover)
    kernel, target = kernel_name(job.jit_fn), job.arch
    constexprs = job.bound.constexprs_text(list(job.jit_fn.arg_names))
    values = f"the constexprs {constexprs}" if constexprs else "no constexprs"
    raised = err
    if _trampoline.is_trampoline(job.jit_fn) and isinstance(err.__cause__, CompilationError):
        raised = err.__cause__  # the kernel's own error, not the trampoline's call of the kernel
        err.__cause__ = err.__context__ = None  # no cycle back through it
        raised.__suppress_context__ = True
    if isinstance(raised, CompilationError):
        raised.add_note(f"jax_triton_rocm: kernel {kernel} was compiled for {target} with "
                        f"{values}. Where the kernel cannot use one of them, {_FIX}.")
    elif isinstance(err, RuntimeError) and "PassManager::run failed" in str(err):
        fp8 = sorted(f"{name} ({kind.lstrip('*')})" for name, kind in job.bound.signature.items()
                     if kind.lstrip("*") in _spec.FP8_DTYPES)
        cause = (f" Its fp8 parameters {', '.join(fp8)} are a likely cause: Triton does no "
                 f"arithmetic on fp8 values ({', '.join(sorted(_spec.FP8_DTYPES.values()))}); "
                 f"convert them first (x.to(tl.float32)) and back for the store." if fp8 else "")
        options = ", ".join(f"{k}={v!r}" for k, v in sorted(job.options.items()))
        raised = KernelPassFailure(
            f"Triton's compiler passes rejected kernel {kernel} for {target} (options "
            f"{options}; {values}); the diagnostics Triton printed on stderr name the operation "
            f"and its line in the kernel, and the IR dump there is Triton's reproducer.{cause} "
            f"Otherwise, {_FIX}.")
        raised.__cause__ = err
    for hint in layout_hints(job.bound):
        raised.add_note(hint)
    return raised


# Triton's NVIDIA backend names its ptxas input in the PTXASError's repro command and leaves the
# file (and its .o) in the temporary folder when ptxas fails.
_PTXAS_FILE = re.compile(r"(\S+\.ptx)(?:\.o)?\b")


def layout_hints(bound: Any) -> list[str]:
    """What to do where a kernel given 0-d arrays (pointers: a scalar meant?) or tuples (separate
    operands meant?) failed to compile or run; `bound`: a `kernel._layout.BoundKernel`."""
    hints = []
    if bound.zero_d_pointers:
        hints.append(f"jax_triton_rocm: {bound.zero_d_hint()}")
    tuples = [name for name, kind in bound.signature.items() if isinstance(kind, tuple)]
    if tuples:
        hints.append(
            f"jax_triton_rocm: parameter(s) {', '.join(tuples)} are given a tuple, which the "
            f"kernel receives as a Triton tuple (indexed in the kernel: {tuples[0]}[0]). To "
            f"give its elements to separate parameters, pass them unpacked: "
            f"triton_call(*operands, ...).")
    return hints


def is_kernel_error(err: Exception) -> bool:
    """Whether a compile error is the kernel's own (a retry would fail the same way), not the
    environment's (an OSError, an unreadable cache file, running out of memory)."""
    from triton.errors import TritonError

    if isinstance(err, (UnicodeError, json.JSONDecodeError)):
        return False
    if isinstance(err, (TritonError, KernelPassFailure, ValueError, TypeError,
                        NotImplementedError, AssertionError)):
        return True
    return isinstance(err, RuntimeError) and "PassManager::run failed" in str(err)


# The innermost layout attributes in printed TTGIR, e.g.
# #ttg.blocked<{sizePerThread = [8], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>.
_LAYOUT = re.compile(r"#ttg\.\w+<\{[^{}]*\}>")
_THREADS = re.compile(r"threadsPerWarp = \[([\d, ]*)\]")
_WARPS = re.compile(r"warpsPerCTA = \[([\d, ]*)\]")


def layout_error(jit_fn: Any, module_text: str | None, *, warp_size: int, num_warps: int,
                 target: str) -> ValueError:
    """The error for a Gluon module that Triton's verifier rejected (to raise from its error):
    what is wrong with its layouts for a launch of `num_warps` warps of `warp_size` threads."""
    problems = []
    for text in dict.fromkeys(_LAYOUT.findall(module_text or "")):
        # The counts the layout fixes, over every dimension (None: not fixed).
        threads, warps = [math.prod(int(n) for n in match.group(1).split(",") if n.strip())
                          if (match := pattern.search(text)) else None
                          for pattern in (_THREADS, _WARPS)]
        if threads is not None and threads != warp_size:
            problems.append(
                f"layout {text} has {threads} threads per warp, but the "
                f"target {target} has a warp size of {warp_size}: make threads_per_warp multiply "
                f"to {warp_size} (pass the warp size to the kernel as a constexpr, 64 on CDNA "
                f"gfx9xx, 32 on NVIDIA and RDNA)")
        if warps is not None and warps != num_warps:
            problems.append(
                f"layout {text} has {warps} warps per CTA, but the call "
                f"launches num_warps={num_warps} on target {target}: make warps_per_cta multiply "
                f"to num_warps (pass the same number as num_warps= to triton_call or to the "
                f"autotune config, and to the kernel as a constexpr)")
    name = kernel_name(jit_fn)
    if problems:
        return ValueError(f"Gluon kernel {name} does not fit its launch on {target}: "
                          + "; ".join(problems) + ".")
    return ValueError(
        f"Gluon kernel {name} was rejected by Triton's verifier for target {target} (warp size "
        f"{warp_size}, num_warps={num_warps}); Triton printed the reason on stderr. Check that "
        f"every layout's threads_per_warp multiply to {warp_size} and its warps_per_cta to "
        f"{num_warps}.")


def rejected_module_text(src: Any, target: Any, options: Any, codegen_fns: Any,
                         module_map: Any, context: Any) -> str | None:
    """The rejected Gluon module's text (Triton's error has none), built again as
    `GluonASTSource.make_ir` does (its diagnostic printed again); None where that fails."""
    try:
        from triton._C.libtriton import ir
        from triton.compiler.code_generator import ast_to_ttir
        from triton.compiler.compiler import make_backend

        builder = ir.builder(context)
        module = builder.create_module()
        module.set_attr("ttg.target",
                        builder.get_string_attr(make_backend(target).get_target_name(options)))
        module.set_attr("ttg.num-warps", builder.get_int32_attr(options.num_warps))
        module.set_attr("ttg.num-ctas", builder.get_int32_attr(options.num_ctas))
        module.set_attr("ttg.threads-per-warp", builder.get_int32_attr(options.warp_size))
        with contextlib.suppress(RuntimeError):  # rejected again: the module holds what was built
            ast_to_ttir(src.fn, src, context=context, options=options, codegen_fns=codegen_fns,
                        module_map=module_map, module=module)
        return module.str()
    except Exception:  # a diagnosis must never hide the original error
        return None
