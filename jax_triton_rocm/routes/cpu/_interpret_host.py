"""Triton's interpreter run on NumPy buffers (`HostTensor`), adapted for a run by
`interpreter_adapted` (bfloat16 and fp8 computed on as values, loop variables as tensors);
callers hold `_state.LOCKS.triton_language`. Imported by the CPU lowering, which needs Triton.
docs/design.md, "Triton's interpreter on the CPU".
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import types
from collections.abc import Callable, Iterator
from typing import Any

import ml_dtypes
import numpy as np
import triton
import triton.language as tl
from triton._C.libtriton import interpreter as host
from triton._C.libtriton import ir
from triton.runtime import interpreter
from triton.runtime.jit import JITFunction
from triton.tools.tensor_descriptor import TensorDescriptor

from jax_triton_rocm.base import _state
from jax_triton_rocm.kernel import _spec


class Fp8ArithmeticError(NotImplementedError):
    """fp8 arithmetic, which Triton compiles for no GPU; args: the operation, the Triton type."""


_FORMATS = {triton_type: np.dtype(getattr(ml_dtypes, name))
            for triton_type, name in {**_spec.FP8_DTYPES, "bf16": "bfloat16"}.items()}
_BITS = {triton_type: np.dtype(f"uint{dtype.itemsize * 8}")  # what the interpreter keeps
         for triton_type, dtype in _FORMATS.items()}


def bits_format(dtype: Any) -> str | None:
    """The Triton type of `dtype` ("bf16", "fp8e4nv", ...) if the interpreter keeps it as bits."""
    name = getattr(getattr(dtype, "scalar", dtype), "name", None)
    return name if name in _FORMATS else None


def _handle_format(handle: Any) -> str | None:
    """`bits_format` of a `TensorHandle` whose data are bits (a comparison's booleans carry the
    operands' type)."""
    triton_type = bits_format(handle.dtype)
    bits = triton_type and handle.data.dtype == _BITS[triton_type]
    return triton_type if bits else None


def decode(bits: np.ndarray, triton_type: str) -> np.ndarray:
    """The float32 values of `bits` (exact: each value of these formats is a float32)."""
    return np.asarray(bits).view(_FORMATS[triton_type]).astype(np.float32)


def encode(values: np.ndarray, triton_type: str, toward_zero: bool = False) -> np.ndarray:
    """The bits of `values` in `triton_type`, rounded as the GPU rounds (docs/design.md,
    "bfloat16 and fp8"): to nearest even (or toward zero), fp8 saturating, NaN staying NaN."""
    values = np.asarray(values)
    if values.dtype.kind in "biu":
        values = values.astype(np.float64)
    target = _FORMATS[triton_type]
    rounded = values.astype(target)
    # ml_dtypes' finfo: NumPy's knows these types only with some NumPy and ml_dtypes versions.
    largest = np.asarray(ml_dtypes.finfo(target).max, target)
    # Past the largest value: an fp8 value but NaN, or a finite value rounded toward zero.
    beyond = (triton_type != "bf16") & ~np.isnan(values) & (np.abs(values)
                                                            > largest.astype(values.dtype))
    if toward_zero:
        # One step toward zero where rounding went away from it.
        back = rounded.astype(values.dtype)
        away = np.isfinite(back) & (np.abs(back) > np.abs(values))  # so `back` is not zero
        bits = rounded.view(_BITS[triton_type])
        rounded = np.where(away, bits - 1, bits).astype(_BITS[triton_type]).view(target)
        beyond |= np.isfinite(values) & ~np.isfinite(back)
    rounded = np.where(beyond, np.copysign(largest, values).astype(target), rounded)
    return np.asarray(rounded, target).view(_BITS[triton_type])


def _refuse_fp8(operation: Any, triton_type: str) -> None:
    if triton_type != "bf16":
        raise Fp8ArithmeticError(getattr(operation, "__name__", str(operation)), triton_type)


def _method(function: Callable[..., Any], *first: Any) -> Callable[..., Any]:
    """`function(*first, instance, ...)` as a method of the class it is set on (a bound method
    or a partial set on a class is called without the instance)."""
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*first, self, *args, **kwargs)
    return method


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    # In float64 the product is exact, and so is the sum of values of like magnitude: the
    # result rounds once, as the GPU's fused multiply-add does.
    return a.astype(np.float64) * b + c


