"""How one call's arguments fill a kernel's parameters: the layout, checked, as a `BoundKernel`
(docs/porting.md's rules); a tuple or `TensorDescriptor` parameter keyed by path, as Triton's
launcher keys it (`_Laying.leaf`)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.kernel import _autotuner, _spec, _tensordesc
from jax_triton_rocm.kernel._spec import kernel_name

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction


NESTED_KINDS = ("tuple", "descriptor")


@dataclasses.dataclass(frozen=True)
class ArgSource:
    """Where one runtime kernel parameter comes from: `kind` "input", "output", "scalar" or
    "descriptor" (over operand `index`); `path`: the element of a tuple parameter, or ()."""

    kind: str
    position: int
    index: int = -1
    scalar: _spec.Scalar | None = None
    path: tuple[int, ...] = ()
    descriptor: Any = None


@dataclasses.dataclass(frozen=True)
class BoundKernel:
    """One call's arguments laid onto a kernel's parameters, ready to compile and launch; keyed
    by position path (`(i, j)` for an element of a tuple)."""

    signature: dict[str, str]
    constexprs: dict[tuple[int], Any]
    attrs: dict[tuple[int], list]
    sources: tuple[ArgSource, ...]
    specializations: tuple[tuple[int, str], ...]
    zero_d_pointers: tuple[str, ...] = ()

    @classmethod
    def of_buffers(cls, buffers: list[tuple[str, int, int]], **fields: Any) -> BoundKernel:
        """A layout whose runtime parameters are buffers only, each (kind, position, operand
        index): a route's trampoline (`plan._trampoline.for_xla`), made with its sources here."""
        return cls(sources=tuple([ArgSource(*buffer) for buffer in buffers]), **fields)

    def zero_d_hint(self) -> str:
        return (f"{', '.join(self.zero_d_pointers)} is given a 0-d array, which the kernel "
                f"receives as a pointer (as in Triton). If the kernel wants a scalar there, pass "
                f"a Python or NumPy scalar (e.g. float(x), np.float32(x)); for a traced value "
                f"(an argument of the jitted function) make that argument static "
                f"(static_argnums, or functools.partial). Or annotate the parameter with its "
                f"type (alpha: tl.float32): a concrete 0-d array is then taken as the scalar it "
                f"holds.")

    def constexprs_text(self, names: list[str]) -> str:
        return ", ".join(f"{names[i]}{''.join(f'[{j}]' for j in path)}={value!r}"
                         for (i, *path), value in sorted(self.constexprs.items()))


def check_operands(jit_fn: JITFunction, n_positional: int, n_outputs: int) -> None:
    """Raises TypeError where a call gives more values than the kernel has parameters (the
    keywords' names are checked as the call is taken)."""
    names = list(jit_fn.arg_names)
    n_given = n_positional + n_outputs
    if n_given > len(names):
        raise TypeError(
            f"Too many operands for kernel {kernel_name(jit_fn)}: {n_positional} argument(s) and "
            f"{n_outputs} output(s) fill {n_given} parameters, but it has {len(names)} "
            f"({', '.join(names)}).")


PLACED_KINDS = ("input", "output", "keyword", *NESTED_KINDS)


def places_outputs(positional: tuple) -> bool:
    """Whether `positional` is a placed layout (one entry per parameter), placing the outputs."""
    # A list: for the few entries it costs less than a generator.
    return any([kind in PLACED_KINDS for kind, _ in positional])


