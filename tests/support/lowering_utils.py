"""Lowering for a platform without its GPU, and reading back what the lowering produced.

`lower_for` is the one way the tests lower; `captured_lowerings` records the package's own view
of each call (`LoweredCall`: kernels, features, target). The rest are short cuts over the two and
readers of what they give: `lowered_text` (the module's text), `call_targets` (the custom-call
target of each Triton call), `opaque_metadata` (what jaxlib reads from a call's opaque),
`compiled_text` (the program XLA compiled, on the devices there are), and for XLA's own Triton
call `native_calls`, `one_native_call`, `kernel_signature`, `ir_text`.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import zlib
from collections.abc import Callable, Iterator, Sequence

import jax
import jax.numpy as jnp

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.routes.jaxlib import _jaxlib_call
from jax_triton_rocm.routes.jaxlib._proto import MESSAGES
from jax_triton_rocm.routes.xla import _xla_native
from tests.support.subprocess_utils import run_python

DEFAULT_ARCH = {"cuda": "sm_90", "rocm": "gfx942"}
# What the ROCm plugin here offers, or what a lowering without one assumes.
ROCM_FEATURES = _vendors.plugin_features("rocm") or _vendors.assumed_features("rocm")


# Code for a fresh process: lowers an add for sm_90 with the package's warnings logged as
# "LOG jax_triton_rocm ...", then prints "lowered 1" (Triton's cache-folder cases).
LOWER_ADD_LOGGING_WARNINGS = """
import logging
logging.basicConfig(level=logging.WARNING, format="LOG %(name)s %(message)s")
import jax, jax.numpy as jnp
import jax_triton_rocm as jtr
from tests.support.kernels import add

x = jax.ShapeDtypeStruct((1024,), jnp.float32)
with jtr.target_arch(cuda="sm_90"):
    lowered = jax.jit(add).trace(x, x).lower(lowering_platforms=("cuda",))
print("lowered", len(jtr.kernel_calls(lowered)))
"""
TRITON_FOLDERS = ("TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_KERNEL_DUMP")


def lower_add_in_fresh_process(tmp_path, env, prefix=()):
    """Lowers an add for sm_90 in a new process with `env` and no Triton folder variable but
    those `env` sets; returns the warnings it logged. Its temporary folder must end empty."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = run_python(LOWER_ADD_LOGGING_WARNINGS, prefix=prefix,
                        env={**env, "TMPDIR": str(temporary), "JAX_PLATFORMS": "cpu"},
                        unset=tuple(name for name in TRITON_FOLDERS if name not in env))
    assert result.returncode == 0 and "lowered 1" in result.stdout, result.stderr[-3000:]
    assert os.listdir(temporary) == []
    return [line for line in result.stderr.splitlines() if line.startswith("LOG jax_triton_rocm")]


def the_folder_warning(warnings, variable, folder, reason):
    [warning] = warnings
    assert "cannot be written" in warning and reason in warning, warning
    assert f"{variable}=" in warning and folder in warning, warning
    return warning


def spec(shape, dtype) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, dtype)


def lower_for(fn, *args, platform: str, arch=None):
    """Lowers `fn(*args)` for `platform` under `target_arch`, on a machine without that GPU.

    `args` may be arrays or `jax.ShapeDtypeStruct`s; `arch` defaults to sm_90 or gfx942.
    A fresh wrapper of `fn` is jitted each time: JAX keys its trace and lowering caches on the
    function object, and serving an earlier test's lowering of the same `fn` would run no
    lowering rule (a capture would see no call), making a test depend on the order tests run in.
    """
    @functools.wraps(fn)
    def fresh(*fresh_args):
        return fn(*fresh_args)

    # "cpu": Triton's interpreter, for which no architecture is named.
    archs = {} if platform == "cpu" else {platform: arch or DEFAULT_ARCH[platform]}
    with jtr.target_arch(**archs) if archs else contextlib.nullcontext():
        return jax.jit(fresh).trace(*args).lower(lowering_platforms=(platform,))