class _Adaptations:
    """What `interpreter_adapted` replaces, each a method: calls between kernels, the builder's
    operations that decode bits, and the language's patching (`tl.range` as `tensor_range`);
    each calls Triton's own (`originals`, put back on exit) where it has nothing to adapt."""

    def __init__(self, debug: bool) -> None:
        """`replaced`: the replacing values, by owner, name; `originals`: Triton's own."""
        builder = interpreter.InterpreterBuilder
        self.replaced = {
            **{(owner, "__call__"): _method(self.call_interpreted)
               for owner in (JITFunction, interpreter.InterpretedFunction)},
            (interpreter, "_patch_lang_tensor"): self.patch_lang_tensor,
            (interpreter, "_patch_lang_core"): self.patch_lang_core,
            (interpreter.interpreter_builder, "options"): dataclasses.replace(
                interpreter.interpreter_builder.options, debug=debug),
            **{(tl.constexpr, name): _method(self.constexpr_operator, name, reflected)
               for name, reflected in _REFLECTED.items()
               if hasattr(tl.constexpr, name) and hasattr(tl.tensor, reflected)},
            **{(builder, name): _method(self.elementwise, name, None)
               for name in ("binary_op", "unary_op", "ternary_op")},
            (builder, "create_fma"): _method(self.elementwise, "create_fma", _fma),
            **{(builder, name): _method(self.converted, name)
               for name in ("cast_impl", "create_fp_to_fp")},
            **{(builder, name): _method(getattr(self, name))
               for name in ("create_dot", "create_atomic_rmw", "create_print",
                            "create_descriptor_load") if hasattr(builder, name)},
            **{(owner, name): _method(self.in_float32, owner, name)
               for owner, names in ((interpreter.ReduceOps, ("sum", "min_max")),
                                    (interpreter.ScanOps, ("cumsum", "cumprod")))
               for name in names}}
        self.originals = {(owner, name): getattr(owner, name) for owner, name in self.replaced}

    def call_interpreted(self, jit_fn: Any, *args: Any, **kwargs: Any) -> Any:
        # As InterpretedFunction.__call__, but the language patched for the callee's module is
        # put back after the call: that method leaves it patched, which breaks later compiles.
        twin = interpreted(jit_fn)
        scope = interpreter._patch_lang(twin.fn)
        try:
            return twin.rewrite()(*args, **kwargs)
        finally:
            scope.restore()

    def patch_lang_tensor(self, tensor: Any, scope: Any) -> None:
        # A runtime scalar where Python wants an int: the interpreter keeps scalars as
        # 1-element arrays and Triton 3.6's calls `int()` on them, which NumPy >= 2.5 refuses.
        self.originals[interpreter, "_patch_lang_tensor"](tensor, scope)
        scope.set_attr(tensor, "__index__", lambda scalar: int(scalar.handle.data.item()))

    def constexpr_operator(self, name: str, reflected: str, constexpr: Any, other: Any) -> Any:
        # `alpha * x` with a constexpr `alpha` (a parameter given by keyword) gives a tensor, as
        # in a compiled kernel: Triton 3.9's constexpr wraps it in a constexpr, which the
        # interpreter cannot store.
        if isinstance(other, tl.tensor):
            return getattr(other, reflected)(constexpr.value)
        return self.originals[tl.constexpr, name](constexpr, other)

    def original(self, name: str) -> Any:
        return self.originals[interpreter.InterpreterBuilder, name]

    def retyped(self, tensor: Any, data: np.ndarray, dtype: Any) -> Any:
        """A tensor of `data` as `dtype`, a block where `tensor` is one, of its shape."""
        block = tensor.type.is_block()
        return tl.core.tensor(interpreter.TensorHandle(data, dtype), tl.block_type(
            dtype, list(tensor.type.shape)) if block else dtype)

    def as_float32(self, handle: Any) -> Any:
        triton_type = _handle_format(handle)
        if triton_type is None:
            return handle
        return interpreter.TensorHandle(decode(handle.data, triton_type), tl.float32)

    def elementwise(self, name: str, op: Any, builder: Any, *args: Any) -> Any:
        """Builder operation `name` on handles, then a NumPy op (`create_fma`'s handles only:
        `op`)."""
        handles, operation = (args, op) if op else (args[:-1], args[-1])
        bits = [h for h in handles if _handle_format(h)]
        if not bits or operation is np.where:  # a select moves bits, as on the GPU
            return self.original(name)(builder, *args)
        triton_type = _handle_format(bits[0])
        _refuse_fp8(operation, triton_type)
        out = operation(*(decode(h.data, triton_type) for h in handles))
        if out.dtype == np.bool_:
            return interpreter.TensorHandle(out, tl.int1)
        return interpreter.TensorHandle(encode(out, triton_type), bits[0].dtype.scalar)

    def converted(self, name: str, builder: Any, src: Any, dst_type: Any, *rounding: Any) -> Any:
        """Builder conversion `name` of `src` to `dst_type`, rounded as `rounding` asks."""
        source, target = _handle_format(src), bits_format(dst_type)
        if source is None and target is None:
            return self.original(name)(builder, src, dst_type, *rounding)
        values = decode(src.data, source) if source else src.data
        if target:
            data = encode(values, target, toward_zero=rounding == (ir.ROUNDING_MODE.RTZ,))
        else:
            data = values.astype(interpreter._get_np_dtype(dst_type))
        return interpreter.TensorHandle(data, dst_type.scalar)

    def create_dot(self, builder: Any, a: Any, b: Any, d: Any, *rest: Any, **kwargs: Any) -> Any:
        triton_type = _handle_format(d)
        out = self.original("create_dot")(builder, *map(self.as_float32, (a, b, d)), *rest,
                                          **kwargs)
        if triton_type is None:
            return out
        return interpreter.TensorHandle(encode(out.data, triton_type), d.dtype.scalar)

    def create_atomic_rmw(self, builder: Any, rmw_op: Any, ptr: Any, val: Any, mask: Any,
                          *rest: Any) -> Any:
        triton_type = _handle_format(val)
        if triton_type is None or rmw_op != ir.ATOMIC_OP.FADD:
            return self.original("create_atomic_rmw")(builder, rmw_op, ptr, val, mask, *rest)
        _refuse_fp8("atomic_add", triton_type)
        # One element at a time, in order: programs run one after another here, so this is
        # each element's read-modify-write, with repeated addresses adding up.
        ptrs, values, masks = np.broadcast_arrays(ptr.data, val.data, mask.data)
        old = np.zeros(ptrs.shape, val.data.dtype)  # bits, as `_handle_format` found them
        one = np.ones(1, np.bool_)
        for index in zip(*np.nonzero(masks)):
            address = ptrs[index].reshape(1)
            old[index] = host.load(address, one, old[index].reshape(1), old.dtype)[0]
            total = decode(old[index], triton_type) + decode(values[index], triton_type)
            host.store(address, encode(total, triton_type).reshape(1), one)
        return interpreter.TensorHandle(old, val.dtype.scalar)

    def create_print(self, builder: Any, prefix: Any, hex: Any, values: Any, *rest: Any) -> Any:
        if not hex:  # values, as the GPU prints them; in hex, their bits
            values = [self.as_float32(value) for value in values]
        return self.original("create_print")(builder, prefix, hex, values, *rest)

    def in_float32(self, owner: Any, name: str, ops: Any, input: Any, *args: Any,
                   **kwargs: Any) -> Any:
        """`owner`'s reduction or scan `name`, run on `input` decoded to float32: sums and
        scans accumulate in float32 and round once; the GPU adds in bfloat16."""
        input = input[0] if isinstance(input, tuple) else input  # min_max's (value, index)
        triton_type = bits_format(input.dtype)
        if triton_type is None:
            return self.originals[owner, name](ops, input, *args, **kwargs)
        if name != "min_max":
            _refuse_fp8(name, triton_type)
        values = self.retyped(input, decode(input.handle.data, triton_type), tl.float32)
        return self.rebits(self.originals[owner, name](ops, values, *args, **kwargs),
                           triton_type, input.dtype)

    def rebits(self, out: Any, triton_type: str, dtype: Any) -> Any:
        """`out` (a tensor, or a tuple or list of them), its float32 values as bits of
        `triton_type`."""
        if isinstance(out, (list, tuple)):
            return type(out)(self.rebits(element, triton_type, dtype) for element in out)
        if out.dtype != tl.float32:  # min_max's index
            return out
        return self.retyped(out, encode(out.handle.data, triton_type), dtype)

    def create_descriptor_load(self, builder: Any, desc: Any, indices: Any, *args: Any,
                               **kwargs: Any) -> Any:
        # Padded with NaN, bfloat16 gets NaN's bits, not the zero bits the interpreter would
        # cast NaN to.
        load = self.original("create_descriptor_load")
        if desc.padding != ir.PADDING_OPTION.PAD_NAN:
            return load(builder, desc, indices, *args, **kwargs)
        ptrs, mask = desc.materialize_pointers(indices)
        if ptrs.get_element_ty() != tl.bfloat16:
            return load(builder, desc, indices, *args, **kwargs)
        other = interpreter.TensorHandle(np.full_like(ptrs.data, 0x7FC0, np.uint16), tl.bfloat16)
        return builder.create_masked_load(ptrs, mask, other, *args, is_volatile=False, **kwargs)

    def patch_lang_core(self, lang: Any, scope: Any) -> None:
        # Triton 3.6's interpreter names no IR type for two fp8 types its builder has. And
        # `tl.range`, a Python range there, steps as compiled (`tl.static_range` stays one).
        self.originals[interpreter, "_patch_lang_core"](lang, scope)
        scope.set_attr(lang, "range", tensor_range)
        to_ir = lang.dtype.to_ir

        def to_ir_of_every_fp8(self: Any, builder: Any) -> Any:
            if self.name in ("fp8e4b8", "fp8e5b16"):
                return getattr(builder, f"get_{self.name}_ty")()
            return to_ir(self, builder)

        scope.set_attr(lang.dtype, "to_ir", to_ir_of_every_fp8)