@dataclasses.dataclass
class _Laying:
    """One call being laid onto a kernel's parameters, and its `BoundKernel`'s parts so far."""

    jit_fn: JITFunction
    positional: tuple
    in_avals: tuple
    out_avals: tuple
    constexprs: dict[str, Any]
    types: _spec.ArgumentTypes
    n_outputs: int
    fp8_refusing: set[str]  # the fp8 types the target does not take
    constants: dict[tuple[int, ...], Any] = dataclasses.field(default_factory=dict)
    specializations: list[tuple[tuple[int, ...], str]] = dataclasses.field(default_factory=list)
    sources: list[ArgSource] = dataclasses.field(default_factory=list)
    zero_d_pointers: list[str] = dataclasses.field(default_factory=list)
    fp8_refused: list[tuple[str, str]] = dataclasses.field(default_factory=list)

    def parameter(self, i: int, param: Any) -> Any:
        """Parameter `i` laid out: its signature type; TypeError where the call does not fit."""
        name, n_positional = self.types.name, len(self.positional)
        if i < n_positional:
            kind, value = self.positional[i]
        elif i < n_positional + self.n_outputs:  # the outputs follow the positional arguments
            kind, value = "output", i - n_positional
        else:
            kind, value = "keyword", None
        if kind in NESTED_KINDS:  # a tuple or descriptor (`ArgSource`): its parts, by path
            return self.leaf((i,), param, (kind, value))
        if kind == "keyword":  # a keyword or the kernel's default fills it, as a constexpr
            self.constants[(i,)] = self.keyword_value(i, param)  # made plain
            return "constexpr"
        if kind == "input":  # a placed operand
            return self.pointer((i,), param, self.in_avals[value], ArgSource("input", i, value),
                                f"operand {value} ({param.name})")
        if kind == "output":
            if param.name in self.constexprs:
                raise TypeError(self.collision(i, value))
            if param.is_constexpr:
                raise TypeError(
                    f"Kernel {name}'s parameter {param.name!r} is a tl.constexpr, but output "
                    f"{value} would be passed there. Give the kernel {n_positional} positional "
                    f"argument(s) followed by {self.n_outputs} output pointer(s).")
            return self.pointer((i,), param, self.out_avals[value],
                                ArgSource("output", i, value), f"output {value} ({param.name})")
        # Positional argument i: an array operand (`value` is its index) or a scalar.
        if param.name in self.constexprs:
            raise TypeError(
                f"Kernel {name}'s parameter {param.name!r} is given twice: as positional "
                f"argument {i} and as a keyword. Pass it once.")
        what = f"argument {i} ({param.name})"
        if kind == "array":  # on no constexpr: the binder refuses an array there
            return self.pointer((i,), param, self.in_avals[value], ArgSource("input", i, value),
                                what, zero_d=True)
        if self.types.roles[i] is None:  # typing it failed: says why, naming it
            _spec.scalar_role(param, value, what=what, declared=_spec.declared_type(param))
        return self.scalar((i,), self.types.roles[i])

    def leaf(self, path: tuple[int, ...], param: Any, entry: tuple[str, Any]) -> Any:
        """One tuple or descriptor parameter (or an element of one) laid out by path: its type."""
        kind, value = entry
        what = f"parameter {param.name!r}" + "".join(f"[{j}]" for j in path[1:])  # "'xy'[1][0]"
        if kind == "tuple":
            return tuple(self.leaf(path + (j,), param, element) for j, element in enumerate(value))
        if kind == "descriptor":
            self.sources.append(ArgSource("descriptor", path[0], index=value[0], path=path[1:],
                                          descriptor=value[1]))
            signature_type = _tensordesc.signature_type(value[1])
            if (element := signature_type[11:].split("[", 1)[0]) in self.fp8_refusing:
                self.fp8_refused.append((param.name, element))  # [11:]: after "tensordesc<"
            return signature_type
        if kind == "input":
            return self.pointer(path, param, self.in_avals[value],
                                ArgSource("input", path[0], index=value, path=path[1:]), what,
                                zero_d=True)
        return self.scalar(path, _spec.scalar_role(param, value, what=what))  # as at the top

    def scalar(self, path: tuple[int, ...], role: tuple) -> str:
        """A scalar laid out by its role (`_spec.scalar_role`): its signature type."""
        kind, *taken = role
        if kind == "constexpr":
            self.constants[path] = taken[0]
            return "constexpr"
        typed, specialization = taken
        if specialization is not None:
            self.specializations.append((path, specialization))
        self.sources.append(ArgSource("scalar", path[0], scalar=typed, path=path[1:]))
        return typed.triton_type

    def pointer(self, path: tuple[int, ...], param: Any, aval: Any, source: ArgSource,
                what: str, zero_d: bool = False) -> str:
        """An array's pointer laid onto `path`, a parameter checked against its annotation;
        `zero_d`: a 0-d array gets the hint that it may be meant as a scalar."""
        # None where typing the dtype failed: `pointer_type` then says why, naming the array.
        pointer = self.types.pointers.get(aval.dtype) or _spec.pointer_type(aval.dtype, what=what)
        if len(path) == 1 and (annotation := getattr(param, "annotation_type", "")):
            check_pointer_annotation(annotation, pointer, aval, what)  # (no constexpr has one)
        spec = "" if param.do_not_specialize_on_alignment or param.do_not_specialize else "D"
        self.specializations.append((path, spec))
        self.sources.append(source)
        if zero_d and not tuple(aval.shape):
            self.zero_d_pointers.append(what)
        if pointer[1:] in self.fp8_refusing:
            self.fp8_refused.append((param.name, pointer[1:]))
        return pointer

    def keyword_value(self, i: int, param: Any) -> Any:
        """The constexpr value of parameter `i`, which no positional argument or output fills:
        a keyword's, or the kernel's default where it is a constexpr's or None; TypeError else."""
        name, names, types = self.types.name, list(self.jit_fn.arg_names), self.types
        n_positional, n_outputs = len(self.positional), self.n_outputs
        if param.name in self.constexprs:
            # As in jax-triton, a keyword makes any parameter a compile-time constant.
            return types.constexprs[param.name]
        if param.has_default and (param.is_constexpr or param.default is None):
            # A None is a constexpr, as Triton's launcher takes it.
            return _spec.plain_constexpr(param.default)
        if param.has_default:
            raise TypeError(
                f"Too few operands for kernel {name}: parameter {param.name!r} (position "
                f"{i}) has a default, but only tl.constexpr parameters and those "
                f"defaulting to None can be left out here. Pass it.")
        if param.is_constexpr:
            raise TypeError(
                f"Missing constexpr {param.name!r} for kernel {name}: pass it as a keyword "
                f"argument ({param.name}=...), give it a default in the kernel, or let the "
                f"autotune configs or heuristics set it.")
        raise TypeError(
            f"Too few operands for kernel {name}: parameter {param.name!r} (position "
            f"{i}) gets nothing. It takes {len(names)} parameters "
            f"({', '.join(names)}); {n_positional} argument(s) and "
            f"{n_outputs} output(s) fill the first {n_positional + n_outputs}.")

    def collision(self, position: int, output: int) -> str:
        """The message for output `output` landing on the parameter at `position`, which a
        keyword fills too: the call gives more values than the parameters before the keyword."""
        names, n_outputs, in_avals = list(self.jit_fn.arg_names), self.n_outputs, self.in_avals
        param = names[position]
        head = (f"Kernel {self.types.name}'s parameter {param!r} receives output {output}, but "
                f"is also given as a keyword ({param}={self.constexprs[param]!r})")
        if not n_outputs:  # outputs placed by parameter: no count of positional values to blame
            return (f"{head}. Outputs fill the non-constexpr parameters the arguments leave "
                    f"unfilled; check out_shape and the arguments.")
        n_positional = len(self.positional)
        extra = n_positional + n_outputs - position
        filled = ", ".join(names[:n_positional + n_outputs])
        text = (f"{head}: the call gives {n_positional} positional argument(s) and {n_outputs} "
                f"output(s), placed after them, which fill the parameters ({filled}), {extra} "
                f"more than the {position} before {param!r}.")
        matching = [(j, index, o) for j, (kind, index) in enumerate(self.positional)
                    if kind == "array" for o, out in enumerate(self.out_avals)
                    if _spec.aval_text(in_avals[index]) == _spec.aval_text(out)][-extra:]
        if matching:
            shown = ", ".join(f"argument {j} ({_spec.aval_text(in_avals[index])}, the shape and "
                              f"dtype of output {o})" for j, index, o in matching)
            aliases = ", ".join(f"{index}: {o}" for _, index, o in matching)
            return f"{text} " + passed_as_input_advice(
                shown, aliases,
                "the positional arguments (out_shape places the outputs after them)")
        last = ", ".join(f"argument {j}"
                         for j in range(max(n_positional - extra, 0), n_positional))
        return (f"{text} Drop the extra value(s) ({last or 'an output'}), or pass {param!r} "
                f"positionally instead of by keyword.")


