"""`triton.Config(pre_hook=...)`, run once at lowering on stand-ins: a `HookDescriptor` records
the `block_shape` the hook sets, as Triton's tutorials do; a `HookArray` has no data."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping
from typing import Any

from jax_triton_rocm.kernel import _autotuner, _callbacks
from jax_triton_rocm.kernel._spec import aval_text
from jax_triton_rocm.kernel._tensordesc import TensorDescriptor


class DataAccess(Exception):
    """A pre_hook used what a stand-in does not have; the message names the access."""


class HookArray:
    """An array as a pre_hook sees it: its shape and dtype, nothing of its data."""

    def __init__(self, aval: Any, label: str) -> None:
        object.__setattr__(self, "_aval", aval)
        object.__setattr__(self, "_label", label)

    shape = property(lambda self: tuple(self._aval.shape))
    dtype = property(lambda self: self._aval.dtype)
    ndim = property(lambda self: len(self._aval.shape))
    size = property(lambda self: math.prod(int(dim) for dim in self._aval.shape))
    nbytes = property(lambda self: self.size * self.dtype.itemsize)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__array"):  # NumPy's protocols: np.asarray(x)
            raise DataAccess(f"np.asarray({self._label})")
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)  # Python's own probes (copy, pickle, ...): no data
        raise DataAccess(f"{self._label}.{name}")

    def __setattr__(self, name: str, value: Any) -> None:
        raise DataAccess(f"{self._label}.{name} = {value!r}")

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<{self._label}: {aval_text(self._aval)}, no data at lowering>"


def _refused(text: str):
    def refuse(self: HookArray, *args: Any) -> Any:
        raise DataAccess(text.format(self._label))
    return refuse


for _method, _text in {
        "__getitem__": "{}[...]", "__setitem__": "{}[...] = ...", "__iter__": "iter({})",
        "__jax_array__": "jnp.asarray({})", "__bool__": "bool({})",
        "__int__": "int({})", "__float__": "float({})", "__index__": "the index value of {}",
        **{f"__{op}__": f"arithmetic on {{}} ({op})" for op in (
            "add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "iadd", "isub", "imul",
            "neg", "lt", "le", "gt", "ge")}}.items():
    setattr(HookArray, _method, _refused(_text))


class HookDescriptor(TensorDescriptor):
    """A descriptor as a pre_hook sees it (fields as lists, as Triton's); only its
    `block_shape` may be set. `stand_in` adds Triton's class to its bases, which hooks check."""

    def __init__(self, desc: TensorDescriptor, label: str, path: tuple[int, ...]) -> None:
        for field in dataclasses.fields(TensorDescriptor):
            value = getattr(desc, field.name)
            object.__setattr__(self, field.name, list(value) if isinstance(value, tuple)
                               else value)
        object.__setattr__(self, "base", HookArray(desc.base, f"{label}.base"))
        object.__setattr__(self, "_label", label)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_original", desc)

    def __setattr__(self, name: str, value: Any) -> None:
        if name != "block_shape":
            raise DataAccess(f"{self._label}.{name} = {value!r} (a pre_hook may set a "
                             f"descriptor's block_shape only)")
        object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"<{self._label}: TensorDescriptor block_shape={self.block_shape}>"

    __hash__ = object.__hash__


@functools.cache
def _descriptor_class() -> type:
    from triton.tools.tensor_descriptor import TensorDescriptor as TritonDescriptor

    return type("HookDescriptor", (HookDescriptor, TritonDescriptor), {"__module__": __name__})


def stand_in(value: Any, label: str, path: tuple[int, ...], made: list) -> Any:
    """What a pre_hook sees for one argument; each `HookDescriptor` made goes to `made`."""
    if isinstance(value, TensorDescriptor):
        desc = _descriptor_class()(value, label, path)
        made.append(desc)
        return desc
    if isinstance(value, tuple):
        return tuple(stand_in(v, f"{label}[{j}]", path + (j,), made)
                     for j, v in enumerate(value))
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return HookArray(value, label)
    return value


def run(hook: Any, config: Any, nargs: Mapping[str, Any], names: list[str],
        kernel: str) -> tuple[tuple[tuple[int, ...], TensorDescriptor], ...]:
    """Runs `config`'s pre_hook on stand-ins of `nargs`; returns (parameter path, descriptor
    with the new block shape) per descriptor whose block shape it set."""
    made: list[HookDescriptor] = []
    seen = {name: stand_in(value, f"nargs[{name!r}]", (names.index(name),), made)
            if name in names else value for name, value in nargs.items()}
    what = f"The pre_hook of triton.Config({config}) on kernel {kernel}"
    try:
        _callbacks.call(hook, seen, what=what, given=nargs,
                        fix="Fix the hook: it receives the kernel's arguments by name (arrays "
                            "as stand-ins with a shape and a dtype), the keywords and the "
                            "config's values.")
    except ValueError as err:
        if isinstance(err.__cause__, DataAccess):
            raise NotImplementedError(
                f"{what} ({_callbacks.describe(hook)}) used {err.__cause__}, which a hook "
                f"cannot have here: jaxlib runs the configs without host code around them, so "
                f"the hook runs once per config when the call is lowered, on stand-ins that hold "
                f"each array's shape and dtype and no data, and may set a TensorDescriptor's "
                f"block_shape only. Instead, {_autotuner.PRE_HOOK_ALTERNATIVE}.") \
                from err.__cause__
        raise
    changed = []
    for desc in made:
        block = desc.block_shape
        if list(block) == list(desc._original.block_shape):
            continue
        try:
            changed.append((desc._path, dataclasses.replace(desc._original,
                                                            block_shape=tuple(block))))
        except (TypeError, ValueError) as err:
            raise ValueError(f"{what} ({_callbacks.describe(hook)}) set {desc._label}"
                             f".block_shape = {block!r}: {err}") from err
    return tuple(changed)


def reblocked(positional: tuple, descriptors: tuple) -> tuple:
    """`positional` with each of `descriptors` (as `run` returns them) in place."""
    def replaced(entries: tuple, path: tuple[int, ...], desc: Any) -> tuple:
        items = list(entries)
        kind, value = items[path[0]]
        items[path[0]] = (kind, (value[0], desc) if len(path) == 1
                          else replaced(value, path[1:], desc))
        return tuple(items)

    for path, desc in descriptors:
        positional = replaced(positional, path, desc)
    return positional