class HostTensor:
    """A NumPy buffer as the torch tensor Triton's interpreter expects: `dtype` is a Triton
    dtype, and each host copy of its storage is the buffer itself, written in place."""

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
    """Triton's `InterpretedFunction` for `jit_fn`, its `range` loops stepping as compiled
    (`loop_range`), kept in its record, not keyed by hash: hashing a JITFunction parses its
    source, which fails while the language is patched."""
    def made() -> Any:
        function = interpreter.InterpretedFunction(_named_as_defined(jit_fn.fn))
        function.rewritten_fn = {}
        function.rewriter.ast_transformer = _loop_transformer()
        return function

    return _state.KERNEL_RECORDS.derived(jit_fn, "interpreted", made)


def tensor_range(arg1: Any, arg2: Any = None, step: Any = None, **options: Any) -> Iterator[Any]:
    """The steps of `range(arg1, arg2, step)` (or `tl.range`) as a compiled kernel takes them:
    scalar tensors of the type the bounds and step promote to. `options` (`num_stages`, ...)
    tune a compiled loop only. TypeError for a bound that is no integer, as Triton raises."""
    start, end = (0, arg1) if arg2 is None else (arg1, arg2)
    step = 1 if step is None else step
    semantic = interpreter.interpreter_semantic
    bounds = [semantic.to_tensor(bound.value if isinstance(bound, tl.constexpr) else bound)
              for bound in (start, end, step)]
    types = [bound.dtype for bound in bounds]
    if not all([kind.is_int() for kind in types]):
        raise TypeError(f"For loop bounds and step must all be ints, are "
                        f"({', '.join(map(str, types))})")
    loop_type = semantic.integer_promote_impl(semantic.integer_promote_impl(*types[:2]), types[2])
    dtype = interpreter._get_np_dtype(loop_type)
    for value in range(*[int(bound.handle.data.item()) for bound in bounds]):
        data = np.array([value]).astype(dtype)  # wraps, as a compiled loop's variable would
        yield tl.tensor(interpreter.TensorHandle(data, loop_type), loop_type)