def lay_out_arguments(
    jit_fn: JITFunction,
    backend: Any,
    *,
    positional: tuple[tuple[str, Any], ...],
    in_avals: tuple[Any, ...],
    out_avals: tuple[Any, ...],
    constexprs: dict[str, Any],
    fp8_types: tuple[str, ...] | None = None,
    target: str = "",
    types: _spec.ArgumentTypes | None = None,
) -> BoundKernel:
    """Lays a call's arguments onto the kernel's parameters, checking each against it; in a
    placed layout an output no entry names has no parameter. `backend`: Triton's compiler
    backend class (for `parse_attr`); `fp8_types`: the fp8 types the target takes, None: any."""
    if types is None:
        types = _spec.argument_types(jit_fn, positional, in_avals, out_avals, constexprs)
    n_outputs = 0 if places_outputs(positional) else len(out_avals)
    check_operands(jit_fn, len(positional), n_outputs)
    laid = _Laying(jit_fn, positional, in_avals, out_avals, constexprs, types, n_outputs,
                   set() if fp8_types is None else set(_spec.FP8_DTYPES).difference(fp8_types))
    signature = {param.name: laid.parameter(i, param) for i, param in enumerate(jit_fn.params)}
    specializations = laid.specializations
    if laid.fp8_refused:  # the first, once every parameter is laid out
        refuse_fp8_type(*laid.fp8_refused[0], fp8_types, kernel=types.name, target=target)
    attrs = {path: parsed for path, spec in specializations if (parsed := backend.parse_attr(spec))}
    return BoundKernel(signature, laid.constants, attrs, tuple(laid.sources),
                       tuple([(path if len(path) > 1 else path[0], spec)
                              for path, spec in specializations]), tuple(laid.zero_d_pointers))


