"""Battery cases for architectures (`target_arch`, `JAX_TRITON_ROCM_TARGET_ARCH`), the package's
environment variables, Triton's cache folder, `jax.vmap`, and Triton's interpreter on the CPU."""

from __future__ import annotations

import os
import tempfile

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from harness import (N, X, accept, accumulate_kernel, add, either, first_launch,
                     in_fresh_process, interpret, lower, ramp, refuse)

G = "target"


def lower_named(**archs):
    """A run lowering the add kernel for the first platform named, under target_arch(**archs)."""
    platform = next(iter(archs))

    def run():
        with jtr.target_arch(**archs):
            lowered = jax.jit(lambda x, y: add(x, y)).trace(X, X).lower(
                lowering_platforms=(platform,))
        return jtr.kernel_calls(lowered)

    return run


def capability_is(value):
    return lambda calls: first_launch(calls)["compute_capability"] == value


# Lowers the add kernel for cuda with only the environment naming the architecture; prints the
# kernel's compute capability.
LOWER_FROM_ENV = """
import jax, jax.numpy as jnp, triton
import jax_triton_rocm as jtr
from harness import add, X
lowered = jax.jit(lambda x, y: add(x, y)).trace(X, X).lower(lowering_platforms=("{platform}",))
print(jtr.kernel_calls(lowered)[0].summary()["launches"][0]["compute_capability"])
"""


def from_env(value: str, platform: str = "cuda"):
    here = os.path.dirname(os.path.abspath(__file__))
    code = f"import sys; sys.path.insert(0, {here!r})\n" + LOWER_FROM_ENV.replace(
        "{platform}", platform)
    return lambda: in_fresh_process(code, {"JAX_TRITON_ROCM_TARGET_ARCH": value}).strip()


def _architectures():
    return [
        refuse("JAX_TRITON_ROCM_TARGET_ARCH='cuda=sm_90,cuda=sm_80'", G,
               from_env("cuda=sm_90,cuda=sm_80"), "JAX_TRITON_ROCM_TARGET_ARCH", "cuda",
               from_issue="silent"),
        either("JAX_TRITON_ROCM_TARGET_ARCH='rocm=GFX942'", G, from_env("rocm=GFX942", "rocm"),
               "JAX_TRITON_ROCM_TARGET_ARCH", "GFX942"),
        either("JAX_TRITON_ROCM_TARGET_ARCH='cuda=sm_90,'", G, from_env("cuda=sm_90,"),
               "JAX_TRITON_ROCM_TARGET_ARCH", "cuda=sm_90,", check=lambda out: out == "90"),
        either("target_arch(cuda='sm_90a')", G, lower_named(cuda="sm_90a"), "cuda", "sm_90a"),
        accept("target_arch(cuda=90)", G, lower_named(cuda=90), check=capability_is(90)),
        accept("target_arch(cuda='9.0')", G, lower_named(cuda="9.0"), check=capability_is(90)),
        accept("target_arch(rocm='gfx942:sramecc+:xnack-')", G,
               lower_named(rocm="gfx942:sramecc+:xnack-")),
        refuse("target_arch(rocm='sm_90')", G, lower_named(rocm="sm_90"), "rocm", "sm_90"),
        refuse("target_arch(cuda='')", G, lower_named(cuda=""), "cuda", "''"),
        refuse("target_arch(metal='m1')", G, lower_named(metal="m1"), "metal"),
        either("target_arch(rocm=942)", G, lower_named(rocm=942), "rocm", "942"),
        accept("nested target_arch: the inner one wins", G, _nested_targets,
               check=capability_is(80)),
        refuse("lowering for rocm with no architecture named", G,
               lambda: jax.jit(lambda x, y: add(x, y)).trace(X, X).lower(
                   lowering_platforms=("rocm",)), "target_arch", "rocm"),
    ]


def _nested_targets():
    with jtr.target_arch(cuda="sm_90"), jtr.target_arch(cuda="sm_80"):
        lowered = jax.jit(lambda x, y: add(x, y)).trace(X, X).lower(lowering_platforms=("cuda",))
    return jtr.kernel_calls(lowered)


def with_env(name: str, value: str, run):
    """`run` with the environment variable set for its duration."""
    def run_with_env():
        old = os.environ.get(name)
        os.environ[name] = value
        try:
            jtr.clear_caches()  # settings read at lowering are part of the lowered-call memo
            return run()
        finally:
            if old is None:
                del os.environ[name]
            else:
                os.environ[name] = old
            jtr.clear_caches()

    return run_with_env


@triton.jit
def negate_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, -tl.load(x_ptr + offsets))


