"""Where each launch parameter comes from (`ArgSource`), and a kernel parameter filled by a tuple
(a Triton tuple, maybe nested) or a `TensorDescriptor`: its type in the signature, and its
constexprs, specialisations and launch parameters by path.

Triton types a tuple parameter as a tuple of its elements' types (nested as the value is) and
keys constexprs and attributes by path, `(parameter, element, ...)`; its launcher passes the
runtime leaves in order, depth first, and specialises them as it does top-level arguments (an
int equal to 1 and None become constexprs; `do_not_specialize` applies to every leaf of the
parameter). A descriptor is typed `tensordesc<...>` and becomes its launch parameters once the
kernel is compiled (`lowering._tma`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jax_triton_rocm.launch import _tensordesc, _types

NESTED_KINDS = ("tuple", "descriptor")


@dataclasses.dataclass(frozen=True)
class ArgSource:
    """Where one runtime kernel parameter comes from.

    Attributes:
      kind: "input" (an array operand), "output" (an output buffer), "scalar" or "descriptor"
        (a `TensorDescriptor` over an operand, several launch parameters: `lowering._tma`).
      position: the kernel parameter it fills.
      index: operand index for "input" and "descriptor", output index for "output".
      scalar: the typed value for "scalar".
      path: the element of a tuple parameter it fills, () for the parameter itself.
      descriptor: the descriptor (over an abstract base) for "descriptor".
    """

    kind: str
    position: int
    index: int = -1
    scalar: _types.Scalar | None = None
    path: tuple[int, ...] = ()
    descriptor: Any = None

    @property
    def key(self) -> int | tuple[int, ...]:
        """Its key in `BoundKernel.specializations`: the position, or (position, *path)."""
        return (self.position, *self.path) if self.path else self.position



@dataclasses.dataclass
class NestedParam:
    """One parameter's part of a `_layout.BoundKernel`, keyed by path.

    Attributes:
      signature: the parameter's type: a string, or a tuple of them (nested).
      constexprs: compile-time leaves (None, an int equal to 1) by path.
      specializations: (path, "D" or "") for each pointer and int leaf.
      sources: the runtime leaves, in launch order.
      zero_d_pointers: the leaves that receive a 0-d array, for a compile-error hint.
    """

    signature: Any = None
    constexprs: dict[tuple[int, ...], Any] = dataclasses.field(default_factory=dict)
    specializations: list[tuple[tuple[int, ...], str]] = dataclasses.field(default_factory=list)
    sources: list[ArgSource] = dataclasses.field(default_factory=list)
    zero_d_pointers: list[str] = dataclasses.field(default_factory=list)


def lay_out(i: int, param: Any, entry: tuple[str, Any], in_avals: tuple) -> NestedParam:
    """Lays `entry` ("tuple" or "descriptor") onto parameter `i` (`param`).

    Raises:
      TypeError / OverflowError: a leaf Triton cannot take, named by its path.
    """
    nested = NestedParam()
    nested.signature = _leaf(nested, (i,), param, entry, in_avals)
    return nested


def path_text(name: str, path: tuple[int, ...]) -> str:
    """A leaf as messages name it: "parameter 'xy'[1][0]"."""
    return f"parameter {name!r}" + "".join(f"[{j}]" for j in path[1:])


def _leaf(nested: NestedParam, path: tuple[int, ...], param: Any, entry: tuple[str, Any],
          in_avals: tuple) -> Any:
    kind, value = entry
    what = path_text(param.name, path)
    if kind == "tuple":
        return tuple(_leaf(nested, path + (j,), param, element, in_avals)
                     for j, element in enumerate(value))
    if kind == "descriptor":
        nested.sources.append(ArgSource("descriptor", path[0], index=value[0], path=path[1:],
                                        descriptor=value[1]))
        return _tensordesc.signature_type(value[1])
    if kind == "input":
        aval = in_avals[value]
        aligned = not (param.do_not_specialize_on_alignment or param.do_not_specialize)
        nested.specializations.append((path, "D" if aligned else ""))
        nested.sources.append(ArgSource("input", path[0], index=value, path=path[1:]))
        if not tuple(aval.shape):
            nested.zero_d_pointers.append(what)
        return _types.pointer_type(aval.dtype, what=what)
    if value is None:
        nested.constexprs[path] = None
        return "constexpr"
    typed = _types.scalar(value, what=what)
    if typed.triton_type in ("i32", "i64", "u64") and not param.do_not_specialize:
        if typed.value == 1:  # as Triton's launcher does, inside tuples too
            nested.constexprs[path] = 1
            return "constexpr"
        nested.specializations.append((path, _types.int_specialization(typed.value)))
    nested.sources.append(ArgSource("scalar", path[0], scalar=typed, path=path[1:]))
    return typed.triton_type


def named_value(entry: tuple[str, Any], in_avals: tuple) -> Any:
    """How heuristics, pruning functions and grids see a nested argument: a tuple of what they
    see for its elements (arrays as abstract values), a descriptor over an abstract base."""
    kind, value = entry
    if kind == "tuple":
        return tuple(named_value(element, in_avals) for element in value)
    if kind == "descriptor":
        return value[1]
    return in_avals[value] if kind == "input" else value


def element_types(signature_type: Any) -> list[str]:
    """The element types in one parameter's signature type: "fp32" for "*fp32" and for
    "tensordesc<fp32[16,64]>", each element's for a tuple, the type itself for a scalar."""
    if isinstance(signature_type, tuple):
        return [t for element in signature_type for t in element_types(element)]
    if signature_type.startswith("tensordesc<"):
        return [signature_type[len("tensordesc<"):].split("[", 1)[0]]
    return [signature_type.lstrip("*")]