def loop_range(iterator: Any, *args: Any, **kwargs: Any) -> Any:
    """What `for ... in iterator(*args, **kwargs)` steps through in a rewritten kernel: Python's
    `range` as `tensor_range`, anything else as it is."""
    return tensor_range(*args, **kwargs) if iterator is range else iterator(*args, **kwargs)


@functools.cache
def _loop_transformer() -> Any:
    """Triton's interpreter's rewriting of a kernel's source, with each `for ... in range(...)`
    made `for ... in loop_range(range, ...)`."""
    class LoopTransformer(interpreter.ASTTransformer):
        def visit_For(self, node: ast.For) -> ast.For:
            node = self.generic_visit(node)
            call = node.iter
            if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                    and call.func.id == "range"):
                # This module, reached without a name of its own in the kernel's module.
                module = ast.Call(ast.Name("__import__", ast.Load()), [ast.Constant(__name__)],
                                  [ast.keyword("fromlist", ast.Constant(("loop_range",)))])
                node.iter = ast.copy_location(ast.Call(
                    ast.Attribute(module, "loop_range", ast.Load()), [call.func, *call.args],
                    call.keywords), call)
            return node

    return LoopTransformer()


def _named_as_defined(fn: Any) -> Any:
    """`fn`, renamed as its `def` names it (a generated kernel's `pkg.add`): Triton's interpreter
    runs the source it reads and takes the result by `__name__`."""
    defined = fn.__code__.co_name
    if fn.__name__ == defined:
        return fn
    copy = types.FunctionType(fn.__code__, fn.__globals__, defined, fn.__defaults__,
                              fn.__closure__)
    copy.__kwdefaults__, copy.__annotations__ = fn.__kwdefaults__, fn.__annotations__
    copy.__qualname__, copy.__module__ = fn.__qualname__, fn.__module__
    copy.__dict__.update(fn.__dict__)
    return copy


