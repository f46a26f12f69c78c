# Copyright 2026 The jax_triton Authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

import concurrent.futures
import os
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import jax
from jax import config
from jax import random
from jax._src import test_util as jtu
from jax._src.interpreters import partial_eval as pe
from jax._src.lib import gpu_triton
from jax._src.lib import version as jaxlib_version
import jax.numpy as jnp
import jax_triton as jt
import jax_triton.triton_lib as jttl
import numpy as np
import triton
import triton.language as tl

config.parse_flags_with_absl()


def setUpModule():
  config.update("jax_enable_x64", True)


def tearDownModule():
  config.update("jax_enable_x64", False)


@triton.jit
def add_kernel(x_ptr, y_ptr, n_elements, output_ptr, BLOCK_SIZE: tl.constexpr):
  pid = tl.program_id(axis=0)
  block_start = pid * BLOCK_SIZE
  offsets = block_start + tl.arange(0, BLOCK_SIZE)
  mask = offsets < n_elements
  x = tl.load(x_ptr + offsets, mask=mask)
  y = tl.load(y_ptr + offsets, mask=mask)
  output = x + y
  tl.store(output_ptr + offsets, output, mask=mask)


@triton.jit
def add_inplace_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr, INPLACE_Y: tl.constexpr):
  pid = tl.program_id(axis=0)
  block_start = pid * BLOCK_SIZE
  offsets = block_start + tl.arange(0, BLOCK_SIZE)
  mask = offsets < n_elements
  x = tl.load(x_ptr + offsets, mask=mask)
  y = tl.load(y_ptr + offsets, mask=mask)
  output = x + y
  if INPLACE_Y:
    tl.store(y_ptr + offsets, output, mask=mask)
  else:
    tl.store(x_ptr + offsets, output, mask=mask)


def add(x, y, *, kernel=add_kernel, **kwargs):
  if kernel is add_kernel or kernel is add_inplace_kernel:
    kwargs.setdefault("BLOCK_SIZE", 8)
  if kernel is add_inplace_kernel or (  # handling autotuner & possibly other wrappers
    hasattr(kernel, "fn") and kernel.fn is add_inplace_kernel
  ):
    kwargs.setdefault("INPLACE_Y", False)

  default_grid = lambda meta: triton.cdiv(x.size, meta["BLOCK_SIZE"])
  return jt.triton_call(
      x,
      y,
      x.size,
      kernel=kernel,
      out_type=jax.typeof(x),
      grid=kwargs.pop("grid", default_grid),
      **kwargs,
  )


@triton.jit
def inc_inplace_kernel(x_in_out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
  pid = tl.program_id(axis=0)
  block_start = pid * BLOCK_SIZE
  offsets = block_start + tl.arange(0, BLOCK_SIZE)
  mask = offsets < n_elements
  x = tl.load(x_in_out_ptr + offsets, mask=mask)
  output = x + 1
  tl.store(x_in_out_ptr + offsets, output, mask=mask)


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    c_ptr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    K_EXACTLY_DIVISIBLE_BY_BLOCK: tl.constexpr,
):
  pid = tl.program_id(axis=0)
  num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
  num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
  num_pid_in_group = GROUP_SIZE_M * num_pid_n
  group_id = pid // num_pid_in_group
  first_pid_m = group_id * GROUP_SIZE_M
  group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)
  pid_m = first_pid_m + (pid % group_size_m)
  pid_n = (pid % num_pid_in_group) // group_size_m

  offs_am = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
  offs_bn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
  offs_k = tl.arange(0, BLOCK_SIZE_K)
  a_ptrs = a_ptr + (offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak)
  b_ptrs = b_ptr + (offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn)

  accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
  for k_remaining in range(K, 0, -BLOCK_SIZE_K):
    if K_EXACTLY_DIVISIBLE_BY_BLOCK:
      a = tl.load(a_ptrs)
      b = tl.load(b_ptrs)
    else:
      mask = tl.arange(0, BLOCK_SIZE_K) < k_remaining
      a = tl.load(a_ptrs, mask=mask[None, :], other=0.0)
      b = tl.load(b_ptrs, mask=mask[:, None], other=0.0)
    accumulator += tl.dot(a, b)
    a_ptrs += BLOCK_SIZE_K * stride_ak
    b_ptrs += BLOCK_SIZE_K * stride_bk
  c = accumulator.to(tl.float16)
  offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
  offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
  c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
  c_mask = (offs_cm[:, None] < M) & (offs_cn[None, :] < N)
  tl.store(c_ptrs, c, mask=c_mask)


def matmul(x, y, *, kernel=matmul_kernel, **kwargs):
  m, k = x.shape
  _, n = y.shape

  def grid(meta):
    cdiv = triton.cdiv
    return cdiv(m, meta["BLOCK_SIZE_M"]) * cdiv(n, meta["BLOCK_SIZE_N"])

  return jt.triton_call(
      x,
      y,
      m,
      n,
      k,
      k,  # stride_am
      1,  # stride_ak
      n,  # stride_bk
      1,  # stride_bn
      n,  # stride_cm
      1,  # stride_cn
      kernel=kernel,
      out_type=jax.ShapeDtypeStruct((m, n), dtype=x.dtype),
      grid=grid,
      GROUP_SIZE_M=8,
      **kwargs,
  )


def create_random_inputs(shape1, shape2=None, *, dtype="float32"):
  if shape2 is None:
    shape2 = shape1

  k1, k2 = random.split(random.PRNGKey(0), 2)
  if dtype in {"float32", "float16", "float64"}:
    x = random.normal(k1, shape1, dtype=dtype)
    y = random.normal(k2, shape2, dtype=dtype)
  elif dtype in {"int32", "int64"}:
    x = random.randint(k1, shape1, -100, 100, dtype=dtype)
    y = random.randint(k2, shape2, -100, 100, dtype=dtype)
  return x, y


