"""Gluon kernels: clear errors for layouts that do not fit the launch.

A Gluon kernel fixes its layouts itself, so two numbers must agree with the launch: the
layout's threads per warp with the target's warp size (64 on CDNA, 32 on NVIDIA and RDNA) and
its warps per CTA with the call's `num_warps`. Triton's verifier rejects a mismatch with a bare
"error encountered during parsing" (the diagnostic goes to stderr only). `source` hands
`triton.compile` a `GluonASTSource` that, when that happens, rebuilds the module, reads the
layouts that reached the compiler and raises a ValueError naming both numbers and the target,
with Triton's error chained.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.kernel._spec import kernel_name

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction

# The innermost layout attributes in printed TTGIR, e.g.
# #ttg.blocked<{sizePerThread = [8], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>.
_LAYOUT = re.compile(r"#ttg\.\w+<\{[^{}]*\}>")
_FIELD = {
    "threads": re.compile(r"threadsPerWarp = \[([\d, ]*)\]"),
    "warps": re.compile(r"warpsPerCTA = \[([\d, ]*)\]"),
}


@dataclasses.dataclass(frozen=True)
class LayoutCounts:
    """One layout found in a Gluon module: its text and the counts it fixes (None: not fixed)."""

    text: str
    threads_per_warp: int | None
    warps_per_cta: int | None


def layouts_in(module_text: str) -> list[LayoutCounts]:
    """The distinct layouts of printed TTGIR that fix threads per warp or warps per CTA."""
    found = []
    for text in dict.fromkeys(_LAYOUT.findall(module_text)):
        counts = {}
        for what, pattern in _FIELD.items():
            match = pattern.search(text)
            counts[what] = (math.prod(int(n) for n in match.group(1).split(",") if n.strip())
                            if match else None)
        if counts["threads"] is not None or counts["warps"] is not None:
            found.append(LayoutCounts(text, counts["threads"], counts["warps"]))
    return found


def layout_error(jit_fn: JITFunction, module_text: str | None, *, warp_size: int, num_warps: int,
                 target: str) -> ValueError:
    """The error for a Gluon module that Triton's verifier rejected (to raise from its error):
    what is wrong with its layouts for a launch of `num_warps` warps of `warp_size` threads."""
    problems = []
    for layout in layouts_in(module_text or ""):
        if layout.threads_per_warp is not None and layout.threads_per_warp != warp_size:
            problems.append(
                f"layout {layout.text} has {layout.threads_per_warp} threads per warp, but the "
                f"target {target} has a warp size of {warp_size}: make threads_per_warp multiply "
                f"to {warp_size} (pass the warp size to the kernel as a constexpr, 64 on CDNA "
                f"gfx9xx, 32 on NVIDIA and RDNA)")
        if layout.warps_per_cta is not None and layout.warps_per_cta != num_warps:
            problems.append(
                f"layout {layout.text} has {layout.warps_per_cta} warps per CTA, but the call "
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


def source(jit_fn: JITFunction, signature: dict[str, str], constexprs: dict, attrs: dict,
           *, target: str) -> Any:
    """A `GluonASTSource` for `triton.compile` that turns layout mismatches into clear errors.

    Args:
      jit_fn: the @gluon.jit function.
      signature: every parameter by name, constexprs as "constexpr".
      constexprs: constexpr values by parameter position.
      attrs: specialisation attributes by parameter position.
      target: the target as users name it ("gfx942", "sm_90"), for error messages.
    """
    return _checked_source_class()(jit_fn, signature, constexprs, attrs, target=target)


@functools.cache
def _checked_source_class() -> type:
    """Defined on first use, so that importing this module does not import Triton."""
    from triton.experimental.gluon._runtime import GluonASTSource

    class LayoutCheckedGluonSource(GluonASTSource):
        def __init__(self, fn, signature, constexprs, attrs, *, target: str) -> None:
            super().__init__(fn, signature, constexprs, attrs)
            self.target_name = target

        def make_ir(self, target, options, codegen_fns, module_map, context):
            try:
                return super().make_ir(target, options, codegen_fns, module_map, context)
            except RuntimeError as err:
                text = _rejected_module_text(self, target, options, codegen_fns, module_map,
                                             context)
                raise layout_error(self.fn, text, warp_size=options.warp_size,
                                   num_warps=options.num_warps,
                                   target=self.target_name) from err

    return LayoutCheckedGluonSource


def _rejected_module_text(src: Any, target: Any, options: Any, codegen_fns: Any,
                          module_map: Any, context: Any) -> str | None:
    """Builds the Gluon module again, as `GluonASTSource.make_ir` does, and prints it.

    Runs only after the verifier rejected the module: `make_ir` drops the module it built, and
    Triton's error carries no text. The verifier rejects this copy too, so Triton prints its
    diagnostic on stderr a second time. None when this Triton builds modules differently.
    """
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