@contextlib.contextmanager
def interpreter_adapted(debug: bool = False) -> Iterator[None]:
    """While in force, Triton's interpreter runs a @triton.jit kernel as the GPU would: asserts
    checked where `debug`, calls to other @triton.jit functions run (outside
    `TRITON_INTERPRET=1` a `JITFunction` refuses a call), bits computed on as values, and two
    faults mended (`_Adaptations`). Everything is put back on exit."""
    adaptations = _Adaptations(debug)
    for (owner, name), value in adaptations.replaced.items():
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name), value in adaptations.originals.items():
            setattr(owner, name, value)


# `constexpr OP tensor` is computed as `tensor ROP constexpr.value`.
_REFLECTED = {**{f"__{op}__": f"__r{op}__" for op in ("add", "sub", "mul", "truediv", "floordiv",
                                                       "mod", "and", "or", "xor", "lshift",
                                                       "rshift")},
              "__lt__": "__gt__", "__le__": "__ge__", "__gt__": "__lt__", "__ge__": "__le__"}


def host_constexpr(value: Any) -> Any:
    """A constexpr, a Triton builtin (`tl.exp`) bound to the interpreter's semantics: only those
    the kernel names are patched, and an unpatched one refuses a call without `_semantic`."""
    if isinstance(value, tuple):
        return tuple(host_constexpr(element) for element in value)
    if not getattr(value, "__triton_builtin__", False):
        return value
    return functools.partial(value, _semantic=interpreter.interpreter_semantic)


def typed_scalar(value: Any, what: str) -> Any:
    """A scalar argument (or a typed `_spec.Scalar`) as a tensor of the GPU launch's type."""
    typed = value if isinstance(value, _spec.Scalar) else _spec.scalar(value, what=what)
    triton_type = tl.str_to_ty(typed.triton_type, None)
    data = np.array([typed.value], dtype=interpreter._get_np_dtype(triton_type))
    return tl.tensor(interpreter.TensorHandle(data, triton_type), triton_type)


def host_descriptor(array: np.ndarray, descriptor: Any) -> Any:
    """Triton's `TensorDescriptor` over `array`, with the fields of the call's (checked already)
    `descriptor`: Triton's own constructor reads torch dtype attributes a `HostTensor` lacks."""
    element = tl.str_to_ty(_spec.pointer_type(array.dtype, what="base")[1:], None)

    # The torch attribute the interpreter's descriptor reads.
    torch_like = type("TorchLikeDtype", (type(element),),
                      {"is_floating_point": element.is_floating()})
    names = [field.name for field in dataclasses.fields(TensorDescriptor)]
    if descriptor.round_f32_to_tf32 and "round_f32_to_tf32" not in names:
        raise NotImplementedError(
            f"TensorDescriptor(round_f32_to_tf32=True) on the CPU needs a Triton whose "
            f"interpreter rounds to TF32 (3.9 does; this one is {triton.__version__}). Run it on "
            f"a GPU, or round the base yourself (jax.lax.reduce_precision(x, 8, 10)).")
    host = object.__new__(TensorDescriptor)
    for name in names:  # the interpreter's descriptor holds lists
        value = getattr(descriptor, name)
        setattr(host, name, list(value) if isinstance(value, tuple) else value)
    host.base = HostTensor(array, torch_like(element.name))
    return host
