"""Values as a call gives them to a kernel's parameters, taken or refused before the layout:
a concrete 0-d array for a parameter that declares a scalar type is the scalar it holds, a
NumPy array in the other byte order (which JAX cannot take) is refused naming it, and a Python
function is no constexpr."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from jax_triton_rocm.launch import _types


def given_values(jit_fn: Any, args: tuple,
                 keywords: dict[str, Any]) -> tuple[tuple, dict[str, Any]]:
    """`args` and `keywords` with each concrete 0-d array given to a parameter whose annotation
    declares a scalar type (`x: tl.float32`, `_types.declared_type`) replaced by the scalar it
    holds (`np.float32(2)` for `jnp.float32(2)`), typed later by the annotation. Other arrays
    stay arrays (pointers, as in Triton; a traced one on such a parameter is refused, naming
    it, when the call is laid out).

    Raises:
      TypeError: a NumPy array in the other byte order, naming it and the fix.
    """
    for i, arg in enumerate(args):
        _check_byte_order(arg, f"argument {i}")
    for name, value in keywords.items():
        _check_byte_order(value, f"keyword argument {name!r}")
    params = jit_fn.params
    declared = {i for i, param in enumerate(params) if _types.declared_type(param)}
    if not declared:
        return args, keywords

    def held(value: Any) -> Any:
        if (isinstance(value, (np.ndarray, jax.Array)) and not isinstance(value, jax.core.Tracer)
                and value.ndim == 0):
            return np.asarray(value)[()]
        return value

    args = tuple(held(arg) if i in declared else arg for i, arg in enumerate(args))
    names = {params[i].name for i in declared}
    return args, {name: held(value) if name in names else value
                  for name, value in keywords.items()}


def _check_byte_order(value: Any, what: str) -> None:
    if isinstance(value, tuple):
        for j, element in enumerate(value):
            _check_byte_order(element, f"{what}[{j}]")
    elif isinstance(value, np.ndarray) and not value.dtype.isnative:
        raise TypeError(
            f"{what} is a NumPy array of dtype {value.dtype.str!r}, in the other byte order than "
            f"this machine's, which JAX cannot take. Pass it in this machine's byte order: "
            f"x.astype(x.dtype.newbyteorder('=')).")


def check_not_a_function(what: str, value: Any, caller: str) -> None:
    """Raises TypeError for a constexpr that is a Python function (a lambda, a method): Triton
    takes values and Triton functions as constexprs, and fails deep in its compiler on other
    callables."""
    if not callable(value) or isinstance(value, type) or type(value).__name__ == "constexpr":
        return
    from triton.runtime.jit import JITCallable

    if isinstance(value, JITCallable):
        return
    raise TypeError(
        f"{caller}{what}={value!r} is a Python {type(value).__name__}, and a kernel's "
        f"constexpr is a value (an int, float, bool, str, None, tl dtype or tuple) or a "
        f"@triton.jit function. Pass the value it computes ({what}=f(...)), or "
        f"make it a @triton.jit function; a grid or zeroed_outputs that depends on the "
        f"constexprs goes to grid= / zeroed_outputs=, a value computed from the arguments to "
        f"@triton.heuristics.")
