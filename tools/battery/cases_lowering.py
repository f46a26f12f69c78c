"""Battery cases for `triton_call_lowering` (a library primitive's lowering rule), and for
constexprs named like an argument of `triton_call` in both APIs."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import jax_triton_rocm as jtr
from harness import (ARCH, N, X, accept, either, first_launch, library_route, lower, primitive,
                     refuse, scale_kernel, zeroed_bytes)
from named_kernels import BY_NAME

G = "triton_call_lowering"
CONSTEXPRS = {"n": N, "SCALE": 2.0, "BLOCK": 256}


def scale_rule(*, kernel=scale_kernel, operands=None, **call):
    """A lowering rule calling scale_kernel (out = x * SCALE) with the call's settings."""
    settings = dict(grid=(N // 256,), constexprs=CONSTEXPRS)
    settings.update(call)

    def rule(ctx, *xs):
        args = operands(ctx, xs) if operands is not None else xs
        return jtr.triton_call_lowering(ctx, kernel, *args, **settings)

    return rule


def route(route_name: str, **call):
    return library_route(route_name, scale_rule(**call))


def doubled(out) -> bool:
    return np.allclose(out, 2.0 * np.arange(N))


def _flags_and_names():
    return [
        refuse("debug='yes' [sm_90]", G, route("sm_90", debug="yes"), "debug", "'yes'",
               from_issue="silent"),
        refuse("debug='no' [gfx942]", G, route("gfx942", debug="no"), "debug", "'no'",
               from_issue="silent"),
        refuse("debug=1 [cpu]", G, route("cpu", debug=1), "debug", "1"),
        refuse("enable_fp_fusion='false'", G, route("sm_90", enable_fp_fusion="false"),
               "enable_fp_fusion", "'false'", from_issue="unclear"),
        refuse("enable_fp_fusion=0 [gfx942]", G, route("gfx942", enable_fp_fusion=0),
               "enable_fp_fusion", "0", from_issue="unclear"),
        accept("enable_fp_fusion=np.bool_(True), a kernel not yet in Triton's cache", G,
               route("sm_90", enable_fp_fusion=np.bool_(True),
                     constexprs={**CONSTEXPRS, "SCALE": 3.0})),
        refuse("name=5", G, route("sm_90", name=5), "name", "5", from_issue="unclear"),
        refuse("name=5 [cpu]", G, route("cpu", name=5), "name", "5", from_issue="unclear"),
        either("name=None", G, route("gfx942", name=None), "name", "None"),
        accept("name='scale v2'", G, route("sm_90", name="scale v2"),
               check=lambda calls: calls[0].summary()["name"] == "scale v2"),
        accept("debug=True [sm_90]", G, route("sm_90", debug=True)),
        refuse("misspelt input_output_alias=", G, route("sm_90", input_output_alias={0: 0}),
               "input_output_alias", "input_output_aliases", from_issue="unclear"),
        refuse("waves_per_eu=-1 [gfx942]", G, route("gfx942", waves_per_eu=-1), "waves_per_eu",
               "-1"),
        refuse("maxnreg=0 [sm_90]", G, route("sm_90", maxnreg=0), "maxnreg", "0"),
        refuse("kpack=3 [gfx942]", G, route("gfx942", kpack=3), "kpack", "3"),
    ]


def _operands_and_constexprs():
    avals = lambda ctx, xs: ctx.avals_in  # noqa: E731  (what the rule got, as abstract values)
    return [
        refuse("avals instead of operands", G, route("sm_90", operands=avals),
               "array_args|operand", "ShapedArray|aval", from_issue="unclear"),
        refuse("avals instead of operands [cpu]", G, route("cpu", operands=avals),
               "array_args|operand", "ShapedArray|aval", from_issue="unclear"),
        refuse("one operand passed twice", G, route("sm_90", operands=lambda ctx, xs: xs * 2),
               "array_args", "2"),
        refuse("kernel=None", G, route("sm_90", kernel=None), "kernel", "None"),
        refuse("constexprs as a list of pairs", G,
               route("sm_90", constexprs=list(CONSTEXPRS.items())), "constexprs", "[("),
        refuse("constexprs naming BLOCKK", G, route("sm_90", constexprs={**CONSTEXPRS,
                                                                          "BLOCKK": 1}),
               "BLOCKK"),
        refuse("constexprs without BLOCK", G,
               route("gfx942", constexprs={"n": N, "SCALE": 2.0}), "BLOCK"),
        refuse("constexprs={'num_warps': 4}", G,
               route("sm_90", constexprs={**CONSTEXPRS, "num_warps": 4}), "num_warps"),
        refuse("constexprs naming a pointer parameter", G,
               route("sm_90", constexprs={**CONSTEXPRS, "x_ptr": 0}), "x_ptr"),
        accept("NumPy constexprs, cold cache [sm_90]", G, route("sm_90", constexprs={
            "n": np.int32(N), "SCALE": np.float32(4.0), "BLOCK": np.int64(256)}),
               from_issue="unclear"),
        accept("NumPy constexprs, cold cache [gfx942]", G, route("gfx942", constexprs={
            "n": np.int32(N), "SCALE": np.float32(8.0), "BLOCK": np.int64(256)}),
               from_issue="unclear"),
        accept("NumPy constexprs [cpu]", G, route("cpu", constexprs={
            "n": np.int32(N), "SCALE": np.float32(2.0), "BLOCK": np.int64(256)}),
               check=doubled, from_issue="unclear"),
        accept("a plain call [cpu]", G, route("cpu"), check=doubled),
        refuse("a complex64 result", G, library_route(
            "sm_90", scale_rule(), out=jax.ShapeDtypeStruct((N,), jnp.complex64)),
               "result 0", "complex64"),
    ]


def _launch():
    return [
        either("grid=[4]", G, route("sm_90", grid=[4]), "grid", "[4]",
               check=lambda calls: first_launch(calls)["grid"] == (4, 1, 1)),
        refuse("grid callable reading a missing key", G,
               route("gfx942", grid=lambda meta: (N // meta["BLOCKSIZE"],)), "grid", "BLOCKSIZE",
               from_issue="unclear"),
        refuse("grid callable returning 0", G, route("sm_90", grid=lambda meta: 0), "grid", "0"),
        refuse("num_warps=6", G, route("sm_90", num_warps=6), "num_warps", "6"),
        refuse("num_ctas=0", G, route("sm_90", num_ctas=0), "num_ctas", "0"),
        refuse("num_stages=0 [gfx942]", G, route("gfx942", num_stages=0), "num_stages", "0"),
        refuse("num_ctas=3 [sm_90]", G, route("sm_90", num_ctas=3), "num_ctas", "3",
               from_issue="unclear"),
    ]


def in_place_rule(**call):
    """scale_kernel writing its result through the operand's pointer (result 0 aliased to
    operand 0, no pointer of its own)."""
    settings = dict(grid=(N // 256,), constexprs=CONSTEXPRS)
    settings.update(call)
    return lambda ctx, x, y: jtr.triton_call_lowering(ctx, scale_kernel, x, y, **settings)


def _aliases_and_zeroing():
    aliased_text = lambda **call: lambda: _lowered_text(in_place_rule(**call))  # noqa: E731
    return [
        accept("input_output_aliases={np.int64(1): 0}", G,
               aliased_text(input_output_aliases={np.int64(1): 0}),
               check=lambda text: "output_operand_alias" in text, from_issue="unclear"),
        refuse("input_output_aliases={True: 0}", G,
               aliased_text(input_output_aliases={True: 0}), "input_output_aliases", "True"),
        refuse("input_output_aliases={0: 1} with one result", G,
               route("sm_90", input_output_aliases={0: 1}), "input_output_aliases", "1"),
        accept("zeroed_outputs=(np.int64(0),)", G, route("sm_90", zeroed_outputs=(np.int64(0),)),
               check=lambda calls: zeroed_bytes(calls)[-1] == 4 * N, from_issue="unclear"),
        refuse("zeroed_outputs=[0.0]", G, route("sm_90", zeroed_outputs=[0.0]), "zeroed_outputs",
               "0.0"),
        refuse("zeroed_outputs=5 (an int)", G, route("gfx942", zeroed_outputs=5),
               "zeroed_outputs", "5"),
    ]


def _lowered_text(rule) -> str:
    prim = primitive(lambda x, y: jax.core.ShapedArray(x.shape, x.dtype), rule)
    with jtr.target_arch(cuda=ARCH["cuda"]):
        return jax.jit(prim.bind).trace(X, X).lower(lowering_platforms=("cuda",)).as_text()


def _named_like_call_arguments():
    cases = []
    for name, kernel in BY_NAME.items():
        call = lambda x, name=name, kernel=kernel: jtr.triton_call(  # noqa: E731
            x, kernel=kernel, out_shape=x, grid=(N // 256,), **{name: 2})
        cases.append(refuse(f"constexpr named {name!r} through triton_call", "triton_call",
                            lambda call=call: lower("cuda", call, X), f"'{name}'", "triton_call",
                            from_issue="unclear"))
        cases.append(accept(f"constexpr named {name!r} through triton_call_lowering", G,
                            route("sm_90", kernel=kernel, constexprs={name: 2})))
    return cases


def cases():
    return (_flags_and_names() + _operands_and_constexprs() + _launch() + _aliases_and_zeroing()
            + _named_like_call_arguments())
