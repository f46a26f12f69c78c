"""A kernel that takes its buffers in the order a route passes them: the user's kernel, or a
generated trampoline, named like the kernel's symbol, whose parameters are in the route's order
and whose body calls the kernel in its own (Triton inlines it); docs/routes.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import linecache
from typing import TYPE_CHECKING, Any

from jax_triton_rocm.base import _state, _values
from jax_triton_rocm.kernel import _layout, _spec
from jax_triton_rocm.kernel._spec import Unwrapped

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction
    from jax_triton_rocm.plan._plan import Launch

# The generated code's own names start with this, so they never shadow a kernel parameter.
_PREFIX = "_jtr_"
_CALLEE = _PREFIX + "kernel"
# The name the trampoline is defined under; it is renamed after the kernel's symbol once defined.
_TRAMPOLINE = _PREFIX + "trampoline"
# Pointer types of the 0-d operands that carry each runtime scalar type (bools are bytes).
_SCALAR_POINTERS = {"u1": "*i1", "i1": "*i1"}
# Triton's divisibility specialisation ("D") is by 16; on XLA's route such an int travels divided
# by the largest power of two that divides it, up to this (`scale`).
LARGEST_SCALE = 128


def for_jaxlib(kernel: Unwrapped, launch: Launch, n_inputs: int,
               record: dict | None = None) -> Launch:
    """`launch` as jaxlib's call launches it: the operands' buffers, then the results'; a kernel
    whose buffers are in another order gets a trampoline."""
    jit_fn, bound = kernel.jit_fn, launch.bound
    first: dict[int, int] = {}
    owner: dict[int, int] = {}  # a parameter given a buffer another already has: that one
    holder: dict[int, int] = {}
    for source in bound.sources:
        if source.kind not in ("input", "descriptor", "output"):
            continue
        # Its place among the buffers jaxlib passes: the operands, then the results.
        index = source.index + (n_inputs if source.kind == "output" else 0)
        if index in holder and holder[index] != source.position:
            if source.path or source.kind != "input" or any(
                    s.path for s in bound.sources if s.position == holder[index]):
                raise NotImplementedError(
                    f"Kernel {kernel.name} is given one Ref in two places, one of them "
                    f"inside a tuple or a TensorDescriptor (parameters "
                    f"{jit_fn.arg_names[holder[index]]!r} and "
                    f"{jit_fn.arg_names[source.position]!r}); jaxlib's call hands each pointer "
                    f"its own buffer, and only a Ref given to whole parameters twice can share "
                    f"one. Pass the Ref once, or outside tuples and descriptors.")
            owner[source.position] = holder[index]
            continue
        holder.setdefault(index, source.position)
        first.setdefault(source.position, index)
    ordered = sorted(first, key=first.get)
    if ordered == list(first) and not owner:
        return launch
    names = list(jit_fn.arg_names)
    order = ordered + [i for i in range(len(names)) if i not in first and i not in owner]
    body = f"    {_CALLEE}({', '.join([names[owner.get(u, u)] for u in range(len(names))])})\n"
    trampoline = _trampoline(kernel, [names[i] for i in order], {}, body, record)
    # `bound` with the parameter at `order[t]` moved to `t`; those not in `order` (pointers
    # sharing another's buffer) dropped.
    at = {u: t for t, u in enumerate(order)}

    def moved(items: Any) -> Any:
        return {(at[k[0]], *k[1:]) if isinstance(k, tuple) else at[k]: v for k, v in items
                if (k[0] if isinstance(k, tuple) else k) in at}

    sources = sorted((dataclasses.replace(s, position=at[s.position]) for s in bound.sources
                      if s.position in at),
                     key=lambda s: s.position)  # stable: a tuple's leaves keep their order
    return _values.replaced(launch, jit_fn=trampoline, bound=_layout.BoundKernel(
        signature={names[u]: bound.signature[names[u]] for u in order},
        constexprs=moved(bound.constexprs.items()),
        attrs=moved(bound.attrs.items()),
        sources=tuple(sources),
        specializations=tuple(moved(bound.specializations).items()),
        zero_d_pointers=bound.zero_d_pointers))


def for_xla(kernel: Unwrapped, launch: Launch, in_avals: tuple, out_avals: tuple,
            triton_backend: Any, record: dict | None = None) -> tuple[Launch, tuple[int, ...]]:
    """`launch` as XLA's call launches it: one pointer per operand, per runtime scalar (a 0-d
    operand after the call's own), per result, and no other runtime parameter (no tuple, no
    descriptor: checked); and per runtime scalar, the factor the trampoline multiplies it back
    by (else 1)."""
    jit_fn, bound = kernel.jit_fn, launch.bound
    names = list(jit_fn.arg_names)
    scalars = [s for s in bound.sources if s.kind == "scalar"]
    # The buffers: the operands, a 0-d operand per runtime scalar (inputs to XLA), the results.
    n_in, n_before = len(in_avals), len(in_avals) + len(scalars)
    n_buffers = n_before + len(out_avals)
    owners: dict[int, list[int]] = {}
    for source in bound.sources:
        if source.kind == "input":
            owners.setdefault(source.index, []).append(source.position)
        elif source.kind == "output":
            owners.setdefault(n_before + source.index, []).append(source.position)
    for k, source in enumerate(scalars):
        owners[n_in + k] = [source.position]
    if not scalars and len(owners) == n_buffers and [s.position for s in bound.sources] == [
            positions[0] for _, positions in sorted(owners.items()) if len(positions) == 1]:
        return launch, ()  # already one pointer per buffer, in order
    avals = [*in_avals, *[None] * len(scalars), *out_avals]
    params, signature, attrs, specializations, sources, scales = [], {}, {}, [], [], []
    argument = {u: names[u] for u in range(len(names))}
    lines = []
    specs = dict(bound.specializations)
    for b in range(n_buffers):
        positions = owners.get(b, [])
        name = names[positions[0]] if len(positions) == 1 else f"{_PREFIX}buffer{b}"
        t = len(params)
        params.append(name)
        sources.append(("output", t, b - n_before) if b >= n_before else ("input", t, b))
        if n_in <= b < n_before:
            scalar = scalars[b - n_in].scalar
            signature[name] = _SCALAR_POINTERS.get(scalar.triton_type, "*" + scalar.triton_type)
            value = f"{_PREFIX}value{b - n_in}"
            specialised = "D" in specs.get(positions[0], "")
            scales.append(scale(scalar.value) if specialised else 1)
            product = f" * {scales[-1]}" if scales[-1] > 1 else ""
            lines.append(f"    {value} = tl.load({name}){product}\n")
            argument[positions[0]] = value
            continue
        aligned = bool(positions) and "D" in specs.get(positions[0], "")
        signature[name] = (bound.signature[names[positions[0]]] if positions
                           else _spec.pointer_type(avals[b].dtype, what=f"buffer {b}"))
        specializations.append((t, "D" if aligned else ""))
        if aligned and (parsed := triton_backend.parse_attr("D")):
            attrs[(t,)] = parsed
        for u in positions:
            argument[u] = name
    constexprs = {}
    for u, name in enumerate(names):
        if bound.signature[name] == "constexpr":
            constexprs[(len(params),)] = bound.constexprs[(u,)]
            params.append(name)
            signature[name] = "constexpr"
    body = "".join(lines) + f"    {_CALLEE}({', '.join([argument[u] for u in range(len(names))])})\n"
    trampoline = _trampoline(kernel, params, {n for n in params if signature[n] == "constexpr"},
                             body, record)
    routed = _layout.BoundKernel.of_buffers(
        sources, signature=signature, constexprs=constexprs, attrs=attrs,
        specializations=tuple(specializations), zero_d_pointers=bound.zero_d_pointers)
    return _values.replaced(launch, jit_fn=trampoline, bound=routed), tuple(scales)


def scale(value: int) -> int:
    """The largest power of two that divides `value`, up to `LARGEST_SCALE` (0: by every)."""
    return min(value & -value, LARGEST_SCALE) if value else LARGEST_SCALE


def is_trampoline(jit_fn: JITFunction) -> bool:
    """Whether `jit_fn` is a trampoline made here (its errors are its kernel's)."""
    return getattr(getattr(jit_fn, "fn", None), "__module__", None) == __name__


def _trampoline(kernel: Unwrapped, params: list[str], constexprs: set[str], body: str,
                record: dict | None) -> Any:
    """The trampoline with `params` and `body`, kept by its source in the kernel's record and
    decorated as the kernel is. The source holds only identifiers (ours, or `arg_names`, which
    `inspect.signature` took): the kernel's symbol becomes its name after `exec`, never code."""
    jit_fn, symbol = kernel.jit_fn, kernel.symbol
    for param in params:
        if param.startswith(_PREFIX) and param in jit_fn.arg_names:
            raise NotImplementedError(
                f"Kernel {kernel.name} has a parameter named {param!r}; names starting with "
                f"{_PREFIX!r} are reserved for the code jax_triton_rocm generates. Rename it.")
    signature = ", ".join([f"{p}: tl.constexpr" if p in constexprs else p for p in params])
    # The symbol as a docstring (a literal, so inert): Triton keys its cache on the source, and
    # trampolines of two kernels of one source keep their own symbols.
    source = f"def {_TRAMPOLINE}({signature}):\n    {symbol!r}\n{body}"
    record = _state.KERNEL_RECORDS.record(jit_fn) if record is None else record
    if (trampoline := record.get(("trampoline", source))) is not None:
        return trampoline
    import triton
    import triton.language as tl

    # The same name in every process: it is in the IR's locations, so in the binary.
    filename = f"<jax_triton_rocm trampoline {hashlib.sha256(source.encode()).hexdigest()[:16]}>"
    # Triton reads a kernel's source with `inspect.getsource`, which reads `linecache`; an entry
    # with no modification time is never evicted.
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    scope = {"tl": tl, _CALLEE: jit_fn}
    exec(compile(source, filename, "exec"), scope)  # noqa: S102  (identifiers only)
    function = scope[_TRAMPOLINE]
    # Triton names the binary's symbol from these when it decorates the function.
    function.__name__ = function.__qualname__ = symbol
    function.__module__ = __name__
    jit = triton.jit
    if jit_fn.is_gluon():
        from triton.experimental.gluon import jit
    trampoline = jit(function)
    # Triton (3.9) registers each @jit function by module and name; the entry would keep a
    # trampoline, and through it the kernel, alive after `clear_caches()`.
    registry = getattr(triton.runtime.jit, "_triton_jit_function_registry", {})
    for registered in [k for k, v in registry.items() if v is trampoline]:
        del registry[registered]
    record["trampoline", source] = trampoline
    return trampoline
