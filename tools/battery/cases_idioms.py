"""Battery cases for kernels written as Triton's tutorials write them (issue 27): config pre_hooks
setting descriptor block shapes, keyword scalars in prune functions and perf models, parameters
filled by name (`constexprs=`, `operands=`), and arguments that do not line up with the kernel's
parameters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import triton

import jax_triton_rocm as jtr
from harness import X, accept, add_kernel, either, interpret, lower, ramp, refuse
from named_kernels import BY_NAME
from tests.support import idiom_kernels as ik

G = "idioms"
A = jax.ShapeDtypeStruct((64, 48), jnp.float16)
B = jax.ShapeDtypeStruct((48, 96), jnp.float16)
Q = jax.ShapeDtypeStruct((2, 48, 16), jnp.float32)


def matmul_with(*hooks, platform="cuda"):
    """A run lowering the descriptor matmul with one config per hook."""
    kernel = triton.autotune(configs=[
        triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, pre_hook=hook)
        for hook in hooks], key=[])(ik.desc_matmul_kernel.fn)
    return lambda: lower(platform, lambda a, b: ik.desc_matmul(a, b, kernel), A, B)


def attention_with(**prune_by):
    kernel = triton.autotune(configs=ik.ATTENTION_CONFIGS, key=[],
                             prune_configs_by=prune_by)(ik.attention_kernel.fn)
    return lambda: lower("cuda", lambda q, k, v: ik.attention(q, k, v, 0.5, kernel), Q, Q, Q)


def tma_blocks(calls) -> list:
    message = calls[0].message
    configs = ([c.kernel_call for c in message.autotuned_kernel_call.configs]
               if message.WhichOneof("value") == "autotuned_kernel_call"
               else [message.kernel_call])
    return [[tuple(p.tensor_descriptor.nvidia.block_shape) for p in call.parameters
             if p.WhichOneof("value") == "tensor_descriptor"] for call in configs]


def kept(calls) -> list[str]:
    return [c.description for c in calls[0].message.autotuned_kernel_call.configs]


def _pre_hooks():
    return [
        either("pre_hooks setting descriptor block shapes [sm_90]", G,  # refused before jax 0.11.1
               lambda: lower("cuda", ik.desc_matmul, A, B), "TensorDescriptor", "0.11.1",
               check=lambda calls: tma_blocks(calls) == [
                   [(m, k), (k, n)] for m, n, k in ik.MATMUL_TILES]),
        accept("pre_hooks setting descriptor block shapes [gfx942]", G,
               lambda: lower("rocm", ik.desc_matmul, A, B)),
        accept("pre_hooks setting descriptor block shapes [cpu]", G,
               lambda: interpret(ik.desc_matmul, jnp.ones(A.shape, A.dtype),
                                 jnp.ones(B.shape, B.dtype)),
               check=lambda out: np.allclose(out, 48.0)),
        refuse("pre_hook zeroing an output", G,
               matmul_with(lambda nargs: nargs["c_ptr"].zero_()), "pre_hook", "zero_",
               "zeroed_outputs"),
        refuse("pre_hook reading an array's data", G,
               matmul_with(lambda nargs: float(nargs["a_desc"].base[0, 0])), "pre_hook",
               "nargs['a_desc'].base"),
        refuse("pre_hook setting a descriptor's shape", G,
               matmul_with(lambda nargs: setattr(nargs["a_desc"], "shape", [1, 1])), "pre_hook",
               "shape", "block_shape"),
        refuse("pre_hook setting block_shape [48, 32]", G,
               matmul_with(lambda nargs: setattr(nargs["a_desc"], "block_shape", [48, 32])),
               "pre_hook", "[48, 32]", "power of two"),
        refuse("pre_hook reading a missing name", G,
               matmul_with(lambda nargs: nargs["desc_q"]), "pre_hook", "desc_q"),
    ]


def _keyword_scalars():
    return [
        accept("early_config_prune reading kwargs['N_CTX'] given by keyword", G,
               attention_with(early_config_prune=ik.prune_invalid_configs),
               check=lambda calls: kept(calls) == [str(c) for c in ik.ATTENTION_CONFIGS[:2]]),
        refuse("early_config_prune reading named_args['N_CTX'] given by keyword", G,
               attention_with(early_config_prune=lambda configs, named_args, **kwargs: [
                   c for c in configs if c.kwargs["BLOCK_M"] <= named_args["N_CTX"]]),
               "early_config_prune", "'N_CTX'", "kwargs"),
        accept("perf_model with top_k=2", G,
               attention_with(perf_model=lambda **kw: kw["BLOCK_M"] * kw["N_CTX"], top_k=2),
               check=lambda calls: kept(calls) == [str(c) for c in ik.ATTENTION_CONFIGS[:2]]),
        refuse("perf_model returning a str", G,
               attention_with(perf_model=lambda **kw: "fast", top_k=1), "perf_model", "'fast'"),
        refuse("top_k='2'", G, attention_with(perf_model=lambda **kw: 1.0, top_k="2"), "top_k",
               "'2'"),
    ]


def _named_parameters():
    grid_kernel = BY_NAME["grid"]

    def scaled(**call):
        return lambda: lower("cuda", lambda x: jtr.triton_call(
            x, kernel=grid_kernel, out_type=x, grid=(4,), **call), X)

    cases = [
        accept(f"constexpr named {name!r} through triton_call(constexprs=...) [cpu]", G,
               lambda kernel=kernel: interpret(lambda x: jtr.triton_call(
                   x, kernel=kernel, out_type=x, grid=(4,), constexprs={kernel.arg_names[2]: 2}),
                   ramp()), check=lambda out: np.allclose(out, 2 * np.arange(1024)))
        for name, kernel in BY_NAME.items()]
    return cases + [
        accept("softmax with num_stages in constexprs [cpu]", G,
               lambda: interpret(ik.softmax, ramp().reshape(16, 64)),
               check=lambda out: np.allclose(out.sum(axis=1), 1.0)),
        refuse("constexprs naming no parameter", G, scaled(constexprs={"gird": 2}), "constexprs",
               "'gird'", "grid"),
        refuse("constexprs holding an array", G, scaled(constexprs={"grid": jnp.ones(2)}),
               "constexprs", "'grid'", "operands"),
        refuse("operands filling a tl.constexpr", G, scaled(operands={"grid": 2}), "operands",
               "'grid'", "constexprs"),
        refuse("constexprs and operands naming one parameter", G,
               scaled(constexprs={"grid": 2}, operands={"grid": 2}), "'grid'", "once"),
        refuse("constexprs=[('grid', 2)] (not a dict)", G, scaled(constexprs=[("grid", 2)]),
               "constexprs", "dict"),
    ]


def _arguments_out_of_line():
    def port(platform):
        call = lambda x, y: jtr.triton_call(x, y, x.size, kernel=ik.middle_out_add_kernel,  # noqa
                                            out_shape=x, grid=(4,), BLOCK=256)
        if platform == "cpu":
            return lambda: interpret(call, ramp(), ramp())
        return lambda: lower(platform, call, X, X)

    return [
        refuse("the length left out (add_kernel(x, y, out_shape=...))", G,
               lambda: lower("cuda", lambda x, y: jtr.triton_call(
                   x, y, kernel=add_kernel, out_shape=x, grid=(4,), BLOCK=256), X, X),
               "'n'", "Most likely missing"),
        *[refuse(f"an int on an output's pointer, the output on the int [{route}]", G,
                 port(platform), "'out_ptr'", "1024", "'n'", "output 0")
          for route, platform in (("sm_90", "cuda"), ("gfx942", "rocm"), ("cpu", "cpu"))],
    ]


def cases():
    return _pre_hooks() + _keyword_scalars() + _named_parameters() + _arguments_out_of_line()
