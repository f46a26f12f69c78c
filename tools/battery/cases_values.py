"""Battery cases for the values `triton_call` passes: scalars, arrays, out_shape, kernels and
constexprs."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

import jax_triton_rocm as jtr
from cases_call import G, add_with, on
from harness import (N, X, accept, add, add_kernel, copy_kernel, fill_kernel, first_launch,
                     interpret, lower, ramp, refuse)


def copy_on(platform: str, dtype):
    spec = jax.ShapeDtypeStruct((N,), dtype)
    return lambda: lower(platform, lambda x: jtr.triton_call(
        x, kernel=copy_kernel, out_shape=x, grid=(N // 256,), BLOCK=256), spec)


def fill_with(**call):
    settings = dict(kernel=fill_kernel, out_shape=X, grid=(4,), BLOCK=256)
    settings.update(call)
    return lambda: lower("cuda", lambda: jtr.triton_call(1.5, **settings))


def _after_int(block):
    """A run lowering the add kernel with BLOCK=256, then with `block` (equal to 256 in Python,
    or in Triton's cache key)."""
    def run():
        lower("cuda", add_with(BLOCK=256), X, X)
        return lower("cuda", add_with(BLOCK=block), X, X)

    return run


def fill(value):
    return lambda: lower("cuda", lambda: jtr.triton_call(
        value, kernel=fill_kernel, out_shape=X, grid=(4,), BLOCK=256))


def _scalars_and_arrays():
    add_scalar = lambda n: (lambda x, y: jtr.triton_call(  # noqa: E731
        x, y, n, kernel=add_kernel, out_shape=x, grid=(4,), BLOCK=256))
    return [
        refuse("a None scalar", G, on("sm_90", add_scalar(None), X, X), "None", "n|argument 2",
               from_issue="unclear"),
        refuse("a None scalar [cpu]", G, on("cpu", add_scalar(None), X, X), "None",
               "n|argument 2", from_issue="unclear"),
        refuse("a complex scalar", G, on("sm_90", add_scalar(1j), X, X), "argument 2", "1j"),
        refuse("a str scalar", G, on("sm_90", add_scalar("1024"), X, X), "argument 2", "'1024'"),
        refuse("an int below -2**63", G, on("sm_90", add_scalar(-2**63 - 1), X, X), "argument 2",
               str(-2**63 - 1)),
        accept("an int of 2**63 (u64)", G, on("sm_90", add_scalar(2**63), X, X),
               check=lambda calls: first_launch(calls)["parameters"][2] == "u64"),
        accept("np.uint64(2**64-1)", G, on("gfx942", add_scalar(np.uint64(2**64 - 1)), X, X)),
        accept("np.int8(-1)", G, on("sm_90", add_scalar(np.int8(-1)), X, X),
               check=lambda calls: first_launch(calls)["parameters"][2] == "i32"),
        accept("a nan float scalar", G, fill(float("nan"))),
        refuse("a Python list as an array", G,
               lambda: lower("cuda", lambda x: add(x, [1.0] * N), X), "argument 1", "list"),
        refuse("an int4 array", G,
               on("sm_90", lambda x: add(x, x), jax.ShapeDtypeStruct((N,), jnp.int4)), "int4"),
        accept("a zero-size array", G, on("sm_90", add_with(grid=(1,)), *[
            jax.ShapeDtypeStruct((0,), jnp.float32)] * 2)),
        accept("bfloat16 arrays", G, on("gfx942", add_with(), *[
            jax.ShapeDtypeStruct((N,), jnp.bfloat16)] * 2)),
        refuse("float8_e4m3fn arithmetic [gfx942]", G, on("gfx942", add_with(), *[
            jax.ShapeDtypeStruct((N,), jnp.float8_e4m3fn)] * 2), "float8_e4m3fn|fp8e4nv",
               from_issue="unclear"),
        refuse("float8_e5m2 arithmetic [sm_90]", G, on("sm_90", add_with(), *[
            jax.ShapeDtypeStruct((N,), jnp.float8_e5m2)] * 2), "float8_e5m2|fp8e5"),
        accept("float8_e4m3fnuz arrays copied [gfx942]", G,
               copy_on("rocm", jnp.float8_e4m3fnuz)),
        accept("float8_e4m3fn arrays copied [sm_90]", G, copy_on("cuda", jnp.float8_e4m3fn)),
    ]


def _out_shapes():
    return [
        refuse("out_shape=None", G, on("sm_90", add_with(out_shape=None), X, X), "out_shape",
               "None"),
        accept("out_shape a jnp array [cpu]", G,
               lambda: interpret(lambda x, y: add(x, y, out_shape=jnp.zeros(N)), ramp(), ramp()),
               check=lambda out: np.allclose(out, 2 * np.arange(N))),
        refuse("out_shape=(1024,) (a shape, no dtype)", G,
               on("sm_90", add_with(out_shape=(N,)), X, X), "out_shape", "1024"),
        refuse("out_shape with a sharding", G, lambda: _sharded_out_shape(), "out_shape",
               "sharding", from_issue="silent"),
    ]


def _sharded_out_shape():
    mesh = jax.sharding.Mesh(np.array(jax.devices("cpu")[:1]), ("x",))
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("x"))
    out = jax.ShapeDtypeStruct((N,), jnp.float32, sharding=sharding)
    return lower("cuda", add_with(out_shape=out), X, X)


