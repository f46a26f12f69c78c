"""`triton_kernel_p`: the primitive a `triton_call` binds.

Its operands are the call's arrays; everything else (the kernel, scalars, grid, options) is its
one static parameter, `spec`, a `KernelCallSpec`. JAX never drops an equation of it
(`_keep_call`). The lowering rules are registered per platform by `_rules` (the CPU's runs the
kernel in Triton's interpreter); the `jax.vmap` rule is `api._batching`'s.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
from jax.interpreters import ad
from jax.interpreters import partial_eval as pe

# jax.extend.core.Primitive is this class; importing jax.extend also imports Pallas (40 ms),
# too much for a module JAX imports at start-up.
from jax._src.core import Primitive

from jax._src import dispatch

from jax_triton_rocm.launch._spec import KernelCallSpec

triton_kernel_p = Primitive("triton_kernel")
"""The JAX primitive that `triton_call` binds: its one parameter, `spec`, is the frozen
`KernelCallSpec` of the call (kernel, grid, outputs, aliases, options); its results are the
call's outputs. Lowering rules are registered for `cuda`, `rocm` (`register`) and `cpu` (Triton's
interpreter); `jax.vmap` batches it, `jax.grad` raises. Libraries with primitives of their own use
`triton_call_lowering` instead of binding it."""
triton_kernel_p.multiple_results = True
triton_kernel_p.def_impl(functools.partial(dispatch.apply_primitive, triton_kernel_p))


@triton_kernel_p.def_abstract_eval
def _abstract_eval(*avals, spec: KernelCallSpec):
    del avals
    return [jax.core.ShapedArray(s.shape, s.dtype) for s in spec.out_shapes]


def _no_jvp(primals, tangents, *, spec: KernelCallSpec):
    del primals, tangents
    raise NotImplementedError(
        f"jax.grad / jax.jvp of triton_call (kernel {spec.name}) is not supported: "
        f"JAX cannot differentiate through a Triton kernel. Wrap the call in a function with "
        f"jax.custom_vjp (or jax.custom_jvp) and give it a backward pass, which may itself be a "
        f"triton_call.")


ad.primitive_jvps[triton_kernel_p] = _no_jvp


def _keep_call(*arguments: Any) -> tuple[list[bool], Any]:
    """JAX's dead-code elimination keeps every call and its operands, even with no result used:
    a kernel may write memory JAX does not see (as jax-triton 0.4). XLA still drops a call
    whose results go unused unless it has `has_side_effect`.

    JAX passes (used outputs, equation), or from 0.12 (used outputs, live inputs, equation):
    the equation comes last in both.
    """
    eqn = arguments[-1]
    return [True] * len(eqn.invars), eqn


pe.dce_rules[triton_kernel_p] = _keep_call