def negate_on(platform: str):
    return lambda: lower(platform, lambda x: jtr.triton_call(
        x, kernel=negate_kernel, out_shape=x, grid=(N // 256,), BLOCK=256), X)


def _cache_folder_under_a_file():
    parent = tempfile.mkdtemp(prefix="battery_")
    with open(os.path.join(parent, "a-file"), "w"):
        pass
    return with_env("TRITON_CACHE_DIR", os.path.join(parent, "a-file", "cache"),
                    negate_on("rocm"))()


def _environment():
    lower_add = lambda: lower("cuda", lambda x, y: add(x, y), X, X)  # noqa: E731
    return [
        refuse("JAX_TRITON_ROCM_XLA_NATIVE='maybe'", "environment",
               with_env("JAX_TRITON_ROCM_XLA_NATIVE", "maybe", lower_add),
               "JAX_TRITON_ROCM_XLA_NATIVE", "'maybe'"),
        either("JAX_TRITON_ROCM_COMPILE_THREADS='0'", "environment",
               with_env("JAX_TRITON_ROCM_COMPILE_THREADS", "0", lower_add),
               "JAX_TRITON_ROCM_COMPILE_THREADS", "'0'"),
        accept("JAX_TRITON_ROCM_PREWARM=' on '", "environment",
               with_env("JAX_TRITON_ROCM_PREWARM", " on ", negate_on("rocm"))),
        accept("TRITON_CACHE_DIR under a file", "environment", _cache_folder_under_a_file),
        accept("TRITON_CACHE_DIR='' (as jax-triton sets it)", "environment",
               with_env("TRITON_CACHE_DIR", "", negate_on("cuda"))),
        accept("xla_native=True on ROCm [gfx942]", "environment", _native_rocm,
               check=lambda text: "__gpu$xla.gpu.triton" in text),
    ]


def _native_rocm() -> str:
    with jtr.target_arch(rocm="gfx942"):
        return jax.jit(lambda x, y: add(x, y, xla_native=True)).trace(X, X).lower(
            lowering_platforms=("rocm",)).as_text()


@triton.jit
def assert_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    tl.device_assert(x < 0, "x must be negative")
    tl.store(out_ptr + offsets, x)


@triton.jit
def inline_asm_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets)
    y = tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.float32,
                                  is_pure=True, pack=1)
    tl.store(out_ptr + offsets, y)


def run_kernel_on_cpu(kernel, **call):
    return lambda: interpret(lambda x: jtr.triton_call(
        x, kernel=kernel, out_shape=x, grid=(N // 256,), BLOCK=256, **call), ramp())


def _interpreter():
    G = "interpreter"
    return [
        refuse("a failing tl.device_assert with debug=True [cpu]", G,
               run_kernel_on_cpu(assert_kernel, debug=True), "assert_kernel",
               "x must be negative"),
        refuse("inline assembly [cpu]", G, run_kernel_on_cpu(inline_asm_kernel),
               "inline_asm_kernel", "interpreter"),
        accept("an eager call on CPU arrays", G, lambda: np.asarray(add(ramp(), ramp())),
               check=lambda out: np.allclose(out, 2 * np.arange(N))),
        accept("int64 arrays [cpu]", G,
               lambda: interpret(lambda x, y: add(x, y), ramp(dtype=jnp.int32),
                                 ramp(dtype=jnp.int32)),
               check=lambda out: np.array_equal(out, 2 * np.arange(N))),
        accept("a donated, aliased input under jit [cpu]", G, _donated,
               check=lambda out: np.allclose(out, 2 * np.arange(N))),
    ]


def _donated():
    fn = jax.jit(lambda x, acc: jtr.triton_call(
        x, acc, kernel=accumulate_kernel, out_shape=acc, grid=(N // 256,), BLOCK=256,
        input_output_aliases={1: 0}), donate_argnums=1)
    x, acc = (jax.device_put(ramp(), jax.devices("cpu")[0]) for _ in range(2))
    return np.asarray(fn(x, acc))


def _vmap():
    G = "vmap"
    batched = lambda **call: lambda xs: jax.vmap(  # noqa: E731
        lambda x: add(x, x, **call))(xs)
    xs = jax.ShapeDtypeStruct((4, N), jnp.float32)
    return [
        refuse("batch_grid_axis=0 while the grid's x is 4", G,
               lambda: lower("cuda", batched(batch_grid_axis=0), xs), "batch_grid_axis", "grid"),
        accept("vmap with the default loop [cpu]", G,
               lambda: interpret(batched(), jnp.stack([ramp()] * 4)),
               check=lambda out: np.allclose(out, 2 * np.arange(N)[None])),
        accept("vmap of a call with a scalar from the batch's shape", G,
               lambda: lower("rocm", batched(), xs)),
    ]


def cases():
    return _architectures() + _environment() + _interpreter() + _vmap()
