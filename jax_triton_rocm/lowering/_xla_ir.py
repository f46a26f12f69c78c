"""Whether XLA's Triton custom call can take a compiled kernel's IR, checked once per kernel.

XLA reads the IR with the Triton dialect of the installed jaxlib, which may not read what the
installed Triton wrote: the IR is parsed here first, in that dialect, and a kernel whose IR does
not parse, or whose function does not take one pointer per buffer, takes jaxlib's route instead
(with a warning, once per kernel, for IR that does not parse where XLA's route was asked for by
JAX_TRITON_ROCM_XLA_NATIVE=1; the automatic route only logs why).
"""

from __future__ import annotations

import io
import warnings
from typing import Any

from jax_triton_rocm.base import _state
from jax_triton_rocm.compile import _compile


def parse_ttir(text: str) -> Any:
    """Parses Triton IR in a fresh MLIR context of this jaxlib, with its Triton dialect loaded
    (as XLA will); returns the verified module.

    Raises:
      ImportError: this jaxlib has no Triton dialect.
      Exception: jaxlib's `MLIRError` (or ValueError) when the IR does not parse or verify.
    """
    from jax._src.lib.mlir import ir
    from jaxlib.triton import dialect

    context = ir.Context()
    dialect.register_dialect(context)
    with context, ir.Location.unknown():
        module = ir.Module.parse(text)
        module.operation.verify()
    return module


def checked_ir(compiled: _compile.CompiledKernel, n_pointers: int, *,
               opt_out: str = "JAX_TRITON_ROCM_XLA_NATIVE=0", warn: bool = True) -> bytes | str:
    """The kernel's Triton IR as MLIR bytecode for XLA, or why XLA cannot take it.

    Warns (with `warn`), once per kernel, when this jaxlib cannot parse the IR that the installed
    Triton wrote; the warning says how to leave the route (`opt_out`).
    """
    key = (compiled.key, n_pointers)
    cached = _state.IR_CHECKS.get(key)  # content-keyed: never stale
    if cached is not None:
        return cached
    try:
        module = parse_ttir(compiled.ttir)
    except Exception as err:  # MLIRError has no public base class to name across jaxlibs
        reason = (f"this jaxlib's Triton dialect cannot parse the IR that Triton "
                  f"{_triton_version()} wrote ({_parse_error(err)})")
        if _state.IR_CHECKS.setdefault(key, reason) is reason and warn:  # once per kernel
            warnings.warn(
                f"jax_triton_rocm: kernel {compiled.name} takes jaxlib's Triton call instead of "
                f"XLA's: {reason}. Use a Triton release whose IR this jaxlib reads (docs/routes.md: "
                f"'Triton constructs that jaxlib does not parse'), or set {opt_out}.",
                RuntimeWarning, stacklevel=2)
        return reason
    value = _pointer_problem(module, compiled.name, n_pointers)
    if value is None:
        buffer = io.BytesIO()
        module.operation.write_bytecode(buffer)
        value = buffer.getvalue()
    return _state.IR_CHECKS.setdefault(key, value)


def _parse_error(err: Exception) -> str:
    """The lines of a parse error that say what was wrong (MLIR's start with a header and end
    with notes)."""
    lines = [line.strip() for line in str(err).strip().splitlines()]
    wanted = [line for line in lines if line and not line.startswith("note:")][:2]
    return " ".join(wanted)[:300] or type(err).__name__


def _pointer_problem(module: Any, name: str, n_pointers: int) -> str | None:
    """Why `module`'s kernel `name` cannot take exactly `n_pointers` pointers, or None."""
    from jax._src.lib.mlir import ir

    for op in module.body.operations:
        if op.operation.name != "tt.func":
            continue
        if ir.StringAttr(op.attributes["sym_name"]).value != name:
            continue
        types = [str(arg.type) for arg in op.regions[0].blocks[0].arguments]
        if len(types) == n_pointers and all(t.startswith("!tt.ptr") for t in types):
            return None
        return (f"its Triton IR takes ({', '.join(types)}), and XLA passes {n_pointers} "
                f"pointer(s), one per operand and result")
    return f"its Triton IR has no tt.func named {name}"


def _triton_version() -> str:
    from jax_triton_rocm.base import _compat

    return _compat.triton_info().version
