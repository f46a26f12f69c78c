"""A Triton kernel taken apart: the @jit function, its autotune and heuristics wrappers, its name.

How one call's arguments then fill the function's parameters is `_layout`.
"""

from __future__ import annotations

import dataclasses
from typing import Any


def _triton():
    from jax_triton_rocm.base import _compat

    return _compat.triton_info().module


@dataclasses.dataclass(frozen=True)
class Unwrapped:
    """A kernel taken apart: the @jit function inside and the wrappers around it, outermost first.

    Attributes:
      jit_fn: the @triton.jit / @gluon.jit function.
      autotuner: the @triton.autotune wrapper, or None.
      heuristics: the @triton.heuristics wrappers, outermost first.
      heuristics_outside: how many of `heuristics` (the first ones) wrap the autotuner; they run
        once per call, the others once per autotune config.
    """

    jit_fn: Any
    autotuner: Any | None
    heuristics: tuple[Any, ...]
    heuristics_outside: int = 0


def unwrap(kernel: Any) -> Unwrapped:
    """Splits `kernel` into its @triton.jit (or @gluon.jit) function and its wrappers.

    Accepts @triton.autotune and @triton.heuristics nested in either order.

    Raises:
      TypeError: `kernel` is not a Triton function, naming its type (and `TRITON_INTERPRET`
        where that made it Triton's interpreted function), or an autotune config is not a
        `triton.Config`.
    """
    triton = _triton()
    from triton.runtime.autotuner import Autotuner, Heuristics

    autotuner = None
    heuristics = []
    node = kernel
    while True:
        if isinstance(node, Autotuner):
            if autotuner is not None:
                raise TypeError("kernel is wrapped in @triton.autotune twice; keep one.")
            _check_configs(node, triton)
            autotuner = node
            heuristics_outside = len(heuristics)
        elif isinstance(node, Heuristics):
            heuristics.append(node)
        elif isinstance(node, triton.JITFunction):
            outside = len(heuristics) if autotuner is None else heuristics_outside
            return Unwrapped(node, autotuner, tuple(heuristics), outside)
        elif type(node).__name__ == "InterpretedFunction":
            raise TypeError(
                f"kernel {getattr(node, '__name__', node)!r} is Triton's InterpretedFunction, "
                f"not a @triton.jit function: TRITON_INTERPRET=1 was set when it was decorated, "
                f"and then @triton.jit makes every kernel (Triton's own helpers too) one that "
                f"runs only in Triton's interpreter, which jax_triton_rocm can neither compile "
                f"for a GPU nor run on the CPU. Unset TRITON_INTERPRET before Triton is "
                f"imported: the package runs kernels in Triton's interpreter on the CPU by "
                f"itself.")
        else:
            what = "kernel" if node is kernel else f"the function inside kernel {kernel!r}"
            raise TypeError(
                f"{what} must be a Triton kernel (a function decorated with @triton.jit or "
                f"@gluon.jit, optionally wrapped in @triton.autotune / @triton.heuristics); got "
                f"{type(node).__module__}.{type(node).__qualname__}: {node!r}.")
        node = node.fn


def _check_configs(autotuner: Any, triton: Any) -> None:
    """Raises TypeError, naming the config, unless every autotune config is a `triton.Config`."""
    for i, config in enumerate(getattr(autotuner, "configs", ())):
        if not isinstance(config, triton.Config):
            example = (f"triton.Config({config!r}, num_warps=4)" if isinstance(config, dict)
                       else "triton.Config({'BLOCK': 256}, num_warps=4)")
            raise TypeError(
                f"@triton.autotune's configs[{i}] is a {type(config).__name__} ({config!r}), "
                f"not a triton.Config. Give each config as one, e.g. {example}.")


def kernel_name(jit_fn: Any) -> str:
    return getattr(jit_fn, "__name__", None) or jit_fn.fn.__name__