def lowered_text(fn, *args, platform: str, arch=None) -> str:
    """The text (StableHLO) of the module `lower_for` gives."""
    return lower_for(fn, *args, platform=platform, arch=arch).as_text()


def call_targets(fn, *args, platform: str, arch=None) -> list[str]:
    """The custom-call target of each Triton call in the module `lower_for` gives, in order."""
    lowered = lower_for(fn, *args, platform=platform, arch=arch)
    return [call.target for call in jtr.kernel_calls(lowered)]


def compiled_text(fn, *args, **jit_options) -> str:
    """The text of the program XLA compiles for `fn(*args)` on the devices there are (where the
    partitioner's gathers show); `fn` is jitted with `jit_options`, unless it was already."""
    jitted = fn if hasattr(fn, "lower") and not jit_options else jax.jit(fn, **jit_options)
    return jitted.lower(*args).compile().as_text()


# One recording `emit` is installed while any thread captures; it records a call for the
# captures of the thread that lowers it, so that captures in several threads at once neither
# see each other's calls nor leave a recorder behind.
_capturing = threading.local()
_recorder_lock = threading.Lock()
_recorder: dict = {"users": 0, "emit": None}


def _recording_emit(ctx, operands, lowered):
    for captured in getattr(_capturing, "lists", ()):
        captured.append(lowered)
    return _recorder["emit"](ctx, operands, lowered)


@contextlib.contextmanager
def captured_lowerings() -> Iterator[list[_jaxlib_call.LoweredCall]]:
    """Records every `LoweredCall` this thread's lowerings emit while in force (the MLIR is
    still emitted). A `LoweredCall` is jaxlib's route's, the default; calls sent to XLA's
    (`test_xla_native`, `test_xla_route` read them) are not recorded."""
    captured: list[_jaxlib_call.LoweredCall] = []
    if not hasattr(_capturing, "lists"):
        _capturing.lists = []
    _capturing.lists.append(captured)
    with _recorder_lock:
        if _recorder["users"] == 0:
            _recorder["emit"], _jaxlib_call.emit = _jaxlib_call.emit, _recording_emit
        _recorder["users"] += 1
    try:
        yield captured
    finally:
        _capturing.lists = [c for c in _capturing.lists if c is not captured]
        with _recorder_lock:
            _recorder["users"] -= 1
            if _recorder["users"] == 0:
                _jaxlib_call.emit = _recorder["emit"]


def lower_one(fn, *args, platform: str, arch=None) -> jtr.EmittedCall:
    """The single Triton custom call in the module `lower_for` gives."""
    calls = jtr.kernel_calls(lower_for(fn, *args, platform=platform, arch=arch))
    assert len(calls) == 1, f"expected one Triton custom call, found {len(calls)}"
    return calls[0]


def capture_one(fn, *args, platform: str, arch=None) -> _jaxlib_call.LoweredCall:
    """The single `LoweredCall` that lowering `fn(*args)` with `lower_for` produces."""
    with captured_lowerings() as captured:
        lower_for(fn, *args, platform=platform, arch=arch)
    assert len(captured) == 1, f"expected one Triton call, lowered {len(captured)}"
    return captured[0]


def opaque_metadata(opaque: bytes) -> bytes:
    """The metadata an opaque carries, read as jaxlib reads it: inflated by zlib (jaxlib's
    `uncompress` takes a zlib stream and nothing else), then parsed as the call's messages
    (`_proto.MESSAGES`). Where jaxlib's CUDA plugin imports (it does without a GPU), its own parser
    must read the same metadata."""
    message = MESSAGES["TritonAnyKernelCall"].FromString(zlib.decompress(opaque))
    plugin = _vendors.plugin_triton_module("cuda")
    if plugin is not None:
        assert plugin.get_serialized_metadata(opaque) == message.metadata
    return message.metadata