class TritonKernelCallTest(parameterized.TestCase):

  @parameterized.product(
      size=[1, 5, 100, 1024],
      dtype=["int32", "float32", "float16", "int64", "float64"],
      block_size=[1, 32, 256],
  )
  def test_add(self, size, dtype, block_size):
    x, y = create_random_inputs([size], dtype=dtype)
    out = jax.jit(lambda x, y: add(x, y, BLOCK_SIZE=block_size))(x, y)
    expected = x + y
    np.testing.assert_allclose(out, expected)

  @parameterized.product(
      m=[512, 1024],
      k=[512],
      n=[512],
      dtype=["float32", "float16"],
      block_size_m=[64, 128],
      block_size_n=[128, 256],
      block_size_k=[32],
  )
  def test_matmul(
      self,
      m,
      n,
      k,
      dtype,
      block_size_m,
      block_size_n,
      block_size_k,
  ):
    if jtu.is_cuda_compute_capability_at_least("7.0"):
      self.skipTest("Matmul only works on GPUs with capability >= sm70")

    x, y = create_random_inputs([m, k], [k, n], dtype=dtype)
    out = matmul(
        x,
        y,
        BLOCK_SIZE_M=block_size_m,
        BLOCK_SIZE_N=block_size_n,
        BLOCK_SIZE_K=block_size_k,
        K_EXACTLY_DIVISIBLE_BY_BLOCK=k % block_size_k == 0,
    )
    expected = jnp.matmul(x, y)
    np.testing.assert_allclose(out, expected, atol=0.05, rtol=0.05)

  @parameterized.product(
      size=[1, 5, 100, 1024],
      dtype=["int32", "float32", "float16", "int64", "float64"],
      block_size=[1, 32, 256],
  )
  def test_pmap(self, size, dtype, block_size):
    n_devices = jax.local_device_count()
    if n_devices < 2:
      self.skipTest("Not enough devices")

    x, y = create_random_inputs([n_devices, size], dtype=dtype)
    out = jax.pmap(lambda x, y: add(x, y, BLOCK_SIZE=block_size))(x, y)
    expected = x + y
    np.testing.assert_allclose(out, expected)

  @parameterized.parameters("int", "tuple", "function_int", "function_tuple")
  def test_grid_types(self, grid_type):
    size = 8
    block_size = 1
    x, y = create_random_inputs([size])

    if grid_type == "int":
      grid = triton.cdiv(size, block_size)
    elif grid_type == "tuple":
      grid = (triton.cdiv(size, block_size),)
    elif grid_type == "function_int":
      grid = lambda meta: triton.cdiv(size, meta["BLOCK_SIZE"])
    elif grid_type == "function_tuple":
      grid = lambda meta: (triton.cdiv(size, meta["BLOCK_SIZE"]),)

    out = add(x, y, BLOCK_SIZE=block_size, grid=grid)
    expected = x + y
    np.testing.assert_allclose(out, expected)

  @parameterized.parameters(
      42.0, np.float32(42.0), 1e-30, float("inf"), float("-inf")
  )
  def test_add_float_scalar(self, scalar):
    @triton.jit
    def add_scalar_kernel(x_ptr, y, output_ptr):
      tl.store(output_ptr, tl.load(x_ptr) + y)

    def add_scalar(x, y):
      return jt.triton_call(
          x,
          y,
          kernel=add_scalar_kernel,
          out_type=jax.ShapeDtypeStruct((), x.dtype),
          grid=1,
      )

    x = jnp.array([1.0])
    np.testing.assert_allclose(add_scalar(x, scalar), x + scalar)

  def test_scalar_equal_to_1_specialization(self):
    @triton.jit
    def scaled_copy_kernel(scale, x_ptr, output_ptr):
      pid = tl.program_id(0)
      tl.store(output_ptr + pid, scale * tl.load(x_ptr + pid))

    x = jnp.arange(8, dtype=jnp.float32) + 1.0
    out = jt.triton_call(
        1,
        x,
        kernel=scaled_copy_kernel,
        out_type=jax.typeof(x),
        grid=(x.size,),
    )
    np.testing.assert_array_equal(out, x)

  def test_kwarg_scalar_operand_stays_static(self):
    x = jnp.arange(8, dtype=jnp.float32)
    y = jnp.ones(8, dtype=jnp.float32)
    call = lambda x, y: jt.triton_call(
        x,
        y_ptr=y,
        n_elements=x.size,
        kernel=add_kernel,
        out_type=jax.typeof(x),
        grid=(1,),
        BLOCK_SIZE=8,
    )

    # Scalar kwargs must stay static and not leak into metaparams.
    jaxpr = jax.make_jaxpr(call)(x, y)
    (eqn,) = [e for e in jaxpr.eqns if e.primitive == jttl.triton_kernel_call_p]
    self.assertLen(eqn.invars, 2)
    self.assertNotIn("n_elements", eqn.params["metaparams"])
    self.assertIn("BLOCK_SIZE", eqn.params["metaparams"])

  def test_kwarg_operands_out_of_order(self):
    x = jnp.arange(8, dtype=jnp.float32)
    y = jnp.ones(8, dtype=jnp.float32)
    # Kwargs out of declaration order; lowering must restore it.
    out = jt.triton_call(
        x,
        n_elements=x.size,
        y_ptr=y,
        kernel=add_kernel,
        out_type=jax.typeof(x),
        grid=(1,),
        BLOCK_SIZE=8,
    )
    np.testing.assert_allclose(out, x + y)

  def test_kwarg_operands_with_aliasing(self):
    @triton.jit
    def inc_inplace_kernel(n_elements, x_in_out_ptr, BLOCK_SIZE: tl.constexpr):
      pid = tl.program_id(axis=0)
      block_start = pid * BLOCK_SIZE
      offsets = block_start + tl.arange(0, BLOCK_SIZE)
      mask = offsets < n_elements
      x = tl.load(x_in_out_ptr + offsets, mask=mask)
      output = x + 1
      tl.store(x_in_out_ptr + offsets, output, mask=mask)

    size = 8
    x = random.normal(random.PRNGKey(0), [size])
    expected = x + 1
    out = jt.triton_call(
        x_in_out_ptr=x,
        n_elements=size,
        kernel=inc_inplace_kernel,
        out_type=jax.typeof(x),
        grid=(size,),
        BLOCK_SIZE=1,
        input_output_aliases={1: 0},
    )
    np.testing.assert_array_equal(out, expected)

  def test_kwarg_operand_conflict_raises(self):
    x = jnp.arange(8, dtype=jnp.float32)
    with self.assertRaisesRegex(
        TypeError, "multiple values for argument 'x_ptr'"
    ):
      jt.triton_call(
          x,
          x_ptr=x,
          kernel=add_kernel,
          out_type=jax.typeof(x),
          grid=(1,),
          BLOCK_SIZE=8,
      )

  def test_constexpr_before_operand(self):
    @triton.jit
    def kernel(x_ptr, BLOCK_SIZE: tl.constexpr, y_ptr, n_elements, output_ptr):
      pid = tl.program_id(axis=0)
      offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
      mask = offsets < n_elements
      x = tl.load(x_ptr + offsets, mask=mask)
      y = tl.load(y_ptr + offsets, mask=mask)
      tl.store(output_ptr + offsets, x + y, mask=mask)

    x = jnp.arange(8, dtype=jnp.float32)
    y = jnp.ones(8, dtype=jnp.float32)
    out = jt.triton_call(
        x,
        y_ptr=y,
        n_elements=x.size,
        kernel=kernel,
        out_type=jax.typeof(x),
        grid=(1,),
        BLOCK_SIZE=8,
    )
    np.testing.assert_allclose(out, x + y)

  def test_explicit_compute_capability(self):
    scalar = np.float32(8)

    @triton.jit
    def add_scalar_kernel(x_ptr, y, output_ptr):
      tl.store(output_ptr, tl.load(x_ptr) + y)

    def add_scalar(x, y):
      return jt.triton_call(
          x,
          y,
          kernel=add_scalar_kernel,
          compute_capability=gpu_triton.get_compute_capability(0),
          out_type=jax.ShapeDtypeStruct((), x.dtype),
          grid=1,
      )

    x = jnp.array([1.0])
    np.testing.assert_allclose(add_scalar(x, scalar), x + scalar)

  @parameterized.parameters(False, True)
  def test_input_output_aliasing_simple(self, with_donation):
    size = 8
    x = random.normal(random.PRNGKey(0), [size])
    expected = x + 1

    launcher = lambda x: jt.triton_call(
        x,
        size,
        kernel=inc_inplace_kernel,
        out_type=jax.typeof(x),
        grid=(8,),
        BLOCK_SIZE=1,
        input_output_aliases={0: 0},
    )

    if with_donation:
      launcher = jax.jit(launcher, donate_argnums=(0,))
      x_ptr = x.unsafe_buffer_pointer()

    out = launcher(x)

    if with_donation:
      np.testing.assert_(x.is_deleted())
      np.testing.assert_equal(x_ptr, out.unsafe_buffer_pointer())

    np.testing.assert_allclose(out, expected)

  def test_input_output_aliasing_scalar_before_array(self):
    @triton.jit
    def inc_inplace_kernel(n_elements, x_in_out_ptr, BLOCK_SIZE: tl.constexpr):
      pid = tl.program_id(axis=0)
      block_start = pid * BLOCK_SIZE
      offsets = block_start + tl.arange(0, BLOCK_SIZE)
      mask = offsets < n_elements
      x = tl.load(x_in_out_ptr + offsets, mask=mask)
      output = x + 1
      tl.store(x_in_out_ptr + offsets, output, mask=mask)

    size = 8
    x = random.normal(random.PRNGKey(0), [size])
    expected = x + 1

    out = jt.triton_call(
        size,
        x,
        kernel=inc_inplace_kernel,
        out_type=jax.typeof(x),
        grid=(size,),
        BLOCK_SIZE=1,
        input_output_aliases={1: 0},
    )
    np.testing.assert_array_equal(out, expected)

  @parameterized.parameters(False, True)
  def test_ref_simple(self, jit):
    size = 8
    x, _ = create_random_inputs([size])
    x_ref = jax.new_ref(x)

    def f(x_ref):
      return jt.triton_call(
          x_ref,
          size,
          kernel=inc_inplace_kernel,
          out_type=(),
          grid=(size,),
          BLOCK_SIZE=1,
      )

    if jit:
      f = jax.jit(f)
    self.assertEqual(f(x_ref), ())
    np.testing.assert_array_equal(x_ref[...], x + 1)

  def test_ref_scalar_before_ref(self):
    @triton.jit
    def kernel(n_elements, x_in_out_ptr, BLOCK_SIZE: tl.constexpr):
      offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
      mask = offsets < n_elements
      x = tl.load(x_in_out_ptr + offsets, mask=mask)
      tl.store(x_in_out_ptr + offsets, x + 1, mask=mask)

    size = 8
    x, _ = create_random_inputs([size])
    x_ref = jax.new_ref(x)
    jt.triton_call(
        size, x_ref, kernel=kernel, out_type=(), grid=(size,), BLOCK_SIZE=1
    )
    np.testing.assert_array_equal(x_ref[...], x + 1)

  def test_ref_with_allocated_output(self):
    @triton.jit
    def kernel(x_ptr, acc_ptr, n_elements, out_ptr, BLOCK_SIZE: tl.constexpr):
      offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
      mask = offsets < n_elements
      x = tl.load(x_ptr + offsets, mask=mask)
      acc = tl.load(acc_ptr + offsets, mask=mask)
      tl.store(out_ptr + offsets, x + acc, mask=mask)
      tl.store(acc_ptr + offsets, acc + x, mask=mask)

    size = 8
    x, acc = create_random_inputs([size])
    acc_ref = jax.new_ref(acc)
    out = jt.triton_call(
        x,
        acc_ref,
        size,
        kernel=kernel,
        out_type=jax.typeof(x),
        grid=(size,),
        BLOCK_SIZE=1,
    )
    np.testing.assert_array_equal(out, x + acc)
    np.testing.assert_array_equal(acc_ref[...], acc + x)

  def test_ref_in_tuple_with_allocated_output(self):
    @triton.jit
    def acc_kernel(x_ptr, acc_and_bias, out_ptr):
      acc_ptr = acc_and_bias[0]
      bias_ptr = acc_and_bias[1]
      pid = tl.program_id(0)
      x = tl.load(x_ptr + pid)
      acc = tl.load(acc_ptr + pid)
      bias = tl.load(bias_ptr + pid)
      tl.store(out_ptr + pid, x + acc + bias)
      tl.store(acc_ptr + pid, acc + x)

    size = 8
    x, acc = create_random_inputs([size])
    bias = random.normal(random.key(42), [size])
    acc_ref = jax.new_ref(acc)

    out = jt.triton_call(
        x,
        (acc_ref, bias),
        kernel=acc_kernel,
        out_type=jax.typeof(x),
        grid=(size,),
    )
    np.testing.assert_allclose(out, x + acc + bias)
    np.testing.assert_allclose(acc_ref[...], acc + x)

  def test_ref_rejects_input_output_aliases(self):
    size = 8
    x, _ = create_random_inputs([size])
    x_ref = jax.new_ref(x)
    with self.assertRaisesRegex(ValueError, "cannot be combined with Ref"):
      jt.triton_call(
          x_ref,
          size,
          kernel=inc_inplace_kernel,
          out_type=(),
          grid=(size,),
          BLOCK_SIZE=1,
          input_output_aliases={0: 0},
      )

  @parameterized.product(with_donation=[False, True], first_is_inout=[False, True])
  def test_input_output_aliasing_2outputs(self, with_donation, first_is_inout):
    # this tests aliasing correctness in case of 4 buffer parameters two of which
    # (0 and 2, or 1 and 3) are in-out params. When first_is_inout=True, buffers 0 and 2
    # are incremented in place using values from buffers 1 and 3, and otherwise buffers
    # 1 and 3 are incremented in place with values from buffers 0 and 2.

    @triton.jit
    def weird_kernel(
      ptr0,
      ptr1,
      ptr2,
      ptr3,
      n_elements,
      BLOCK_SIZE: tl.constexpr,
      FIRST_INOUT: tl.constexpr,
    ):
      """For FIRST_INOUT=True  computes *ptr0[] += *ptr1[], *ptr2[] += *ptr3[],
      for FIRST_INOUT=False computes *ptr1[] += *ptr0[], *ptr3[] += *ptr2[]"""
      pid = tl.program_id(axis=0)
      block_start = pid * BLOCK_SIZE
      offsets = block_start + tl.arange(0, BLOCK_SIZE)
      mask = offsets < n_elements
      if FIRST_INOUT:
        io0_ptr = ptr0
        io1_ptr = ptr2
        i0_ptr = ptr1
        i1_ptr = ptr3
      else:
        io0_ptr = ptr1
        io1_ptr = ptr3
        i0_ptr = ptr0
        i1_ptr = ptr2

      x0 = tl.load(io0_ptr + offsets, mask=mask)
      y0 = tl.load(i0_ptr + offsets, mask=mask)
      x1 = tl.load(io1_ptr + offsets, mask=mask)
      y1 = tl.load(i1_ptr + offsets, mask=mask)
      output0 = x0 + y0
      output1 = x1 + y1
      tl.store(io0_ptr + offsets, output0, mask=mask)
      tl.store(io1_ptr + offsets, output1, mask=mask)

    size = 8
    keys = random.split(random.key(0), 4)
    args = [random.normal(key, [size]) for key in keys]
    expect0 = args[0] + args[1]
    expect1 = args[2] + args[3]

    inout_aliases = {0: 0, 2: 1} if first_is_inout else {1: 0, 3: 1}
    inout_indices = tuple(inout_aliases.keys())
    in_indices = (1, 3) if first_is_inout else (0, 2)

    launcher = lambda *a: jt.triton_call(
        *a,
        size,
        kernel=weird_kernel,
        out_type=tuple(a[io] for io in inout_indices),
        input_output_aliases=inout_aliases,
        grid=(8,),
        BLOCK_SIZE=1,
        FIRST_INOUT=first_is_inout,
    )
    if with_donation:
      launcher = jax.jit(launcher, donate_argnums=inout_indices)
      io_ptrs = tuple(args[io].unsafe_buffer_pointer() for io in inout_indices)

    outs = launcher(*args)

    if with_donation:
      for io in inout_indices:
        np.testing.assert_(args[io].is_deleted())
      for i in in_indices:
        np.testing.assert_(not args[i].is_deleted())
      np.testing.assert_array_equal(
        io_ptrs, tuple(o.unsafe_buffer_pointer() for o in outs)
      )

    np.testing.assert_allclose(outs[0], expect0)
    np.testing.assert_allclose(outs[1], expect1)

  @parameterized.parameters(False, True)
  def test_zeroed_outputs(self, use_function):
    x, y = create_random_inputs([1000000])
    # We alias `y` with the output, so are performing the add in-place.
    # If we zero the output before the kernel, the result is `x + 0`.
    out = add(
        x,
        y,
        input_output_aliases={1: 0},
        kernel=add_inplace_kernel,
        INPLACE_Y=True,
        zeroed_outputs=(lambda _: (0,)) if use_function else (0,),
    )
    np.testing.assert_allclose(out, x)

  @parameterized.parameters(
      lambda a: (a, a),
      lambda a: {"a": a, "bs": (a,)},
  )
  def test_pytree_outputs(self, out_type_fn):
    @triton.jit
    def copy_twice_kernel(a_ptr, x_ptr, y_ptr):
      a = tl.load(a_ptr)
      tl.store(x_ptr, a)
      tl.store(y_ptr, a)

    a = jnp.array([42])
    results = jt.triton_call(
        a,
        kernel=copy_twice_kernel,
        out_type=out_type_fn(a),
        grid=(1,),
    )
    jax.tree.map(np.testing.assert_array_equal, out_type_fn(a), results)

  def test_kernel_cache_equivalent_kernels(self):
    # Create unique JITFunction to avoid conflicts with other tests.
    my_add_kernel = triton.jit(add_kernel.fn)
    fn1 = jax.jit(lambda x, y: add(x, y, BLOCK_SIZE=32, kernel=my_add_kernel))
    fn2 = jax.jit(lambda x, y: add(x, y, BLOCK_SIZE=32, kernel=my_add_kernel))
    fn3 = jax.jit(lambda x, y: add(x, y, BLOCK_SIZE=64, kernel=my_add_kernel))

    triton_fn = jttl.TritonFunction(my_add_kernel)
    self.assertEmpty(triton_fn._kernel_cache)

    x1, y1 = create_random_inputs([42])
    x2, y2 = create_random_inputs([43])

    with mock.patch.object(
        jttl, "compile_ttir_inplace", wraps=jttl.compile_ttir_inplace
    ) as mock_compile:
      _ = fn1(x1, y1)
      self.assertEqual(mock_compile.call_count, 1)
      self.assertLen(triton_fn._kernel_cache, 1)

      _ = fn2(x2, y2)
      self.assertEqual(mock_compile.call_count, 1)  # Second call hits the cache.
      self.assertLen(triton_fn._kernel_cache, 1)

      _ = fn3(x1, y1)
      self.assertEqual(mock_compile.call_count, 2)  # Third call misses (block size).
      self.assertLen(triton_fn._kernel_cache, 2)

  def test_kernel_cache_same_kernel_different_params(self):
    @triton.jit
    def silly_add_kernel(x_ptr, y_ptr, output_ptr):
      pid = tl.program_id(axis=0)
      tl.store(output_ptr + pid, tl.load(x_ptr + pid) + tl.load(y_ptr + pid))

    def silly_add(n):
      x, y = create_random_inputs([n])
      return jt.triton_call(
          x,
          y,
          kernel=silly_add_kernel,
          out_type=jax.typeof(x),
          grid=x.size,
      )

    triton_fn = jttl.TritonFunction(silly_add_kernel)
    self.assertEmpty(triton_fn._kernel_cache)

    with mock.patch.object(
        jttl.TritonFunction,
        "get_or_create_kernel",
        autospec=True,
        wraps=jttl.TritonFunction.get_or_create_kernel,
    ) as mock_get_or_create:
      _ = silly_add(42)
      self.assertEqual(mock_get_or_create.call_count, 1)
      self.assertLen(triton_fn._kernel_cache, 1)

      _ = silly_add(42)
      self.assertEqual(mock_get_or_create.call_count, 1)  # Hits Primitive cache.
      self.assertLen(triton_fn._kernel_cache, 1)

      _ = silly_add(43)
      # Third call differs in grid size and misses the Primitive cache, but hits
      # the internal kernel cache.
      self.assertEqual(mock_get_or_create.call_count, 2)
      self.assertLen(triton_fn._kernel_cache, 1)

  def test_callable_constexpr_and_cache(self):
    @triton.jit
    def add_fn(x, y):
      return x + y

    @triton.jit
    def mul_fn(x, y):
      return x * y

    @triton.jit
    def dispatch_kernel(
        x_ptr,
        y_ptr,
        output_ptr,
        FN: tl.constexpr,
        BLOCK_SIZE: tl.constexpr,
    ):
      offsets = tl.arange(0, BLOCK_SIZE)
      x = tl.load(x_ptr + offsets)
      y = tl.load(y_ptr + offsets)
      tl.store(output_ptr + offsets, FN(x, y))

    x, y = create_random_inputs([8])
    triton_fn = jttl.TritonFunction(dispatch_kernel)
    self.assertEmpty(triton_fn._kernel_cache)

    def call(fn):
      return jt.triton_call(
          x,
          y,
          kernel=dispatch_kernel,
          out_type=jax.typeof(x),
          grid=(1,),
          FN=fn,
          BLOCK_SIZE=8,
      )

    out_add = call(add_fn)
    np.testing.assert_array_equal(out_add, x + y)
    self.assertLen(triton_fn._kernel_cache, 1)

    out_mul = call(mul_fn)
    np.testing.assert_array_equal(out_mul, x * y)
    self.assertLen(triton_fn._kernel_cache, 2)

    # Calling again with the same callable should hit the cache.
    _ = call(add_fn)
    self.assertLen(triton_fn._kernel_cache, 2)

  def test_autotune(self):
    autotune_configs = [
        triton.Config({"BLOCK_SIZE": 32}, num_warps=1),
        triton.Config({"BLOCK_SIZE": 64}, num_warps=1),
        triton.Config({"BLOCK_SIZE": 64}, num_warps=2),
    ]
    kernel = triton.autotune(autotune_configs, key=("n_elements",))(add_kernel)

    x, y = create_random_inputs([1024])
    expected = x + y
    out = add(x, y, kernel=kernel)
    np.testing.assert_allclose(out, expected)

  def test_regression_issue_128(self):
    autotune_configs = [
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=1),
        triton.Config({"BLOCK_SIZE": 32}, num_warps=1),
    ]
    kernel = triton.autotune(autotune_configs, key=("n_elements",))(add_kernel)

    x, y = create_random_inputs([1024])
    expected = x + y

    # Keep alive so each iteration is written to an uninitialized buffer.
    outs = []
    for _ in range(10):
      outs.append(add(x, y, kernel=kernel))
      np.testing.assert_allclose(outs[-1], expected)

  def test_autotune_pre_hook_error(self):
    autotune_configs = [
        triton.Config({"BLOCK_SIZE": 32}, num_warps=1, pre_hook=lambda _: None),
    ]
    kernel = triton.autotune(autotune_configs, key=("n_elements",))(add_kernel)

    x, y = create_random_inputs([1024])
    with self.assertRaises(NotImplementedError):
      _ = add(x, y, kernel=kernel)

  def test_heuristics(self):
    heuristic_returned_values = []

    def heuristic_fn(args):
      heuristic_returned_values.append(args["K"] % args["BLOCK_SIZE_K"] == 0)
      return heuristic_returned_values[-1]

    heuristics = {"K_EXACTLY_DIVISIBLE_BY_BLOCK": heuristic_fn}
    kernel = triton.heuristics(heuristics)(matmul_kernel)

    def do_matmul(m, n, k):
      x, y = create_random_inputs([m, k], [k, n])
      return matmul(
          x,
          y,
          kernel=kernel,
          BLOCK_SIZE_M=32,
          BLOCK_SIZE_N=32,
          BLOCK_SIZE_K=32,
      )

    _ = do_matmul(m=128, n=128, k=128)
    _ = do_matmul(m=128, n=128, k=144)
    self.assertEqual(heuristic_returned_values, [True, False])

  def test_autotune_with_heuristics(self):
    heuristic_returned_values = []

    def heuristic_fn(args):
      heuristic_returned_values.append(args["K"] % args["BLOCK_SIZE_K"] == 0)
      return heuristic_returned_values[-1]

    heuristics = {"K_EXACTLY_DIVISIBLE_BY_BLOCK": heuristic_fn}
    autotune_configs = [
        triton.Config({"BLOCK_SIZE_K": 32}, num_warps=1),
        triton.Config({"BLOCK_SIZE_K": 64}, num_warps=1),
    ]
    kernel = triton.autotune(autotune_configs, key=("M", "N", "K"))(
        triton.heuristics(heuristics)(matmul_kernel)
    )

    def do_matmul(m, n, k):
      x, y = create_random_inputs([m, k], [k, n])
      return matmul(
          x,
          y,
          kernel=kernel,
          BLOCK_SIZE_M=32,
          BLOCK_SIZE_N=32,
      )

    _ = do_matmul(m=128, n=128, k=128)
    _ = do_matmul(m=128, n=128, k=160)
    self.assertEqual(heuristic_returned_values, [True, True, True, False])

  def test_heuristics_does_not_modify_autotune_configs(self):
    def heuristic_fn(args):
      return args["K"] % args["BLOCK_SIZE_K"] == 0

    heuristics = {"K_EXACTLY_DIVISIBLE_BY_BLOCK": heuristic_fn}
    autotune_config = triton.Config({"BLOCK_SIZE_K": 32}, num_warps=1)
    kernel = triton.autotune([autotune_config], key=("M", "N", "K"))(
        triton.heuristics(heuristics)(matmul_kernel)
    )

    def do_matmul(m, n, k):
      x, y = create_random_inputs([m, k], [k, n])
      return matmul(
          x,
          y,
          kernel=kernel,
          BLOCK_SIZE_M=32,
          BLOCK_SIZE_N=32,
      )

    _ = do_matmul(m=128, n=128, k=128)
    self.assertEqual(autotune_config.kwargs, {"BLOCK_SIZE_K": 32})

  def test_autotune_with_input_output_aliasing(self):
    autotune_configs = [
        triton.Config({"BLOCK_SIZE": 32}, num_warps=1),
        triton.Config({"BLOCK_SIZE": 64}, num_warps=1),
    ]
    kernel = triton.autotune(autotune_configs, key=("n_elements",))(add_inplace_kernel)

    x, y = create_random_inputs([1024])
    expected = x + y
    out = add(x, y, kernel=kernel, input_output_aliases={0: 0})
    np.testing.assert_allclose(out, expected)

  def test_autotune_with_ref_and_tuple(self):
    @triton.jit
    def inc_tuple_kernel(pair, n_elements, BLOCK_SIZE: tl.constexpr):
      a_ptr = pair[0]
      b_ptr = pair[1]
      pid = tl.program_id(axis=0)
      offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
      mask = offsets < n_elements
      a = tl.load(a_ptr + offsets, mask=mask)
      b = tl.load(b_ptr + offsets, mask=mask)
      tl.store(a_ptr + offsets, a + 1, mask=mask)
      tl.store(b_ptr + offsets, b + 2, mask=mask)

    autotune_configs = [
        triton.Config({"BLOCK_SIZE": 1}, num_warps=1),
        triton.Config({"BLOCK_SIZE": 8}, num_warps=1),
    ]
    kernel = triton.autotune(autotune_configs, key=("n_elements",))(
        inc_tuple_kernel
    )

    size = 8
    a = random.normal(random.key(0), [size])
    b = random.normal(random.key(1), [size])
    a_ref = jax.new_ref(a)
    b_ref = jax.new_ref(b)

    result = jt.triton_call(
        (a_ref, b_ref),
        size,
        kernel=kernel,
        out_type=(),
        grid=(size,),
    )
    self.assertEqual(result, ())
    np.testing.assert_array_equal(a_ref[...], a + 1)
    np.testing.assert_array_equal(b_ref[...], b + 2)

  def test_autodiff_exception(self):
    x, y = create_random_inputs([10, 100], dtype="float32")
    with self.assertRaisesRegex(
        NotImplementedError,
        r"jax_triton.triton_call does not support automatic differentiation.*"
        r"jax\.custom_jvp or jax\.custom_vjp.*",
    ):
      jax.grad(lambda x, y: jnp.sum(add(x, y, BLOCK_SIZE=32)))(x, y)

  def test_batching_exception(self):
    x, y = create_random_inputs([10, 100], dtype="float32")
    with self.assertRaisesRegex(
        NotImplementedError,
        r"jax_triton.triton_call does not support batching.*"
        r"jax\.custom_batching\.custom_vmap.*",
    ):
      jax.vmap(lambda x, y: add(x, y, BLOCK_SIZE=32))(x, y)

  def test_kernel_call_from_worker_thread(self):
    x, y = create_random_inputs([8])
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
      out = pool.submit(add, x, y, BLOCK_SIZE=8).result()
    np.testing.assert_array_equal(out, x + y)

  def test_has_side_effect_parameter(self):
    x, y = create_random_inputs([8])

    # Case 1: has_side_effect=True
    jaxpr_true = jax.make_jaxpr(
        lambda x, y: add(x, y, BLOCK_SIZE=8, has_side_effect=True)
    )(x, y)
    eqns_true = [
        e for e in jaxpr_true.eqns if e.primitive == jttl.triton_kernel_call_p
    ]
    self.assertLen(eqns_true, 1)
    self.assertTrue(eqns_true[0].params["has_side_effect"])

    # Case 2: has_side_effect=False (default)
    jaxpr_false = jax.make_jaxpr(lambda x, y: add(x, y, BLOCK_SIZE=8))(x, y)
    eqns_false = [
        e for e in jaxpr_false.eqns if e.primitive == jttl.triton_kernel_call_p
    ]
    self.assertLen(eqns_false, 1)
    self.assertFalse(eqns_false[0].params.get("has_side_effect", False))

  def test_triton_kernel_call_never_dced(self):
    x, y = create_random_inputs([8])
    jaxpr = jax.make_jaxpr(lambda x, y: add(x, y, BLOCK_SIZE=8))(x, y)

    # Verify that triton_kernel_call_p is NOT removed by JAX-level DCE
    # even when its outputs are completely unused (instantiation=False).
    dce_jaxpr, _ = pe.dce_jaxpr(jaxpr.jaxpr, [False])
    dce_eqns = [
        e for e in dce_jaxpr.eqns if e.primitive == jttl.triton_kernel_call_p
    ]
    self.assertLen(dce_eqns, 1)

  def test_backend_options(self):
    x, y = create_random_inputs([8])
    out = add(x, y, backend_options={"num_warps": 2}, BLOCK_SIZE=8)
    expected = x + y
    np.testing.assert_allclose(out, expected)

  def test_backend_options_conflict(self):
    x, y = create_random_inputs([8])
    with self.assertRaisesRegex(ValueError, "backend_options"):
      add(x, y, num_warps=4, backend_options={"num_warps": 2}, BLOCK_SIZE=8)

  def test_non_hashable_backend_options(self):
    x, y = create_random_inputs([8])
    with self.assertRaisesRegex(
        TypeError, r"backend_options\['extern_libs'\] must be hashable"
    ):
      add(
          x,
          y,
          backend_options={"extern_libs": {"libdevice": "/path"}},
          BLOCK_SIZE=8,
      )

  def test_tuple_tensor_args(self):
    @triton.jit
    def add_tuple_kernel(
        x_ptr, yz, n_elements, output_ptr, BLOCK_SIZE: tl.constexpr
    ):
      y_ptr = yz[0]
      z_ptr = yz[1]
      pid = tl.program_id(axis=0)
      block_start = pid * BLOCK_SIZE
      offsets = block_start + tl.arange(0, BLOCK_SIZE)
      mask = offsets < n_elements
      x = tl.load(x_ptr + offsets, mask=mask)
      y = tl.load(y_ptr + offsets, mask=mask)
      z = tl.load(z_ptr + offsets, mask=mask)
      output = x + y + z
      tl.store(output_ptr + offsets, output, mask=mask)

    size = 8
    x = jnp.ones(size, dtype=jnp.float32)
    y = jnp.ones(size, dtype=jnp.float32) * 2
    z = jnp.ones(size, dtype=jnp.float32) * 3
    out = jax.jit(
        lambda x, y, z: jt.triton_call(
            x,
            (y, z),
            size,
            kernel=add_tuple_kernel,
            out_type=jax.ShapeDtypeStruct((size,), jnp.float32),
            grid=(1,),
            BLOCK_SIZE=size,
        )
    )(x, y, z)
    np.testing.assert_allclose(out, x + y + z)

  def test_nested_tuple_tensor_args(self):
    @triton.jit
    def add_nested_tuple_kernel(
        x_ptr, ab_c, output_ptr, BLOCK_SIZE: tl.constexpr
    ):
      ab = ab_c[0]
      c_ptr = ab_c[1]
      a_ptr = ab[0]
      b_ptr = ab[1]
      pid = tl.program_id(axis=0)
      block_start = pid * BLOCK_SIZE
      offsets = block_start + tl.arange(0, BLOCK_SIZE)
      mask = offsets < 8
      x = tl.load(x_ptr + offsets, mask=mask)
      a = tl.load(a_ptr + offsets, mask=mask)
      b = tl.load(b_ptr + offsets, mask=mask)
      c = tl.load(c_ptr + offsets, mask=mask)
      output = x + a + b + c
      tl.store(output_ptr + offsets, output, mask=mask)

    size = 8
    x = jnp.ones(size, dtype=jnp.float32)
    a = jnp.ones(size, dtype=jnp.float32) * 2
    b = jnp.ones(size, dtype=jnp.float32) * 3
    c = jnp.ones(size, dtype=jnp.float32) * 4
    out = jax.jit(
        lambda x, a, b, c: jt.triton_call(
            x,
            ((a, b), c),
            kernel=add_nested_tuple_kernel,
            out_type=jax.ShapeDtypeStruct((size,), jnp.float32),
            grid=(1,),
            BLOCK_SIZE=size,
        )
    )(x, a, b, c)
    np.testing.assert_allclose(out, x + a + b + c)

  def test_scalar_before_tuple(self):
    @triton.jit
    def scale_add_kernel(scale, xy, output_ptr, BLOCK_SIZE: tl.constexpr):
      x_ptr = xy[0]
      y_ptr = xy[1]
      pid = tl.program_id(axis=0)
      offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
      mask = offsets < BLOCK_SIZE
      x = tl.load(x_ptr + offsets, mask=mask)
      y = tl.load(y_ptr + offsets, mask=mask)
      tl.store(output_ptr + offsets, scale * (x + y), mask=mask)

    size = 8
    x = jnp.ones(size, dtype=jnp.float32)
    y = jnp.ones(size, dtype=jnp.float32) * 2
    out = jax.jit(
        lambda x, y: jt.triton_call(
            3.0,
            (x, y),
            kernel=scale_add_kernel,
            out_type=jax.ShapeDtypeStruct((size,), jnp.float32),
            grid=(1,),
            BLOCK_SIZE=size,
        )
    )(x, y)
    np.testing.assert_allclose(out, 3.0 * (x + y))

  def test_tuple_with_mixed_dtypes(self):
    @triton.jit
    def mixed_kernel(xy, output_ptr, BLOCK_SIZE: tl.constexpr):
      x_ptr = xy[0]
      y_ptr = xy[1]
      pid = tl.program_id(axis=0)
      offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
      mask = offsets < BLOCK_SIZE
      x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
      y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
      tl.store(output_ptr + offsets, x + y, mask=mask)

    size = 8
    x = jnp.ones(size, dtype=jnp.float32)
    y = jnp.ones(size, dtype=jnp.float16) * 2
    out = jax.jit(
        lambda x, y: jt.triton_call(
            (x, y),
            kernel=mixed_kernel,
            out_type=jax.ShapeDtypeStruct((size,), jnp.float32),
            grid=(1,),
            BLOCK_SIZE=size,
        )
    )(x, y)
    np.testing.assert_allclose(out, jnp.float32(3.0) * jnp.ones(size))

  def test_constexpr_defaults(self):

    @triton.jit
    def add_default_kernel(
        x_ptr, y_ptr, n_elements, output_ptr,
        BLOCK_SIZE: tl.constexpr = 8,
    ):
      pid = tl.program_id(axis=0)
      block_start = pid * BLOCK_SIZE
      offsets = block_start + tl.arange(0, BLOCK_SIZE)
      mask = offsets < n_elements
      x = tl.load(x_ptr + offsets, mask=mask)
      y = tl.load(y_ptr + offsets, mask=mask)
      tl.store(output_ptr + offsets, x + y, mask=mask)

    x = jnp.arange(8, dtype=jnp.float32)
    y = jnp.ones(8, dtype=jnp.float32)

    out = jt.triton_call(
        x,
        y,
        x.size,
        kernel=add_default_kernel,
        out_type=jax.typeof(x),
        grid=(1,),
    )
    np.testing.assert_allclose(out, x + y)

    # Explicit override.
    out = jt.triton_call(
        x,
        y,
        x.size,
        kernel=add_default_kernel,
        out_type=jax.typeof(x),
        grid=(1,),
        BLOCK_SIZE=8,
    )
    np.testing.assert_allclose(out, x + y)

  def test_cost_estimate(self):
    x, y = create_random_inputs([8])
    cost = {"flops": 123, "bytes_accessed": 456}

    def add_with_cost(x, y):
      default_grid = lambda meta: triton.cdiv(x.size, meta["BLOCK_SIZE"])
      return jt.triton_call(
          x,
          y,
          x.size,
          kernel=add_kernel,
          out_type=jax.typeof(x),
          grid=default_grid,
          BLOCK_SIZE=8,
          cost_estimate=cost,
      )

    hlo = jax.jit(add_with_cost).lower(x, y).compiler_ir("hlo").as_hlo_text()
    self.assertIn("cost_estimate_json", hlo)
    self.assertRegex(hlo, r"cost_estimate_json\s*=\s*.*flops\\22\s*:\s*123")
    self.assertRegex(
        hlo, r"cost_estimate_json\s*=\s*.*bytes_accessed\\22\s*:\s*456"
    )

  @parameterized.product(shape=[(32, 32), (8, 64), (16, 128)])
  def test_device_side_tma_copy(self, shape):
    if jaxlib_version <= (0, 11, 0):
      self.skipTest("Device-side TMA scratch requires a newer jaxlib")
    if not jtu.is_cuda_compute_capability_at_least("9.0"):
      self.skipTest("TMA requires Hopper or newer")

    @triton.jit
    def tma_copy_kernel(in_ptr, out_ptr, M: tl.constexpr, N: tl.constexpr):
      desc_in = tl.make_tensor_descriptor(
          in_ptr, shape=[M, N], strides=[N, 1], block_shape=[M, N]
      )
      desc_out = tl.make_tensor_descriptor(
          out_ptr, shape=[M, N], strides=[N, 1], block_shape=[M, N]
      )
      block = desc_in.load([0, 0])
      desc_out.store([0, 0], block)

    M, N = shape
    input = random.uniform(random.key(0), (M, N), dtype=jnp.float32)
    output = jt.triton_call(
        input,
        kernel=tma_copy_kernel,
        out_type=jax.typeof(input),
        grid=1,
        M=M,
        N=N,
    )
    np.testing.assert_array_equal(output, input)

  @parameterized.product(
      shape=[(32, 32), (8, 64), (16, 128)],
      dtype=[
          jnp.float32,
          jnp.float16,
          jnp.float8_e5m2,
          jnp.int32,
          jnp.int8,
          jnp.uint16,
      ],
      padding=["zero", "nan"],
      round_f32_to_tf32=[False, True],
  )
  def test_host_side_tma_copy(self, shape, dtype, padding, round_f32_to_tf32):
    if jaxlib_version <= (0, 11, 0):
      self.skipTest("Host-side TMA descriptors require a newer jaxlib")
    if not jtu.is_cuda_compute_capability_at_least("9.0"):
      self.skipTest("TMA requires Hopper or newer")
    if padding == "nan" and (
        not jnp.issubdtype(dtype, jnp.floating) or jnp.dtype(dtype).itemsize < 2
    ):
      self.skipTest(
          "nan padding is only supported for floating point dtypes >=16-bit"
      )
    if round_f32_to_tf32 and dtype != jnp.float32:
      self.skipTest("round_f32_to_tf32 is only supported for float32")

    @triton.jit
    def tma_copy_kernel(in_desc, out_ptr, M: tl.constexpr, N: tl.constexpr):
      block = in_desc.load([0, 0])
      offs = tl.arange(0, M)[:, None] * N + tl.arange(0, N)[None, :]
      tl.store(out_ptr + offs, block)

    M, N = shape
    input = random.uniform(random.key(0), (M, N), dtype=jnp.float32)
    input = input.astype(dtype)
    in_desc = jt.TensorDescriptor.from_array(
        input,
        block_shape=[M, N],
        padding=padding,
        round_f32_to_tf32=round_f32_to_tf32,
    )
    output = jt.triton_call(
        in_desc,
        kernel=tma_copy_kernel,
        out_type=jax.typeof(input),
        grid=1,
        M=M,
        N=N,
    )
    if round_f32_to_tf32:
      expected = jnp.float32(
          jax.lax.reduce_precision(input, exponent_bits=8, mantissa_bits=10)
      )
    else:
      expected = input
    np.testing.assert_array_equal(output, expected)


if __name__ == "__main__":
  os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = "0.5"
  absltest.main()
