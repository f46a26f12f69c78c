"""Arguments of the wrong kind for a kernel's parameters: the parameter a call most likely forgot
(`forgotten`), and a scalar on a parameter the kernel dereferences, or a pointer on one it counts
with (`check`), refused at lowering with both named, on every route: `_plan.launches` checks
each call's first launch, so the CPU interpreter's calls are refused when lowered, not when run.

Triton says only "invalid operands of type pointer<fp32> and int32" (at run time, in its
interpreter), where a positional port of a kernel whose outputs sit among its inputs has put an
int on an output's pointer and the output on the int. The parameters' roles are a guess
(`_roles`), so a suspect alone refuses nothing: Triton's front end (Python to Triton IR, no
backend pass, about as long as parsing the kernel) then builds the kernel as laid out, and only
if it fails is the call refused, naming each suspect, what it got and why the kernel wants the
other kind; the front end's error is chained. A wrong guess costs that one front-end run.
"""

from __future__ import annotations

import itertools
from typing import Any

from jax_triton_rocm.base import _state
from jax_triton_rocm.launch import _roles
from jax_triton_rocm.launch._types import aval_text

# Front-end type errors do not depend on the target; any installed backend's will do.
_PROBE_TARGETS = {"nvidia": ("cuda", 80, 32), "amd": ("hip", "gfx942", 64)}


def suspects(jit_fn: Any, bound: Any, in_avals: tuple, out_avals: tuple) -> list[str]:
    """Each top-level parameter that gets a scalar where the kernel dereferences it, or an array
    where it counts with it, as a sentence naming both."""
    found = _roles.roles(jit_fn)
    names = list(jit_fn.arg_names)
    wrong = []
    for source in bound.sources:
        name = names[source.position]
        role = found.of(name)
        if source.path or role is None:
            continue
        if source.kind == "scalar" and role == "pointer":
            wrong.append(f"parameter {name!r} gets the scalar {source.scalar.value!r} "
                         f"({source.scalar.triton_type}), but {found.shown(name)}")
        elif source.kind in ("input", "output") and role == "scalar":
            aval = (in_avals if source.kind == "input" else out_avals)[source.index]
            what = "operand" if source.kind == "input" else "output"
            wrong.append(f"parameter {name!r} gets {what} {source.index} ({aval_text(aval)}), "
                         f"a pointer, but {found.shown(name)}")
    if wrong and bound.zero_d_pointers:
        wrong.append(bound.zero_d_hint().rstrip("."))
    return wrong


def front_end_error(jit_fn: Any, bound: Any) -> Exception | None:
    """The `CompilationError` Triton's front end raises building `jit_fn` as `bound` lays it
    out, or None (it builds, or no backend is installed to build it with)."""
    from triton.backends import backends
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend
    from triton.compiler.errors import CompilationError
    from triton._C.libtriton import ir

    name = next((name for name in _PROBE_TARGETS if name in backends), None)
    if name is None:
        return None
    target = GPUTarget(*_PROBE_TARGETS[name])
    backend = make_backend(target)
    options = backend.parse_options({})
    source = ASTSource(jit_fn, bound.signature, constexprs=bound.constexprs, attrs=bound.attrs)
    with _state.triton_language_lock():  # the front end is not safe across threads
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        try:
            source.make_ir(target, options, backend.get_codegen_implementation(options),
                           backend.get_module_map(), context)
        except CompilationError as err:
            return err
    return None


def check(jit_fn: Any, bound: Any, in_avals: tuple, out_avals: tuple, kernel: str) -> None:
    """Raises TypeError where `bound` puts a scalar on a parameter the kernel dereferences or a
    pointer on one it counts with, and Triton's front end fails on it as laid out.

    The message names each such parameter, what it gets and why the kernel wants the other
    kind, and says how a call fills the parameters; the front end's error is its cause.
    """
    if jit_fn.is_gluon():
        return
    wrong = suspects(jit_fn, bound, in_avals, out_avals)
    if not wrong:
        return
    err = front_end_error(jit_fn, bound)
    if err is None:
        return
    raise TypeError(
        f"Kernel {kernel}: the call's arguments do not line up with its parameters: "
        f"{'; '.join(wrong)}. Triton's front end fails on the kernel as called (its error "
        f"follows). Give the kernel arrays where it takes pointers and scalars where it takes "
        f"values, in its parameter order: the positional arguments fill the parameters first, "
        f"the outputs fill the non-constexpr parameters left unfilled, in order, and a "
        f"parameter can be given by name (a keyword with out_type=, or operands={{...}}).") \
        from err


def forgotten(jit_fn: Any, given: list[str | None], slots: list[int]) -> str:
    """A sentence naming the parameter(s) a call most likely forgot, or "".

    Args:
      given: what fills the parameters, in order: "pointer" (an array, an output) or "scalar"
        per value, None where either could be meant.
      slots: the parameters those values fill, in order, more of them than values.

    Leaving out each choice of as many parameters as there are too many (one to three), the
    choices whose remaining parameters all get the kind of value their role asks fit. One
    fitting choice is named whole; for one missing parameter, two fitting choices are named as
    "one of"; otherwise the parameters every fitting choice leaves out, if any.
    """
    extra = len(slots) - len(given)
    if not 1 <= extra <= 3 or len(slots) > 24:
        return ""
    found = _roles.roles(jit_fn)
    wanted = [found.of(jit_fn.arg_names[i]) for i in slots]
    fitting = [set(left_out) for left_out in itertools.combinations(range(len(slots)), extra)
               if all(r is None or g is None or r == g for r, g in zip(
                   [role for j, role in enumerate(wanted) if j not in left_out], given))]
    common = set.intersection(*fitting) if fitting else set()
    if len(fitting) == 1:
        chosen = fitting[0]
        form = " Most likely missing: {}. Without {}, what the call gives lines up with the " \
               "other parameters (arrays and outputs on pointers, scalars on values)."
    elif extra == 1 and len(fitting) == 2:
        chosen = set.union(*fitting)
        form = " Most likely missing: one of {}; without either, what the call gives lines up " \
               "with the other parameters (arrays and outputs on pointers, scalars on values)."
    elif common:
        chosen = common
        form = " Missing, among others: {}, which every way of lining up what the call gives " \
               "(arrays and outputs on pointers, scalars on values) leaves without {}."
    else:
        return ""
    names = [jit_fn.arg_names[slots[j]] for j in sorted(chosen)]
    shown = [f"{name!r} ({found.shown(name)})" if found.of(name) else repr(name)
             for name in names]
    joined = " or ".join(shown) if len(fitting) == 2 and extra == 1 else " and ".join(shown)
    return form.format(joined, "it" if len(names) == 1 else "them")
