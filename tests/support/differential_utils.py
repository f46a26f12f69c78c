"""The differential check's logic: one call the package lowered, described as Triton's own
launcher takes it, launched again by a launcher on the call's inputs, and its outputs compared
bitwise with the package's (docs/testing.md, "Differential check against Triton's launcher").

`describe` reads the launches the package planned (`plan._plan.Launch`: constexprs, grid, warps,
outputs to zero, the arguments laid onto the kernel's parameters) into `LauncherLaunch`es: one
argument per kernel parameter in the kernel's order, so that outputs placed before inputs,
runtime scalars, constexprs, heuristics' values and an autotuner's configs reach the launcher as
Triton's users pass them. `compare` launches each candidate twice, on output buffers poisoned
with two different bytes (zeroed where the call zeroes them, its input's values where an output
is aliased): a byte holding each run's poison is one the kernel never writes, and is not
compared; a written byte that differs between the two runs makes the kernel nondeterministic.

The launcher is an object with `buffer(array)`, `launch(kernel, grid, arguments, options)` and
`host(buffer, like)`: `TorchLauncher` (Triton's launcher on PyTorch CUDA tensors; torch is
imported only when it is made), or a fake one in the CPU tests.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

POISONS = (0xFF, 0x00)  # two runs, two fills: a byte left at each is one the kernel never wrote
EQUAL, UNEQUAL, NONDETERMINISTIC = "equal", "unequal", "nondeterministic"
NOT_COMPARED, ERROR = "not compared", "error"


class NotComparable(Exception):
    """A call the launcher cannot be given as the package launched it; the message says why."""


@dataclasses.dataclass(frozen=True)
class LauncherLaunch:
    """One launch as Triton's launcher takes it: `kernel[grid](*arguments, **options)`.

    Attributes:
      grid: three program counts.
      arguments: one per kernel parameter, in order: ("input", operand index), ("output",
        output index), ("value", a Python value passed as is: a runtime scalar, None, a
        parameter annotated tl.constexpr), ("constexpr", value) (a parameter given by keyword,
        passed as `tl.constexpr(value)`), ("descriptor", (operand index, descriptor)) or
        ("tuple", (arguments...)).
      options: the compile options the package compiled with (`compile._compile.triton_options`).
      zeroed: the outputs zeroed before the launch.
      description: the autotune config's text ("" for a plain call).
    """

    grid: tuple[int, int, int]
    arguments: tuple
    options: dict
    zeroed: tuple[int, ...]
    description: str = ""

    def text(self, names: Sequence[str]) -> str:
        """The launch as a record shows it: config, grid, options, constexprs by name."""
        constexprs = ", ".join(f"{name}={value!r}" for name, (kind, value)
                               in zip(names, self.arguments) if kind == "constexpr"
                               or (kind == "value" and not isinstance(value, (int, float))))
        options = ", ".join(f"{k}={v}" for k, v in sorted(self.options.items()))
        config = f"config ({self.description}); " if self.description else ""
        return f"{config}grid {self.grid}; {options}; constexprs {constexprs or 'none'}"


@dataclasses.dataclass(frozen=True)
class CallDescription:
    """One lowered call, as the check compares it at each execution.

    Attributes:
      kernel: the @triton.jit (or @gluon.jit) function the user wrote.
      kernel_name, route, reason: what the package's route log says of the lowering.
      in_avals, out_avals: (shape, dtype) of the operands and outputs.
      aliases: (input index, output index) pairs sharing a buffer.
      launches: the candidates: one, or an autotuned call's configs (jaxlib picks one).
      not_compared: why the call cannot be compared, or None.
      graph: the kernel's code as it was lowered (`compile._compile.graph_key`: its sources,
        its callees' and the globals it reads); a test that rebinds a helper afterwards leaves
        calls Triton's launcher can no longer run as they ran.
    """

    kernel: Any
    kernel_name: str
    route: str
    reason: str
    in_avals: tuple
    out_avals: tuple
    aliases: tuple[tuple[int, int], ...]
    launches: tuple[LauncherLaunch, ...] = ()
    not_compared: str | None = None
    graph: Any = None


def launcher_type(value: Any) -> str:
    """The type Triton's launcher gives an unannotated Python scalar (`mangle_type`)."""
    if isinstance(value, bool):
        return "u1"
    if isinstance(value, float):
        return "fp32"
    if -(2**31) <= value < 2**31:
        return "i32"
    return "i64" if -(2**63) <= value < 2**63 else "u64"