def _kernels_and_constexprs():
    return [
        refuse("kernel=None", G, on("sm_90", add_with(kernel=None), X, X), "kernel", "None"),
        refuse("kernel a functools.partial", G,
               on("sm_90", add_with(kernel=functools.partial(add_kernel)), X, X), "kernel",
               "partial"),
        refuse("BLOCK=512.0 (a float)", G, fill_with(BLOCK=512.0), "BLOCK", "512.0"),
        refuse("BLOCK=256.0 once BLOCK=256 was lowered", G, _after_int(256.0), "BLOCK",
               "256.0"),
        refuse("BLOCK=300 (not a power of two)", G, on("gfx942", add_with(BLOCK=300), X, X),
               "BLOCK", "300"),
        refuse("BLOCK='512' (a str)", G, fill_with(BLOCK="512"), "BLOCK", "'512'"),
        refuse("BLOCK='256' once BLOCK=256 is in Triton's cache", G, _after_int("256"), "BLOCK",
               "'256'"),
        refuse("BLOCK=None", G, on("sm_90", add_with(BLOCK=None), X, X), "BLOCK", "None"),
        refuse("BLOCK=2**21 (above Triton's tensor size)", G,
               on("sm_90", add_with(BLOCK=2**21), X, X), "BLOCK", str(2**21)),
        # A value no other case compiles with: Triton's cache is cold for it.
        accept("BLOCK=np.int64(64), cold cache [sm_90]", G,
               on("sm_90", add_with(BLOCK=np.int64(64)), X, X), from_issue="unclear"),
        accept("BLOCK=np.int64(32), cold cache [gfx942]", G,
               on("gfx942", add_with(BLOCK=np.int64(32)), X, X), from_issue="unclear"),
        accept("BLOCK=np.int64(256) [cpu]", G, on("cpu", add_with(BLOCK=np.int64(256)), X, X),
               check=lambda out: np.allclose(out, 2 * np.arange(N)), from_issue="unclear"),
        refuse("jax.grad of a call", G,
               lambda: jax.grad(lambda x: add(x, x).sum())(jnp.ones(N)), "grad|differentiat",
               "custom_vjp"),
        refuse("a symbolic shape with a fixed grid (export)", G, _symbolic_export, "grid",
               "symbolic|shape", from_issue="silent"),
    ]


def _symbolic_export():
    from jax import export

    n, = export.symbolic_shape("n")
    spec = jax.ShapeDtypeStruct((n,), jnp.float32)
    fn = jax.jit(lambda x, y: jtr.triton_call(x, y, 1024, kernel=add_kernel, out_shape=x,
                                           grid=(4,), BLOCK=256))
    with jtr.target_arch(cuda="sm_90"):
        return export.export(fn, platforms=["cuda"], disabled_checks=[
            export.DisabledSafetyCheck.custom_call("triton_kernel_call_ffi")])(spec, spec)


def cases():
    return _scalars_and_arrays() + _out_shapes() + _kernels_and_constexprs()
