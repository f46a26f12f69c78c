"""Kernels for the tests of jax-triton 0.4's call surface (keyword and tuple operands, outputs
whose pointer precedes an operand's, in-place updates, Refs, tensor descriptors), and two calls
of 0.4's API under `xla_metadata`."""

import jax
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from jax.experimental.xla_metadata import set_xla_metadata

import jax_triton_rocm.compat as jt
from tests.support.kernels import add_kernel


@triton.jit
def _masked(ptr, offsets, n):
    return tl.load(ptr + offsets, mask=offsets < n)


@triton.jit
def out_first_kernel(x_ptr, out_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """out = x + 2 y; the output's pointer comes before an operand's."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, _masked(x_ptr, offsets, n) + 2 * _masked(y_ptr, offsets, n),
             mask=offsets < n)


@triton.jit
def constexpr_first_kernel(x_ptr, BLOCK: tl.constexpr, y_ptr, n, out_ptr):
    """out = x + y, with a constexpr before an operand."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, _masked(x_ptr, offsets, n) + _masked(y_ptr, offsets, n),
             mask=offsets < n)


@triton.jit
def inc_kernel(n, x_ptr, BLOCK: tl.constexpr):
    """x += 1 in place; a scalar comes before the pointer."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x_ptr + offsets, _masked(x_ptr, offsets, n) + 1, mask=offsets < n)


@triton.jit
def add_inplace_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    """y += x in place: y is aliased to the output and has no pointer of its own (0.4)."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offsets, _masked(x_ptr, offsets, n) + _masked(y_ptr, offsets, n),
             mask=offsets < n)


@triton.jit
def tuple_kernel(scale, xy, n, bias, out_ptr, BLOCK: tl.constexpr):
    """out = scale * (x + y) (+ bias), with xy = ((x_ptr, one), y_ptr): a nested tuple of
    pointers of two dtypes and a scalar; `bias` may be None."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = _masked(xy[0][0], offsets, n).to(tl.float32) * xy[0][1]
    out = scale * (x + _masked(xy[1], offsets, n).to(tl.float32))
    if bias is not None:
        out += _masked(bias, offsets, n)
    tl.store(out_ptr + offsets, out, mask=offsets < n)


@triton.jit
def accumulate_kernel(x_ptr, acc_ptr, n, out_ptr, BLOCK: tl.constexpr):
    """out = x + acc; acc += x in place."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    total = _masked(x_ptr, offsets, n) + _masked(acc_ptr, offsets, n)
    tl.store(out_ptr + offsets, total, mask=offsets < n)
    tl.store(acc_ptr + offsets, total, mask=offsets < n)


@triton.jit
def pair_kernel(x_ptr, acc_and_bias, n, out_ptr, BLOCK: tl.constexpr):
    """out = x + acc + bias; acc += x in place; acc and bias come in one tuple."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x, acc = _masked(x_ptr, offsets, n), _masked(acc_and_bias[0], offsets, n)
    tl.store(out_ptr + offsets, x + acc + _masked(acc_and_bias[1], offsets, n),
             mask=offsets < n)
    tl.store(acc_and_bias[0] + offsets, acc + x, mask=offsets < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=1),
                          triton.Config({"BLOCK": 256}, num_warps=2)], key=["n"])
@triton.jit
def tuned_pair_inc_kernel(pair, n, BLOCK: tl.constexpr):
    """pair[0] += 1 and pair[1] += 2 in place, autotuned."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(pair[0] + offsets, _masked(pair[0], offsets, n) + 1, mask=offsets < n)
    tl.store(pair[1] + offsets, _masked(pair[1], offsets, n) + 2, mask=offsets < n)


@triton.jit
def desc_block_kernel(in_desc, out_ptr, M: tl.constexpr, N: tl.constexpr):
    """Copies the block of `in_desc` at row M; rows past the described shape are padding."""
    block = in_desc.load([M, 0])
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], block)


@triton.jit
def device_desc_copy_kernel(in_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
    """Copies an M x N array through descriptors built in the kernel (TMA on sm_90+)."""
    desc_in = tl.make_tensor_descriptor(in_ptr, shape=[M, N], strides=[N, 1], block_shape=[M, N])
    desc_out = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1],
                                         block_shape=[M, N])
    desc_out.store([0, 0], desc_in.load([0, 0]))


@triton.jit
def store_scalar_kernel(value, out_ptr):
    tl.store(out_ptr, value)


@triton.jit
def update_and_double_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    """x += y in place (x aliased, no pointer of its own); out = 2 y."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    y = _masked(y_ptr, offsets, n)
    tl.store(x_ptr + offsets, _masked(x_ptr, offsets, n) + y, mask=offsets < n)
    tl.store(out_ptr + offsets, 2 * y, mask=offsets < n)


@triton.jit
def two_desc_kernel(a_desc, b_desc, out_ptr, M: tl.constexpr, N: tl.constexpr):
    """out = a + b, blocks read through two descriptors (of two dtypes)."""
    total = a_desc.load([0, 0]) + b_desc.load([0, 0]).to(tl.float32)
    tl.store(out_ptr + tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :], total)


# Triton 3.7 renamed Gluon's TMA copies (3.9 removed the old names); both run either.
_tma_load = getattr(hopper.tma, "async_load", None) or hopper.tma.async_copy_global_to_shared
_tma_store = getattr(hopper.tma, "async_store", None) or hopper.tma.async_copy_shared_to_global


@gluon.jit
def gluon_tma_copy_kernel(in_desc, out_ptr, M: gl.constexpr, N: gl.constexpr):
    """Copies an M x N block through shared memory: in by the host's TMA descriptor, out by one
    built in the kernel (global scratch on sm_90)."""
    smem = gl.allocate_shared_memory(in_desc.dtype, [M, N], in_desc.layout)
    bar = gl.allocate_shared_memory(gl.int64, [1], hopper.mbarrier.MBarrierLayout())
    hopper.mbarrier.init(bar, count=1)
    hopper.mbarrier.expect(bar, M * N * in_desc.dtype.primitive_bitwidth // 8)
    _tma_load(in_desc, [0, 0], bar, smem)
    hopper.mbarrier.wait(bar, phase=0)
    hopper.mbarrier.invalidate(bar)
    out_desc = hopper.tma.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1],
                                                 block_shape=[M, N], layout=in_desc.layout)
    _tma_store(out_desc, [0, 0], smem)
    hopper.tma.store_wait(0)


def two_calls(x, y):
    """Two plain kernel calls, each under its own xla_metadata, written for jax-triton 0.4."""
    grid = (triton.cdiv(x.size, 256),)
    with set_xla_metadata(kernel_tag="first"):
        total = jt.triton_call(x, y, x.size, kernel=add_kernel, out_type=jax.typeof(x),
                               grid=grid, BLOCK=256)
    with set_xla_metadata(kernel_tag="second"):  # its output's pointer precedes y's
        return jt.triton_call(total, y_ptr=y, n=x.size, kernel=out_first_kernel,
                              out_type=jax.typeof(x), grid=grid, BLOCK=256)