def check_pointer_annotation(annotation: str, pointer: str, aval: Any, what: str) -> None:
    """Raises TypeError where a parameter annotated with a scalar type, or a pointer to
    another element type, is given an array of `aval` (its pointer type `pointer`)."""
    if not annotation.startswith("*"):
        raise TypeError(
            f"{what} is annotated {_spec.DECLARABLE.get(annotation, (0, annotation))[1]}, "
            f"a scalar, but is given a {_spec.aval_text(aval)} array, not a concrete 0-d "
            f"one (a NumPy one, or a JAX one made outside jit), which would be taken as "
            f"the scalar it holds. Pass a Python or NumPy scalar (np.float32(2.0): jit "
            f"traces jnp.float32(2.0)); make an argument of the jitted function static "
            f"(static_argnums, functools.partial); or make the parameter a pointer and "
            f"tl.load it.")
    element = annotation[2:] if annotation.startswith("*k") else annotation[1:]
    if element != pointer[1:]:
        raise TypeError(
            f"{what} is annotated as a pointer to {element} ({annotation}), but is "
            f"given a {_spec.aval_text(aval)} array ({pointer}). Cast the array "
            f"(x.astype(...)), view its bits as that type "
            f"(jax.lax.bitcast_convert_type), or fix the annotation.")


def refuse_fp8_type(param: str, fp8: str, fp8_types: tuple[str, ...], *, kernel: str,
                    target: str) -> None:
    """Raises TypeError for parameter `param` of fp8 type `fp8`, which `target` does not take."""
    taken = ", ".join(f"{_spec.FP8_DTYPES[t]} ({t})" for t in sorted(fp8_types)
                      if t in _spec.FP8_DTYPES)
    raise TypeError(
        f"Kernel {kernel}'s parameter {param} is {_spec.FP8_DTYPES[fp8]} (Triton's "
        f"{fp8}), which Triton does not compile for {target}; the fp8 dtypes it "
        f"takes there are {taken}. Cast the array to one of those (x.astype(...)), or "
        f"compile for a target that has {_spec.FP8_DTYPES[fp8]}.")


def passed_as_input_advice(shown: str, aliases: str, where: str) -> str:
    """The advice where arrays with an output's shape and dtype (`shown`) are most likely that
    output passed as an input too: drop it from `where`, or alias it (`aliases`, as "1: 0")."""
    return (f"Most likely the output is passed as an input too: {shown}. If so, drop it from "
            f"{where}; or, if the kernel reads it as well, keep it and alias it to the output "
            f"(input_output_aliases={{{aliases}}}), which gives the output no parameter of its "
            f"own.")


def check_kernel_arguments(spec: _spec.KernelCallSpec, in_avals: tuple) -> None:
    """Checks the call `spec` against the kernel's parameters, so that a mistake fails at the
    call, not at lowering."""
    unwrapped, positional, out_shapes = spec.unwrapped, spec.positional, spec.out_shapes
    jit_fn = unwrapped.jit_fn
    if unwrapped.autotuner is not None or unwrapped.heuristics:  # constexprs set at lowering
        if unwrapped.autotuner is not None:
            _autotuner.check_autotuner(unwrapped.autotuner, unwrapped.name)
        n_trailing = 0 if places_outputs(positional) else len(out_shapes)
        check_operands(jit_fn, len(positional), n_trailing)
        return
    if spec.types.view is None:  # a scalar that cannot be typed: `compile_view` raises why
        _spec.compile_view(jit_fn, positional)
    from triton.backends.compiler import BaseBackend

    lay_out_arguments(jit_fn, BaseBackend, positional=positional, in_avals=tuple(in_avals),
                      out_avals=tuple(out_shapes), constexprs=dict(spec.metaparams),
                      types=spec.types)