def _argument(key: tuple[int, ...], param: Any, signature: Any, bound: Any, sources: dict,
              positional: tuple) -> tuple[str, Any]:
    if isinstance(signature, tuple):
        return "tuple", tuple(_argument(key + (j,), param, element, bound, sources, positional)
                              for j, element in enumerate(signature))
    if key in bound.constexprs:
        value = bound.constexprs[key]
        # A runtime scalar the layout made a constexpr (None, an int equal to 1) goes as the
        # value, which the launcher specialises the same way.
        runtime = len(key) > 1 or (key[0] < len(positional) and positional[key[0]][0] == "scalar")
        if value is None or param.is_constexpr or runtime:
            return "value", value
        return "constexpr", value
    source = sources[key]
    if source.kind == "scalar":
        typed = source.scalar
        given = typed.triton_type if typed.declared else launcher_type(typed.value)
        if given != typed.triton_type:
            raise NotComparable(
                f"parameter {param.name!r} is a runtime scalar the package passes as "
                f"{typed.triton_type} and Triton's launcher would pass as {given}")
        return "value", typed.value
    if source.kind == "descriptor":
        if getattr(source.descriptor, "layout", None) is not None:
            raise NotComparable(f"parameter {param.name!r} is a Gluon tensor descriptor")
        return "descriptor", (source.index, source.descriptor)
    return source.kind, source.index


def launcher_launch(jit_fn: Any, launch: Any, positional: tuple,
                    options: dict) -> LauncherLaunch:
    """`launch` (a `plan._plan.Launch` of `jit_fn`, laid out from `positional`, the spec's
    layout) as Triton's launcher takes it.

    Raises:
      NotComparable: a runtime scalar the launcher would type otherwise, a Gluon descriptor.
    """
    bound = launch.bound
    sources = {(source.position, *source.path): source for source in bound.sources}
    arguments = tuple(_argument((i,), param, bound.signature[param.name], bound, sources,
                                positional) for i, param in enumerate(jit_fn.params))
    return LauncherLaunch(tuple(launch.grid), arguments, dict(options), tuple(launch.zeroed),
                          launch.config.description)


def describe(jit_fn: Any, kernel_name: str, route: str, reason: str, spec: Any,
             in_avals: Sequence[Any], out_avals: Sequence[Any], launches: Sequence[Any],
             options_of: Any) -> CallDescription:
    """The call `spec`, lowered on `route` with `launches` (`plan._plan.Launch`es, the
    candidates), as the check compares it; `options_of(launch)` gives a launch's compile
    options. A call that cannot be compared says why (`not_compared`)."""
    from jax_triton_rocm.compile import _compile

    described = CallDescription(
        kernel=jit_fn, kernel_name=kernel_name, route=route, reason=reason,
        graph=_compile.graph_key(jit_fn),
        in_avals=tuple((tuple(a.shape), np.dtype(a.dtype)) for a in in_avals),
        out_avals=tuple((tuple(a.shape), np.dtype(a.dtype)) for a in out_avals),
        aliases=tuple(spec.input_output_aliases))
    if route == "xla" and len(launches) != 1:
        return dataclasses.replace(described, not_compared=f"XLA's call with {len(launches)} "
                                                          f"planned launches")
    try:
        converted = tuple(launcher_launch(jit_fn, launch, spec.positional, options_of(launch))
                          for launch in launches)
    except NotComparable as why:
        return dataclasses.replace(described, not_compared=str(why))
    return dataclasses.replace(described, launches=converted)


def _filled(shape: tuple, dtype: np.dtype, byte: int) -> np.ndarray:
    return np.full(int(np.prod(shape)) * dtype.itemsize, byte, np.uint8).view(dtype).reshape(
        shape)


def launched_outputs(call: CallDescription, launch: LauncherLaunch, inputs: Sequence[np.ndarray],
                     launcher: Any, poison: int) -> list[np.ndarray]:
    """Runs `launch` once through `launcher` on fresh buffers holding `inputs`' bytes, outputs
    filled with `poison` (zeroed ones with 0, aliased ones with their input); returns the
    outputs as host arrays."""
    ins = [launcher.buffer(np.ascontiguousarray(x)) for x in inputs]
    alias_of = {o: i for i, o in call.aliases}
    outs = []
    for o, (shape, dtype) in enumerate(call.out_avals):
        if o in alias_of:
            buffer = ins[alias_of[o]]
            if o in launch.zeroed:
                buffer = ins[alias_of[o]] = launcher.buffer(np.zeros(shape, dtype))
        else:
            fill = 0 if o in launch.zeroed else poison
            buffer = launcher.buffer(_filled(shape, dtype, fill))
        outs.append(buffer)

    def materialized(argument: tuple[str, Any]) -> Any:
        kind, value = argument
        if kind == "input":
            return ins[value]
        if kind == "output":
            return outs[value]
        if kind == "tuple":
            return tuple(materialized(element) for element in value)
        if kind == "constexpr":
            import triton.language as tl

            return tl.constexpr(value)
        if kind == "descriptor":
            return launcher.descriptor(ins[value[0]], value[1])
        return value

    arguments = [materialized(argument) for argument in launch.arguments]
    launcher.launch(call.kernel, launch.grid, arguments, launch.options)
    return [launcher.host(out, aval) for out, aval in zip(outs, call.out_avals)]


