"""Triton kernels shared by the tests (CPU lowering tests and GPU tests alike), and inputs."""

import functools
import linecache
import uuid

import jax
import jax.numpy as jnp
import triton
import triton.language as tl

import jax_triton_rocm as jtr


@triton.jit
def add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


@triton.jit
def add_outputs_first_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """add_kernel with the output pointer before `n`: every pointer first, as a primitive's
    lowering rule fills them (operands, then results), and `n` a constexpr."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add(x, y, block=256, **kwargs):
    return jtr.triton_call(
        x, y, x.size, kernel=add_kernel,
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(triton.cdiv(x.size, block),), BLOCK=block, **kwargs)


@triton.jit
def sized_add_kernel(x_ptr, y_ptr, n: tl.constexpr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def sized_add(x, y, block=256, **kwargs):
    """x + y through a kernel with pointer and constexpr parameters only (its length compiled
    in): a plain kernel, which XLA's Triton call takes as it is when asked."""
    return jtr.triton_call(x, y, x.size, kernel=sized_add_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, block),), BLOCK=block, **kwargs)


@triton.jit
def scale_shift_kernel(x_ptr, scale, shift, flip, n, out_ptr, BLOCK: tl.constexpr):
    """out = (x * scale + shift), negated when `flip`; scale is a float, shift an int."""
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = x * scale + shift
    if flip:
        y = -y
    tl.store(out_ptr + offsets, y, mask=mask)


@triton.jit
def double_into_first_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    """out = 2 * x, the output pointer first (as `softmax(out_ptr, in_ptr, ...)` kernels)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(in_ptr + offsets, mask=mask) * 2.0, mask=mask)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x = x - tl.max(x, axis=0)
    num = tl.exp(x)
    tl.store(out_ptr + row * n_cols + cols, num / tl.sum(num, axis=0), mask=mask)


def softmax(x):
    rows, cols = x.shape
    return jtr.triton_call(
        x, kernel=softmax_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        grid=(rows,), n_cols=cols, BLOCK=triton.next_power_of_2(cols))


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * K + kk[None, :],
                    mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * N + rn[None, :],
                    mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(c_ptr.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


def matmul(a, b, block_m=64, block_n=64, block_k=32, **kwargs):
    m, k = a.shape
    _, n = b.shape
    return jtr.triton_call(
        a, b, kernel=matmul_kernel, out_shape=jax.ShapeDtypeStruct((m, n), a.dtype),
        grid=lambda meta: (triton.cdiv(m, meta["BLOCK_M"]), triton.cdiv(n, meta["BLOCK_N"])),
        M=m, N=n, K=k, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, **kwargs)


def random_normal(key: int, shape, dtype=jnp.float32, device=None) -> jax.Array:
    """Normal samples drawn in float32 (from `jax.random.key(key)`), then cast to `dtype`; on
    `device` if given (the CPU device, for Triton's interpreter), else JAX's default."""
    x = jax.random.normal(jax.random.key(key), shape, jnp.float32).astype(dtype)
    return x if device is None else jax.device_put(x, device)


def kernel_from_source(source: str, name: str = "k"):
    """The @triton.jit function `name` defined by `source` (with `triton` and `tl` in scope).

    Each call makes a fresh module with its own file name, registered with `linecache` so that
    Triton can read the source back: two calls give distinct kernels even with the same name.
    """
    filename = f"<kernel-{uuid.uuid4()}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace = {"triton": triton, "tl": tl, "__name__": "generated_kernels"}
    exec(compile(source, filename, "exec"), namespace)
    return namespace[name]


@functools.cache
def scaled_by_parameter(name: str):
    """`{name}_kernel(x_ptr, out_ptr, {name}: tl.constexpr)`: out = x * {name} over 256 elements;
    a kernel whose constexpr is named like an argument of `triton_call` itself ("grid", ...)."""
    return kernel_from_source(
        f"@triton.jit\n"
        f"def {name}_kernel(x_ptr, out_ptr, {name}: tl.constexpr):\n"
        f"    offsets = tl.program_id(0) * 256 + tl.arange(0, 256)\n"
        f"    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) * {name})\n", f"{name}_kernel")


def matmul_relative_error(out, a, b) -> float:
    """‖out - a@b‖ / ‖a@b‖, with the reference computed in float32."""
    ref = jnp.dot(a.astype(jnp.float32), b.astype(jnp.float32))
    return float(jnp.linalg.norm(out.astype(jnp.float32) - ref) / jnp.linalg.norm(ref))


@triton.jit
def matmul_kernel_runtime_dims(a_ptr, b_ptr, M, N, K, c_ptr,
                               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                               BLOCK_K: tl.constexpr):
    matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M, BLOCK_N, BLOCK_K)


@triton.jit
def add_inplace_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    """out += y, where out aliases x (input_output_aliases={0: 0})."""
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(out_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add_inplace(x, y, block=256):
    """x + y written over x's buffer (add_inplace_kernel, `input_output_aliases={0: 0}`)."""
    return jtr.triton_call(x, y, x.size, kernel=add_inplace_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, block),), BLOCK=block,
                           input_output_aliases={0: 0})


@triton.jit
def atomic_sum_kernel(x_ptr, n, out_ptr, BLOCK: tl.constexpr):
    """out[0] += sum(x): needs out zeroed first (zeroed_outputs)."""
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


@triton.jit
def sum_and_diff_kernel(x_ptr, y_ptr, n, sum_ptr, diff_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(sum_ptr + offsets, x + y, mask=mask)
    tl.store(diff_ptr + offsets, x - y, mask=mask)


@triton.jit
def copy_kernel(x_ptr, n, out_ptr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def copy(x, block=256):
    return jtr.triton_call(x, x.size, kernel=copy_kernel, out_shape=x,
                           grid=(triton.cdiv(x.size, block),), BLOCK=block)


@triton.jit
def unmasked_copy_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """copy_kernel without the length: each program copies a whole BLOCK (the array's size a
    multiple of it), so that the kernel's only parameters are its two pointers."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets))


def elementwise_kernel(body_op: str):
    """A fresh @triton.jit kernel named `k`: out = `body_op` of x and y (e.g. "x + y")."""
    return kernel_from_source(f'''
@triton.jit
def k(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, {body_op}, mask=mask)
''')


@triton.jit
def bogus_asm_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    """Inline PTX that ptxas rejects."""
    offsets = tl.arange(0, BLOCK)
    y = tl.inline_asm_elementwise("bogus.instruction $0, $1;", "=r,r", [tl.load(x_ptr + offsets)],
                                  dtype=tl.int32, is_pure=True, pack=1)
    tl.store(out_ptr + offsets, y)


@triton.jit
def activation_kernel(x_ptr, out_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    """out = ACT(x): ACT a constexpr that is a Triton builtin or a @triton.jit function."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, ACT(tl.load(x_ptr + offsets, mask=mask)), mask=mask)


@triton.jit
def doubled(x):
    return x * 2


# Scalar parameters that declare a type (tests/cpu/test_declared_types.py, and on the GPU).
@triton.jit
def add_unsigned_kernel(x_ptr, v: tl.uint32, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + v)


@triton.jit
def add_wide_kernel(x_ptr, v: tl.int64, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + (v >> 20).to(tl.int32))


@triton.jit
def scale_declared_kernel(x_ptr, alpha: tl.float32, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, alpha * tl.load(x_ptr + offsets))
