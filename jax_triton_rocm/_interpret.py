"""The CPU lowering of `triton_kernel_p`: the kernel runs in Triton's interpreter, on the host.

Data flow: the call's static parameters -> the first launch configuration (`_configs`) -> an
`InterpretedCall` (kernel, grid, arguments by kind) -> a `jax.pure_callback` emitted in the module
-> at run time, `run_on_host` hands NumPy buffers to Triton's interpreter and returns the outputs.

Triton's interpreter (`triton.runtime.interpreter`) is meant for kernels defined under
`TRITON_INTERPRET=1` and for torch tensors. Here the kernel is an ordinary `@triton.jit` function
and the buffers are NumPy arrays:
- `HostTensor` gives a NumPy buffer just the part of torch's tensor interface the interpreter's
  `GridExecutor` reads (`data_ptr`, `untyped_storage`, `dtype`, ...); the buffer is already on the
  host, so the interpreter's copies to and from "the device" are no-ops.
- Calls from the kernel to other `@triton.jit` functions are routed to interpreted twins of them
  while the kernel runs, and two interpreter faults are mended for the run
  (`_interpreter_adapted`).

The interpreter patches `triton.language` process-wide while a kernel runs and keeps the program
id in one global builder, so runs are serialised by `_INTERPRETER_LOCK` (XLA may call the
callbacks of several CPU devices at once). A Triton compile in another thread during a run would
see the patched language; Triton's own interpreter has the same restriction.

What runs where the GPU would differ:
- An autotuned kernel runs its first configuration (after `early_config_prune`); heuristics run as
  on the GPU. No timing happens on the host.
- Every output starts zeroed (on the GPU only `zeroed_outputs` are); an aliased output starts as
  its input (zeroed when listed in `zeroed_outputs`, as on the GPU).
- Gluon kernels cannot run: the interpreter runs only `@triton.jit` kernels.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np

import jax
from jax.interpreters import mlir

from jax_triton_rocm import _configs, _kernel, _types
from jax_triton_rocm._configs import normalize_grid

_INTERPRETER_LOCK = threading.Lock()


class HostTensor:
    """A NumPy buffer seen through the part of torch's tensor interface Triton's interpreter uses.

    The interpreter reads `data_ptr()` and `dtype` (a Triton dtype here, which Triton's argument
    typing accepts as torch's), and copies each argument's storage to the host and back
    (`untyped_storage`, `cpu`, `new_empty`, `set_`, `copy_`). The buffer is on the host already,
    so every copy is the buffer itself and the kernel writes it in place.
    """

    def __init__(self, array: np.ndarray, dtype: Any) -> None:
        if not array.flags.c_contiguous or not array.flags.writeable:
            raise ValueError("HostTensor needs a writable, C-contiguous NumPy array.")
        self.array = array
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def untyped_storage(self) -> HostTensor:
        return self

    def cpu(self) -> HostTensor:
        return self

    def new_empty(self, *size: Any, device: Any = None) -> HostTensor:
        del size, device
        return self

    def set_(self, storage: Any, offset: int, size: Any, stride: Any) -> HostTensor:
        del storage, offset, size, stride
        return self

    def storage_offset(self) -> int:
        return 0

    def size(self) -> tuple[int, ...]:
        return self.array.shape

    def stride(self) -> tuple[int, ...]:
        return tuple(s // self.array.itemsize for s in self.array.strides)

    def copy_(self, other: Any) -> HostTensor:
        if other is not self:
            raise AssertionError("a HostTensor is its own host copy")
        return self


@dataclasses.dataclass(frozen=True)
class InterpretedCall:
    """One `triton_kernel_p` equation, resolved for the interpreter at lowering time.

    Attributes:
      name: the kernel's name as errors show it.
      jit_fn: the @triton.jit function.
      grid: three program counts.
      positional: ("array", operand index) or ("scalar", value), one per positional argument;
        or one entry per parameter: ("input", operand index), ("output", output index) or
        ("keyword", None)
        (`_kernel.lay_out_arguments` describes both layouts).
      constexprs: values by parameter name (the call's, the first config's, the heuristics').
      annotated_constexprs: parameter names annotated `tl.constexpr` (the interpreter passes
        these as plain values; other parameters given by keyword are passed as `tl.constexpr`,
        as the compiler treats them).
      out_avals: the outputs' shapes and dtypes.
      aliases: (input index, output index) pairs that share a buffer.
      zeroed: output indices the GPU zeroes before the launch.
    """

    name: str
    jit_fn: Any
    grid: tuple[int, int, int]
    positional: tuple[tuple[str, Any], ...]
    constexprs: tuple[tuple[str, Any], ...]
    annotated_constexprs: frozenset[str]
    out_avals: tuple[Any, ...]
    aliases: tuple[tuple[int, int], ...]
    zeroed: frozenset[int]


def _triton_dtype(dtype: Any, what: str) -> Any:
    import triton.language as tl

    return tl.str_to_ty(_types.pointer_type(dtype, what=what)[1:], None)


def check_interpretable(jit_fn: Any, name: str) -> None:
    """Raises NotImplementedError, naming the kernel and why, if the interpreter cannot run it."""
    if jit_fn.is_gluon():
        raise NotImplementedError(
            f"Kernel {name} is a Gluon kernel, and this computation is lowered for the CPU, where "
            f"kernels run in Triton's interpreter, which runs only @triton.jit kernels. Run it on a "
            f"GPU (platforms 'cuda', 'rocm'), or write a @triton.jit version for the CPU.")


def resolve(ctx_avals_in: tuple, params: dict[str, Any]) -> InterpretedCall:
    """The interpreted call of one equation: its first launch configuration, grid and arguments."""
    unwrapped = _kernel.unwrap(params["kernel"])
    jit_fn = unwrapped.jit_fn
    name = params["name"] or _kernel.kernel_name(jit_fn)
    check_interpretable(jit_fn, name)
    configs = _configs.resolve(
        unwrapped,
        metaparams=dict(params["metaparams"]),
        options=dict(params["options"]),
        num_warps=params["num_warps"],
        num_stages=params["num_stages"],
        num_ctas=params["num_ctas"],
        positional=params["positional"],
        in_avals=tuple(ctx_avals_in),
        out_avals=tuple(params["out_shapes"]),
    )
    config = configs[0]
    grid_spec = params["grid"]
    grid = normalize_grid(grid_spec(config.meta) if callable(grid_spec) else grid_spec,
                          what="grid(meta)" if callable(grid_spec) else "grid")
    zeroed = params["zeroed_outputs"]
    if callable(zeroed):
        zeroed = tuple(zeroed(config.meta))
    annotated = frozenset(p.name for p in jit_fn.params if p.is_constexpr)
    for i, aval in enumerate(ctx_avals_in):
        _triton_dtype(aval.dtype, f"argument array {i}")
    return InterpretedCall(
        name=name,
        jit_fn=jit_fn,
        grid=grid,
        positional=tuple(params["positional"]),
        constexprs=tuple(sorted(config.constexprs.items())),
        annotated_constexprs=annotated,
        out_avals=tuple(jax.ShapeDtypeStruct(s.shape, s.dtype) for s in params["out_shapes"]),
        aliases=tuple(params["input_output_aliases"]),
        zeroed=frozenset(zeroed),
    )


# By id: hashing a JITFunction parses its source, which fails while the language is patched.
# The function is kept beside its twin, so its id cannot be reused.
_interpreted_twins: dict[int, tuple[Any, Any]] = {}


def _interpreted(jit_fn: Any) -> Any:
    """Triton's `InterpretedFunction` for `jit_fn`, made once per function."""
    entry = _interpreted_twins.get(id(jit_fn))
    if entry is None:
        from triton.runtime.interpreter import InterpretedFunction

        entry = _interpreted_twins[id(jit_fn)] = (jit_fn, InterpretedFunction(jit_fn.fn))
    return entry[1]


def _index_of_one_element(tensor: Any) -> int:
    return int(tensor.handle.data.item())


def _bf16_as_fp32(handle: Any) -> Any:
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    if handle.dtype != tl.bfloat16:
        return handle
    return TensorHandle((handle.data.astype(np.uint32) << 16).view(np.float32), tl.float32)


@contextlib.contextmanager
def _interpreter_adapted() -> Iterator[None]:
    """While in force, Triton's interpreter runs an ordinary @triton.jit kernel correctly.

    - A call from the kernel to another @triton.jit function runs that function's interpreted
      twin (outside `TRITON_INTERPRET=1` it is a `JITFunction`, which refuses to be called), and
      leaves the language as it found it.
    - A scalar tensor converts to an int (`range(0, n)` with a runtime `n`): the interpreter keeps
      scalars as 1-element arrays and calls `int()` on them, which NumPy >= 2.5 refuses.
    - `tl.dot` of bfloat16 operands multiplies values, not the raw bits the interpreter stores
      bfloat16 in.
    Everything is put back on exit.
    """
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    patch_tensor = interpreter._patch_lang_tensor
    create_dot = interpreter.InterpreterBuilder.create_dot

    def call_interpreted(self, *args, **kwargs):
        # As InterpretedFunction.__call__, but the language patched for the callee's module is
        # put back after the call: that method leaves it patched, which breaks later compiles.
        twin = _interpreted(self)
        scope = interpreter._patch_lang(twin.fn)
        try:
            return twin.rewrite()(*args, **kwargs)
        finally:
            scope.restore()

    def patch_tensor_with_index(tensor, scope):
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", _index_of_one_element)

    def dot_of_values(self, a, b, *rest, **kwargs):
        return create_dot(self, _bf16_as_fp32(a), _bf16_as_fp32(b), *rest, **kwargs)

    saved = [(JITFunction, "__call__", JITFunction.__call__),
             (interpreter, "_patch_lang_tensor", patch_tensor),
             (interpreter.InterpreterBuilder, "create_dot", create_dot)]
    JITFunction.__call__ = call_interpreted
    interpreter._patch_lang_tensor = patch_tensor_with_index
    interpreter.InterpreterBuilder.create_dot = dot_of_values
    try:
        yield
    finally:
        for owner, name, value in saved:
            setattr(owner, name, value)


def _typed_scalar(value: Any, what: str) -> Any:
    """A scalar argument as a Triton tensor of the type the GPU launch gives it."""
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    typed = _types.scalar(value, what=what)
    triton_type = tl.str_to_ty(typed.triton_type, None)
    numpy_type = {"u1": np.bool_, "i32": np.int32, "u32": np.uint32, "i64": np.int64,
                  "u64": np.uint64, "fp32": np.float32, "fp64": np.float64}[typed.triton_type]
    return tl.tensor(TensorHandle(np.array([typed.value], dtype=numpy_type), triton_type),
                     triton_type)


def run_on_host(call: InterpretedCall, *inputs: np.ndarray) -> tuple[np.ndarray, ...]:
    """Runs `call` in Triton's interpreter on host buffers; returns the outputs.

    Inputs are copied first: the kernel writes through raw addresses, and the arrays JAX hands
    a callback may be its own, read-only buffers.

    Raises:
      RuntimeError: the interpreter failed; the message names the kernel and the interpreter's
        error, which is chained.
    """
    buffers = [np.array(x, copy=True, order="C") for x in inputs]
    alias_of = {o: i for i, o in call.aliases}
    outs = []
    for o, aval in enumerate(call.out_avals):
        if o in alias_of:
            out = buffers[alias_of[o]]
            if o in call.zeroed:
                out[...] = 0
        else:
            out = np.zeros(aval.shape, aval.dtype)
        outs.append(out)
    import triton.language as tl

    constexprs = {name: value if name in call.annotated_constexprs else tl.constexpr(value)
                  for name, value in call.constexprs}
    params = call.jit_fn.params
    args: list[Any] = []
    for i, (kind, value) in enumerate(call.positional):
        if kind in ("array", "input"):
            array = buffers[value]
            args.append(HostTensor(array, _triton_dtype(array.dtype, f"argument {i}")))
        elif kind == "output":
            args.append(HostTensor(outs[value], _triton_dtype(outs[value].dtype,
                                                              f"output {value}")))
        elif kind == "keyword":
            # Passed in its place: the parameters after it are passed by position too.
            name = params[i].name
            args.append(constexprs.pop(name) if name in constexprs else params[i].default)
        elif value is None:
            args.append(None)
        else:
            args.append(_typed_scalar(value, f"argument {i}"))
    if not _kernel.places_outputs(call.positional):
        args += [HostTensor(out, _triton_dtype(out.dtype, f"output {o}")) for o, out in
                 enumerate(outs)]
    try:
        with _INTERPRETER_LOCK, _interpreter_adapted():
            _interpreted(call.jit_fn)[call.grid](*args, **constexprs)
    except Exception as err:
        raise RuntimeError(
            f"Triton's interpreter could not run kernel {call.name} (grid {call.grid}) on the "
            f"CPU: {type(err).__name__}: {err}. Run it on a GPU if it uses a feature the "
            f"interpreter lacks.") from err
    return tuple(outs)


def lower(ctx: Any, *operands: Any, **params: Any):
    """The MLIR lowering rule of `triton_kernel_p` for platform `cpu`: a host callback."""
    call = resolve(tuple(ctx.avals_in), params)

    def host_call(*arrays):
        return jax.pure_callback(lambda *xs: run_on_host(call, *xs), list(call.out_avals),
                                 *arrays)

    return mlir.lower_fun(host_call, multiple_results=True)(ctx, *operands)
