"""Gluon kernels: a clear error where a layout's threads per warp or warps per CTA do not fit
the launch, which Triton's verifier rejects with a bare "error encountered during parsing"."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.kernel._spec import kernel_name

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction

# The innermost layout attributes in printed TTGIR, e.g.
# #ttg.blocked<{sizePerThread = [8], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>.
_LAYOUT = re.compile(r"#ttg\.\w+<\{[^{}]*\}>")
_THREADS = re.compile(r"threadsPerWarp = \[([\d, ]*)\]")
_WARPS = re.compile(r"warpsPerCTA = \[([\d, ]*)\]")


def layout_error(jit_fn: JITFunction, module_text: str | None, *, warp_size: int, num_warps: int,
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
        try:
            ast_to_ttir(src.fn, src, context=context, options=options, codegen_fns=codegen_fns,
                        module_map=module_map, module=module)
        except RuntimeError:  # rejected again, as expected: the module holds what was built
            pass
        return module.str()
    except Exception:  # a diagnosis must never hide the original error
        return None