def difference(package: Sequence[np.ndarray], first: Sequence[np.ndarray],
               second: Sequence[np.ndarray], poisoned: Sequence[bool]) -> tuple[str, str]:
    """The verdict on the package's outputs against two launcher runs, and its detail:
    `poisoned[o]` says output o started from the poisons (its bytes left at both poisons are
    not written by the kernel, and not compared)."""
    differing = nondeterministic = written_total = 0
    where = []
    for o, (mine, a, b) in enumerate(zip(package, first, second)):
        mine, a, b = (np.ascontiguousarray(x).reshape(-1).view(np.uint8) for x in (mine, a, b))
        written = np.ones(a.shape, bool)
        if poisoned[o]:
            written = ~((a == POISONS[0]) & (b == POISONS[1]))
        written_total += int(written.sum())
        unstable = int((written & (a != b)).sum())
        nondeterministic += unstable
        wrong = int((written & (mine != a)).sum())
        if wrong:
            where.append(f"output {o}: {wrong} of {int(written.sum())} bytes")
        differing += wrong
    if nondeterministic:
        return NONDETERMINISTIC, (f"{nondeterministic} written bytes differ between two launches "
                                  f"by Triton's launcher")
    if differing:
        return UNEQUAL, "; ".join(where)
    return EQUAL, f"{written_total} bytes written"


def compare(call: CallDescription, inputs: Sequence[np.ndarray], outputs: Sequence[np.ndarray],
            launcher: Any) -> tuple[str, str, str]:
    """(verdict, detail, the launch compared) for one execution: the package's `outputs` for
    `inputs` against each candidate launch by `launcher`; equal where one candidate's are."""
    if call.not_compared is not None:
        return NOT_COMPARED, call.not_compared, ""
    from jax_triton_rocm.compile import _compile

    if call.graph is not None and _compile.graph_key(call.kernel) != call.graph:
        return NOT_COMPARED, ("the kernel's code changed after the call was lowered (a helper or "
                              "a global it reads was rebound in the test)"), ""
    names = list(call.kernel.arg_names)
    aliased = {o for _, o in call.aliases}
    verdicts = []
    for k, launch in enumerate(call.launches):
        runs = [launched_outputs(call, launch, inputs, launcher, poison) for poison in POISONS]
        poisoned = [o not in aliased and o not in launch.zeroed
                    for o in range(len(call.out_avals))]
        verdict, detail = difference(outputs, *runs, poisoned)
        which = f" (config {k + 1} of {len(call.launches)})" if len(call.launches) > 1 else ""
        if verdict == EQUAL:
            return EQUAL, detail + which, launch.text(names)
        verdicts.append((verdict, detail + which, launch.text(names)))
    nondeterministic = [v for v in verdicts if v[0] == NONDETERMINISTIC]
    return (nondeterministic or verdicts)[0]


_TORCH_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                 "float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2",
                 "float8_e4m3fnuz", "float8_e5m2fnuz")


class TorchLauncher:
    """Triton's own launcher on PyTorch CUDA (or ROCm) tensors, as Triton's users launch.

    Raises (when made):
      RuntimeError: PyTorch is not installed or sees no GPU.
    """

    def __init__(self) -> None:
        try:
            import torch
        except ImportError as err:
            raise RuntimeError("PyTorch is not installed") from err
        if not torch.cuda.is_available():
            raise RuntimeError(f"PyTorch {torch.__version__} sees no GPU")
        self.torch = torch
        import triton

        if hasattr(triton, "set_allocator"):  # global scratch, as Triton's users give it
            triton.set_allocator(lambda size, alignment, stream: torch.empty(
                size, dtype=torch.int8, device="cuda"))

    def buffer(self, array: np.ndarray) -> Any:
        name = array.dtype.name
        if name not in _TORCH_DTYPES:
            raise NotComparable(f"dtype {name} has no PyTorch tensor type")
        raw = self.torch.from_numpy(np.ascontiguousarray(array).reshape(-1).view(np.uint8).copy())
        return raw.to("cuda").view(getattr(self.torch, name)).reshape(array.shape)

    def descriptor(self, base: Any, descriptor: Any) -> Any:
        from triton.tools.tensor_descriptor import TensorDescriptor

        extra = {"padding": descriptor.padding} if descriptor.padding != "zero" else {}
        if getattr(descriptor, "round_f32_to_tf32", False):
            import dataclasses as dc

            fields = {f.name for f in dc.fields(TensorDescriptor)} if dc.is_dataclass(
                TensorDescriptor) else set()
            if "round_f32_to_tf32" not in fields:
                import triton

                raise NotComparable(f"Triton {triton.__version__}'s TensorDescriptor cannot "
                                    f"round float32 to TF32")
            extra["round_f32_to_tf32"] = True
        return TensorDescriptor(base, list(descriptor.shape), list(descriptor.strides),
                                list(descriptor.block_shape), **extra)

    def launch(self, kernel: Any, grid: tuple, arguments: list, options: dict) -> None:
        kernel[grid](*arguments, **options)
        self.torch.cuda.synchronize()

    def host(self, buffer: Any, aval: tuple) -> np.ndarray:
        shape, dtype = aval
        raw = buffer.contiguous().reshape(-1).view(self.torch.uint8).cpu().numpy()
        return raw.view(dtype).reshape(shape)

    def release(self) -> None:
        self.torch.cuda.empty_cache()
