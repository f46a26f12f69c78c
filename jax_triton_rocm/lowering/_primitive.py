"""`triton_kernel_p`: the primitive a `triton_call` binds.

Its operands are the call's arrays; everything else (the kernel, scalars, grid, options) is a
static parameter. The GPU lowering rules are registered per platform by `_plugin`; the CPU rule
runs the kernel in Triton's interpreter, on the host (`_interpret`).
"""

from __future__ import annotations

import functools

import jax
from jax.interpreters import ad, batching, mlir

# jax.extend.core.Primitive is this class; importing jax.extend also imports Pallas (40 ms),
# too much for a module JAX imports at start-up.
from jax._src.core import Primitive

from jax._src import dispatch

from jax_triton_rocm.api import _batching

triton_kernel_p = Primitive("triton_kernel")
triton_kernel_p.multiple_results = True
triton_kernel_p.def_impl(functools.partial(dispatch.apply_primitive, triton_kernel_p))


@triton_kernel_p.def_abstract_eval
def _abstract_eval(*avals, out_shapes, **_):
    del avals
    return [jax.core.ShapedArray(s.shape, s.dtype) for s in out_shapes]


def _kernel_label(params) -> str:
    kernel = params.get("kernel")
    return params.get("name") or getattr(kernel, "__name__", None) or repr(kernel)


def _no_jvp(primals, tangents, **params):
    del primals, tangents
    raise NotImplementedError(
        f"jax.grad / jax.jvp of triton_call (kernel {_kernel_label(params)}) is not supported: "
        f"JAX cannot differentiate through a Triton kernel. Wrap the call in a function with "
        f"jax.custom_vjp (or jax.custom_jvp) and give it a backward pass, which may itself be a "
        f"triton_call.")


ad.primitive_jvps[triton_kernel_p] = _no_jvp
batching.primitive_batchers[triton_kernel_p] = functools.partial(_batching.batch_rule,
                                                                triton_kernel_p)


def _cpu_lowering(ctx, *args, **params):
    from jax_triton_rocm.interpret import _interpret  # imports Triton: not at JAX's start-up

    return _interpret.lower(ctx, *args, **params)


mlir.register_lowering(triton_kernel_p, _cpu_lowering, platform="cpu")