def tma_block_shapes(kernel_call) -> list[tuple[int, ...]]:
    """The block shape of each TMA descriptor that a kernel call message of jaxlib's carries
    (`EmittedCall.message.kernel_call`, or one config's), in parameter order."""
    return [tuple(p.tensor_descriptor.nvidia.block_shape) for p in kernel_call.parameters
            if p.WhichOneof("value") == "tensor_descriptor"]


def lower_add(kernel, n: int = 4096, *, platform: str = "cuda", arch=None,
              **call) -> _jaxlib_call.LoweredCall:
    """The `LoweredCall` of `kernel(x_ptr, y_ptr, n, out_ptr, BLOCK)` on two float32 vectors of
    `n` elements; the grid covers `n` by BLOCK (the call's `BLOCK=...`, or an autotune
    config's), and `call` holds the rest of `triton_call`'s keywords."""
    from tests.support import autotune_utils

    x = spec((n,), jnp.float32)
    return capture_one(lambda x, y: autotune_utils.tuned_add(x, y, kernel=kernel, **call), x, x,
                       platform=platform, arch=arch)


def run_at_once(fns: Sequence[Callable[[], object]]) -> None:
    """Runs each of `fns` in its own thread, all released together; re-raises the first error."""
    barrier = threading.Barrier(len(fns))
    errors = []

    def work(fn):
        try:
            barrier.wait()
            fn()
        except Exception as err:  # re-raised below, in the test's thread
            errors.append(err)

    threads = [threading.Thread(target=work, args=(fn,)) for fn in fns]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]


def native_calls(lowered) -> list[dict]:
    """Each `__gpu$xla.gpu.triton` call in the module: its backend config as Python values,
    plus `aliases`, the output_operand_aliases attribute as text."""
    from jax._src.lib.mlir import ir

    module = lowered.compiler_ir("stablehlo")
    found = []

    def walk(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    yield inner
                    yield from walk(inner)

    with module.context:
        for op in walk(module.operation):
            if op.name != "stablehlo.custom_call":
                continue
            if ir.StringAttr(op.attributes["call_target_name"]).value != "__gpu$xla.gpu.triton":
                continue
            config = ir.DictAttr(op.attributes["mhlo.backend_config"])
            entry = {"name": ir.StringAttr(config["name"]).value,
                     "ir": ir.StringAttr(config["ir"]).value_bytes,
                     "debug": ir.BoolAttr(config["debug"]).value}
            for key in ("num_warps", "num_stages", "grid_x", "grid_y", "grid_z"):
                entry[key] = ir.IntegerAttr(config[key]).value
            entry["aliases"] = (str(op.attributes["output_operand_aliases"])
                                if "output_operand_aliases" in op.attributes else "")
            entry["operands"] = [str(operand.type) for operand in op.operands]
            found.append(entry)
    return found


def one_native_call(fn, *args, platform, arch=None) -> dict:
    """The single XLA Triton call (`native_calls`) in the module `lower_for` gives."""
    calls = native_calls(lower_for(fn, *args, platform=platform, arch=arch))
    assert len(calls) == 1, f"expected one XLA Triton call, found {len(calls)}"
    return calls[0]


def kernel_signature(ir_bytes: bytes, name: str) -> list[str]:
    """The parameter types of `tt.func @name` in the IR, parsed as XLA will."""
    module = _xla_native.parse_ttir(ir_bytes)
    for op in module.body.operations:
        if op.operation.name == "tt.func" and str(op.attributes["sym_name"]) == f'"{name}"':
            return [str(arg.type) for arg in op.regions[0].blocks[0].arguments]
    raise AssertionError(f"no tt.func @{name} in the IR")


def ir_text(ir_bytes: bytes) -> str:
    """The Triton IR an XLA Triton call carries (`native_calls(...)[i]["ir"]`), as text."""
    return str(_xla_native.parse_ttir(ir_bytes))
