"""Triton's interpreter run on NumPy buffers, for an ordinary `@triton.jit` kernel: `HostTensor`
gives a NumPy buffer the part of torch's tensor interface the interpreter reads (it is meant for
torch tensors), and `interpreter_adapted` adapts the interpreter for the length of a run. Callers
hold `_state.triton_language_lock()` around a run (`_interpret.run_on_host`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import sys
import types
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from jax_triton_rocm.base import _state
from jax_triton_rocm.routes.cpu import _interpret_floats
from jax_triton_rocm.spec import _spec

if TYPE_CHECKING:
    from triton.runtime.jit import JITFunction


class HostTensor:
    """A NumPy buffer seen through the part of torch's tensor interface Triton's interpreter uses:
    `data_ptr()`, `dtype` (a Triton dtype here, which Triton's argument typing accepts as torch's)
    and the copies of each argument's storage to the host and back (`untyped_storage`, `cpu`,
    `new_empty`, `set_`, `copy_`), each the buffer itself, which the kernel writes in place."""

    def __init__(self, array: np.ndarray, dtype: Any) -> None:
        if not array.flags.c_contiguous or not array.flags.writeable:
            raise ValueError("HostTensor needs a writable, C-contiguous NumPy array.")
        self.array = array
        self.dtype = dtype

    def data_ptr(self) -> int:
        return self.array.ctypes.data

    def _itself(self, *args: Any, **kwargs: Any) -> HostTensor:
        return self

    untyped_storage = cpu = new_empty = set_ = _itself

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


def interpreted(jit_fn: JITFunction) -> Any:
    """Triton's `InterpretedFunction` for `jit_fn`, made once per function and kept in its
    record (`_state.KERNEL_RECORDS`), on the function: hashing a JITFunction parses its source,
    which fails while the language is patched."""
    from triton.runtime.interpreter import InterpretedFunction

    return _state.KERNEL_RECORDS.derived(
        jit_fn, "interpreted", lambda: InterpretedFunction(_named_as_defined(jit_fn.fn)))


def _named_as_defined(fn: Any) -> Any:
    """`fn`, or where its `__name__` is not the name its `def` gives it (a generated kernel's
    `pkg.add`, or a trampoline's), a copy of it under that name: Triton's interpreter runs the
    source it reads and takes the result by `__name__` (a KeyError otherwise)."""
    defined = fn.__code__.co_name
    if fn.__name__ == defined:
        return fn
    copy = types.FunctionType(fn.__code__, fn.__globals__, defined, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__, copy.__annotations__ = fn.__kwdefaults__, fn.__annotations__
    copy.__qualname__, copy.__module__ = fn.__qualname__, fn.__module__
    copy.__dict__.update(fn.__dict__)
    return copy


def _forget_rewritten_functions() -> None:
    """Empties the interpreter's own cache of rewritten kernel functions (one per function it
    ever ran, kept by the class for the life of the process), so that `clear_caches()` lets the
    kernels go; a later run rewrites its function again."""
    interpreter = sys.modules.get("triton.runtime.interpreter")
    rewritten = getattr(getattr(interpreter, "InterpretedFunction", None), "rewritten_fn", None)
    if isinstance(rewritten, dict):
        rewritten.clear()


_state.on_clear(_forget_rewritten_functions)


@contextlib.contextmanager
def interpreter_adapted(debug: bool = False) -> Iterator[None]:
    """While in force, Triton's interpreter runs an ordinary @triton.jit kernel as the GPU would:
    with `tl.device_assert` checked where `debug` (the interpreter's own options leave it off),
    calls to other @triton.jit functions run (outside `TRITON_INTERPRET=1` each is a
    `JITFunction`, which refuses to be called), bfloat16 and fp8 computed on as values
    (`_interpret_floats`), and two faults mended, below. Everything is put back on exit.
    """
    import triton.language as tl
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    patch_tensor = interpreter._patch_lang_tensor

    def call_interpreted(self, *args, **kwargs):
        # As InterpretedFunction.__call__, but the language patched for the callee's module is
        # put back after the call: that method leaves it patched, which breaks later compiles.
        twin = interpreted(self)
        scope = interpreter._patch_lang(twin.fn)
        try:
            return twin.rewrite()(*args, **kwargs)
        finally:
            scope.restore()

    def patch_tensor_with_index(tensor, scope):
        # `range(0, n)` with a runtime `n`: the interpreter keeps scalars as 1-element arrays
        # and calls `int()` on them, which NumPy >= 2.5 refuses.
        patch_tensor(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.item()))

    def deferring(original, reflected):
        # `alpha * x` with a constexpr `alpha` (a parameter given by keyword) gives a tensor, as
        # in a compiled kernel: Triton 3.9's constexpr wraps it in a constexpr, which the
        # interpreter cannot store.
        def operator(self, other):
            if isinstance(other, tl.tensor):
                return getattr(other, reflected)(self.value)
            return original(self, other)
        return operator

    builder = interpreter.interpreter_builder
    replacements = {(JITFunction, "__call__"): call_interpreted,
                    (interpreter, "_patch_lang_tensor"): patch_tensor_with_index,
                    (builder, "options"): dataclasses.replace(builder.options, debug=debug),
                    **{(tl.constexpr, name): deferring(getattr(tl.constexpr, name), reflected)
                       for name, reflected in _REFLECTED.items()
                       if hasattr(tl.constexpr, name) and hasattr(tl.tensor, reflected)},
                    **_interpret_floats.replacements()}
    saved = {(owner, name): getattr(owner, name) for owner, name in replacements}
    for (owner, name), value in replacements.items():
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name), value in saved.items():
            setattr(owner, name, value)


# `constexpr OP tensor` is computed as `tensor ROP constexpr.value`.
_REFLECTED = {**{f"__{op}__": f"__r{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv",
                                                       "mod", "and", "or", "xor", "lshift",
                                                       "rshift")},
              "__lt__": "__gt__", "__le__": "__ge__", "__gt__": "__lt__", "__ge__": "__le__"}


def host_constexpr(value: Any) -> Any:
    """A constexpr value as the interpreter can call it: a Triton builtin (`tl.exp`, with
    `__triton_builtin__`), also inside a tuple, called with the interpreter's semantics. The
    interpreter patches the builtins of `triton.language` only where the kernel names them; one
    given as a constexpr is the unpatched builtin, which refuses a call without `_semantic`."""
    if isinstance(value, tuple):
        return tuple(host_constexpr(element) for element in value)
    if not getattr(value, "__triton_builtin__", False):
        return value
    from triton.runtime.interpreter import interpreter_semantic

    return functools.partial(value, _semantic=interpreter_semantic)


def typed_scalar(value: Any, what: str) -> Any:
    """A scalar argument (a value, or a `_spec.Scalar` typed already) as a Triton tensor of
    the type the GPU launch gives it."""
    import triton.language as tl
    from triton.runtime import interpreter

    typed = value if isinstance(value, _spec.Scalar) else _spec.scalar(value, what=what)
    triton_type = tl.str_to_ty(typed.triton_type, None)
    data = np.array([typed.value], dtype=interpreter._get_np_dtype(triton_type))
    return tl.tensor(interpreter.TensorHandle(data, triton_type), triton_type)


def host_descriptor(array: np.ndarray, descriptor: Any) -> Any:
    """Triton's `TensorDescriptor` over `array`, as the interpreter takes one; `descriptor` is
    the call's (`spec._tensordesc.TensorDescriptor`, its checks already passed: Triton's own
    constructor reads torch's dtype attributes, which a `HostTensor` lacks)."""
    import triton.language as tl
    from triton.tools.tensor_descriptor import TensorDescriptor

    element = tl.str_to_ty(_spec.pointer_type(array.dtype, what="base")[1:], None)

    class TorchLikeDtype(type(element)):
        """The element type, with the torch attribute the interpreter's descriptor reads."""

        is_floating_point = element.is_floating()

    names = [field.name for field in dataclasses.fields(TensorDescriptor)]
    if descriptor.round_f32_to_tf32 and "round_f32_to_tf32" not in names:
        import triton

        raise NotImplementedError(
            f"TensorDescriptor(round_f32_to_tf32=True) on the CPU needs a Triton whose "
            f"interpreter rounds to TF32 (3.9 does; this one is {triton.__version__}). Run it on "
            f"a GPU, or round the base yourself (jax.lax.reduce_precision(x, 8, 10)).")
    host = object.__new__(TensorDescriptor)
    for name in names:  # the interpreter's descriptor holds lists
        value = getattr(descriptor, name)
        setattr(host, name, list(value) if isinstance(value, tuple) else value)
    host.base = HostTensor(array, TorchLikeDtype(element.name))
    return host
