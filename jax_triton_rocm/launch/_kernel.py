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
      TypeError: `kernel` is not a Triton function, naming its type.
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
            autotuner = node
            heuristics_outside = len(heuristics)
        elif isinstance(node, Heuristics):
            heuristics.append(node)
        elif isinstance(node, triton.JITFunction):
            outside = len(heuristics) if autotuner is None else heuristics_outside
            return Unwrapped(node, autotuner, tuple(heuristics), outside)
        else:
            what = "kernel" if node is kernel else f"the function inside kernel {kernel!r}"
            raise TypeError(
                f"{what} must be a Triton kernel (a function decorated with @triton.jit or "
                f"@gluon.jit, optionally wrapped in @triton.autotune / @triton.heuristics); got "
                f"{type(node).__module__}.{type(node).__qualname__}: {node!r}.")
        node = node.fn


def kernel_name(jit_fn: Any) -> str:
    return getattr(jit_fn, "__name__", None) or jit_fn.fn.__name__
