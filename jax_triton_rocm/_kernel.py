"""A Triton kernel's parameters, and how one call's arguments fill them.

`triton_call(*args, out_shape=..., **metaparams)` fills the kernel's parameters in order: the
positional arguments first, then one pointer per output, then the remaining parameters by name
from the metaparams, falling back to the kernel's own defaults. A parameter given by keyword is a
compile-time constant even when not annotated `tl.constexpr` (as in jax-triton).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from jax_triton_rocm import _types

# Keywords of `triton_call` that are compile options on some vendor rather than constexprs.
# A kernel parameter of the same name wins (it is then a constexpr).
AMD_OPTIONS = ("waves_per_eu", "matrix_instr_nonkdim", "kpack")
COMPILE_OPTIONS = AMD_OPTIONS + ("maxnreg",)


def _triton():
    from jax_triton_rocm import _compat

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


@dataclasses.dataclass(frozen=True)
class ArgSource:
    """Where one runtime kernel parameter comes from.

    Attributes:
      kind: "input" (an array operand), "output" (an output buffer) or "scalar".
      position: the kernel parameter it fills.
      index: operand index for "input", output index for "output".
      scalar: the typed value for "scalar".
    """

    kind: str
    position: int
    index: int = -1
    scalar: _types.Scalar | None = None


@dataclasses.dataclass(frozen=True)
class BoundKernel:
    """One call's arguments laid onto a kernel's parameters, ready to compile and launch.

    Attributes:
      signature: Triton signature, every parameter by name ("*fp32", "i32", "constexpr").
      constexprs: constexpr values by parameter position, as `{(i,): value}`.
      attrs: specialisation attributes by position, as Triton's backends parse them.
      sources: the runtime parameters in kernel order (what jaxlib passes at launch).
      specializations: the specialisation strings ("D", "") by position, for the kernel key.
    """

    signature: dict[str, str]
    constexprs: dict[tuple[int], Any]
    attrs: dict[tuple[int], list]
    sources: tuple[ArgSource, ...]
    specializations: tuple[tuple[int, str], ...]


def bind(
    jit_fn: Any,
    backend: Any,
    *,
    positional: tuple[tuple[str, Any], ...],
    in_avals: tuple[Any, ...],
    out_avals: tuple[Any, ...],
    constexprs: dict[str, Any],
) -> BoundKernel:
    """Lays a call's arguments onto the kernel's parameters.

    Args:
      jit_fn: the @triton.jit function.
      backend: Triton's compiler backend class for the target (for `parse_attr`).
      positional: one entry per positional argument, ("array", operand index) or
        ("scalar", value).
      in_avals: the abstract values of the array operands.
      out_avals: the abstract values of the outputs.
      constexprs: values by parameter name (metaparams, config kwargs, heuristics).

    Raises:
      TypeError: too many or too few arguments, an array where a constexpr must be, a missing
        constexpr, a keyword that is no parameter of the kernel; each names the kernel, the
        parameter and what to do.
    """
    params = list(jit_fn.params)
    names = [p.name for p in params]
    name = kernel_name(jit_fn)
    n_given = len(positional) + len(out_avals)
    if n_given > len(params):
        raise TypeError(
            f"Too many operands for kernel {name}: {len(positional)} argument(s) and "
            f"{len(out_avals)} output(s) fill {n_given} parameters, but it has {len(params)} "
            f"({', '.join(names)}).")
    unknown = sorted(set(constexprs) - set(names))
    if unknown:
        raise TypeError(
            f"Unknown keyword argument(s) {', '.join(map(repr, unknown))} for kernel {name}, "
            f"whose parameters are ({', '.join(names)}). Keyword arguments of triton_call fill "
            f"the kernel's constexpr parameters by name.")

    signature: dict[str, str] = {}
    values: dict[tuple[int], Any] = {}
    attrs: dict[tuple[int], list] = {}
    specs: list[tuple[int, str]] = []
    sources: list[ArgSource] = []

    def constexpr(i: int, value: Any) -> None:
        signature[names[i]] = "constexpr"
        values[(i,)] = value

    def array(i: int, aval: Any, source: ArgSource, what: str) -> None:
        signature[names[i]] = _types.pointer_type(aval.dtype, what=what)
        spec = "" if params[i].do_not_specialize_on_alignment or params[i].do_not_specialize else "D"
        _add_attr(i, spec)
        sources.append(source)

    def _add_attr(i: int, spec: str) -> None:
        specs.append((i, spec))
        parsed = backend.parse_attr(spec)
        if parsed:
            attrs[(i,)] = parsed

    for i, param in enumerate(params):
        pname = param.name
        if i < len(positional):
            kind, value = positional[i]
            if pname in constexprs:
                raise TypeError(
                    f"Kernel {name}'s parameter {pname!r} is given twice: as positional argument "
                    f"{i} and as a keyword. Pass it once.")
            if kind == "array":
                if param.is_constexpr:
                    raise TypeError(
                        f"Kernel {name}'s parameter {pname!r} is a tl.constexpr, but positional "
                        f"argument {i} is an array. Pass a Python value there.")
                array(i, in_avals[value], ArgSource("input", i, value), f"argument {i} ({pname})")
            elif param.is_constexpr or value is None:
                constexpr(i, value)
            else:
                typed = _types.scalar(value, what=f"argument {i} ({pname})")
                if typed.triton_type in ("i32", "i64", "u64") and not param.do_not_specialize:
                    if typed.value == 1:
                        constexpr(i, 1)
                        continue
                    _add_attr(i, _types.int_specialization(typed.value))
                signature[pname] = typed.triton_type
                sources.append(ArgSource("scalar", i, scalar=typed))
        elif i < n_given:
            out = i - len(positional)
            if pname in constexprs:
                raise TypeError(
                    f"Kernel {name}'s parameter {pname!r} receives output {out}, but is also "
                    f"given as a keyword. Outputs fill the parameters after the positional "
                    f"arguments; check out_shape and the argument count.")
            if param.is_constexpr:
                raise TypeError(
                    f"Kernel {name}'s parameter {pname!r} is a tl.constexpr, but output {out} "
                    f"would be passed there. Give the kernel {len(positional)} positional "
                    f"argument(s) followed by {len(out_avals)} output pointer(s).")
            array(i, out_avals[out], ArgSource("output", i, out), f"output {out} ({pname})")
        elif pname in constexprs:
            # As in jax-triton, a keyword makes any parameter a compile-time constant.
            constexpr(i, constexprs[pname])
        elif param.has_default:
            if param.is_constexpr:
                constexpr(i, param.default)
            else:
                raise TypeError(
                    f"Too few operands for kernel {name}: parameter {pname!r} (position {i}) has "
                    f"a default, but only tl.constexpr parameters can be left out here. Pass it.")
        elif param.is_constexpr:
            raise TypeError(
                f"Missing constexpr {pname!r} for kernel {name}: pass it as a keyword argument "
                f"({pname}=...), give it a default in the kernel, or let the autotune configs "
                f"or heuristics set it.")
        else:
            raise TypeError(
                f"Too few operands for kernel {name}: parameter {pname!r} (position {i}) gets "
                f"nothing. It takes {len(params)} parameters ({', '.join(names)}); "
                f"{len(positional)} argument(s) and {len(out_avals)} output(s) fill the first "
                f"{n_given}.")
    return BoundKernel(signature, values, attrs, tuple(sources), tuple(specs))
