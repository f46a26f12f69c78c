"""Battery cases for `triton_call`: grids, launch settings, flags, aliases and zeroed outputs
(its values, arrays and constexprs are in `cases_values`)."""

from __future__ import annotations

import functools

import numpy as np

import jax_triton_rocm as jtr
from harness import (N, X, accept, accumulate_kernel, add, either, first_launch, interpret,
                     lower, lower_text, ramp, refuse, zeroed_bytes)

G = "triton_call"


def on(route: str, fn, *args):
    """A run of `fn` lowered for "sm_90"/"gfx942", or run in the interpreter ("cpu")."""
    if route == "cpu":
        return lambda: interpret(fn, *[ramp() if a is X else a for a in args])
    platform = {"sm_90": "cuda", "gfx942": "rocm"}[route]
    return lambda: lower(platform, fn, *args)


def add_with(**call):
    return lambda x, y: add(x, y, **call)


def grid_is(expected):
    return lambda calls: first_launch(calls)["grid"] == expected


def _grids():
    return [
        either("grid=[4] (a list)", G, on("sm_90", add_with(grid=[4]), X, X), "grid", "[4]",
               "tuple", check=grid_is((4, 1, 1)), from_issue="unclear"),
        either("grid=[4] (a list) [cpu]", G, on("cpu", add_with(grid=[4]), X, X), "grid", "[4]",
               "tuple", from_issue="unclear"),
        refuse("grid=(-1,)", G, on("sm_90", add_with(grid=(-1,)), X, X), "grid", "-1"),
        refuse("grid=(True,)", G, on("sm_90", add_with(grid=(True,)), X, X), "grid", "True"),
        refuse("grid=None", G, on("sm_90", add_with(grid=None), X, X), "grid", "None"),
        accept("grid=(np.int64(4),)", G, on("sm_90", add_with(grid=(np.int64(4),)), X, X),
               check=grid_is((4, 1, 1))),
        refuse("grid callable reading a missing key", G,
               on("sm_90", add_with(grid=lambda meta: (N // meta["BLOCKSIZE"],)), X, X),
               "grid", "BLOCKSIZE", from_issue="unclear"),
        refuse("grid callable reading a missing key [cpu]", G,
               on("cpu", add_with(grid=lambda meta: (N // meta["BLOCKSIZE"],)), X, X),
               "grid", "BLOCKSIZE", from_issue="unclear"),
        refuse("grid callable returning 4.0", G,
               on("gfx942", add_with(grid=lambda m: (4.0,)), X, X), "grid", "4.0"),
        refuse("grid callable returning 4 sizes", G,
               on("sm_90", add_with(grid=lambda m: (1, 1, 1, 1)), X, X), "grid", "(1, 1, 1, 1)"),
        refuse("grid callable dividing by zero", G,
               on("sm_90", add_with(grid=lambda m: (N // 0,)), X, X), "grid", "ZeroDivisionError"),
        either("grid callable returning a list", G,
               on("gfx942", add_with(grid=lambda m: [4]), X, X), "grid", "[4]",
               check=grid_is((4, 1, 1))),
        refuse("grid x times the block's threads above 2**32-1 on ROCm [gfx942]", G,
               on("gfx942", add_with(grid=(2**26,)), X, X), "grid", str(2**26),
               from_issue="silent"),
        refuse("grid x of 2**26 with 1024-thread blocks on ROCm [gfx942]", G,
               on("gfx942", add_with(grid=(2**26,), num_warps=16), X, X), "grid", str(2**26),
               from_issue="silent"),
        refuse("grid=(0, 4)", G, on("gfx942", add_with(grid=(0, 4)), X, X), "grid", "0"),
    ]


def _launch_settings():
    return [
        accept("num_warps=np.int64(8)", G, on("sm_90", add_with(num_warps=np.int64(8)), X, X),
               check=lambda calls: first_launch(calls)["num_warps"] == 8),
        refuse("num_warps=2.0", G, on("sm_90", add_with(num_warps=2.0), X, X), "num_warps", "2.0"),
        refuse("num_warps=True", G, on("sm_90", add_with(num_warps=True), X, X), "num_warps",
               "True"),
        refuse("num_warps=64 (2048 threads) [sm_90]", G, on("sm_90", add_with(num_warps=64), X, X),
               "num_warps", "64"),
        refuse("num_warps=32 (2048 threads) [gfx942]", G,
               on("gfx942", add_with(num_warps=32), X, X), "num_warps", "32"),
        refuse("num_stages=-1", G, on("sm_90", add_with(num_stages=-1), X, X), "num_stages", "-1"),
        refuse("num_stages='2'", G, on("sm_90", add_with(num_stages="2"), X, X), "num_stages",
               "'2'"),
        refuse("num_ctas=0", G, on("sm_90", add_with(num_ctas=0), X, X), "num_ctas", "0"),
        refuse("num_ctas=3 [sm_90]", G, on("sm_90", add_with(num_ctas=3), X, X), "num_ctas", "3",
               from_issue="unclear"),
        accept("num_ctas=2 [sm_90]", G, on("sm_90", add_with(num_ctas=2), X, X)),
        refuse("num_ctas=2 [gfx942]", G, on("gfx942", add_with(num_ctas=2), X, X), "num_ctas",
               "2"),
        either("compute_capability='sm_90'", G,
               on("sm_90", add_with(compute_capability="sm_90"), X, X),
               "compute_capability", "'sm_90'"),
        refuse("compute_capability=90.0", G, on("sm_90", add_with(compute_capability=90.0), X, X),
               "compute_capability", "90.0"),
        either("compute_capability=90 lowered for ROCm [gfx942]", G,
               on("gfx942", add_with(compute_capability=90), X, X), "compute_capability", "rocm"),
    ]


def _flags():
    return [
        refuse("enable_fp_fusion=1", G, on("sm_90", add_with(enable_fp_fusion=1), X, X),
               "enable_fp_fusion", "1"),
        accept("enable_fp_fusion=np.bool_(False)", G,
               on("sm_90", add_with(enable_fp_fusion=np.bool_(False)), X, X)),
        accept("debug=None (not given, as jax-triton 0.4's default)", G,
               on("sm_90", add_with(debug=None), X, X)),
        refuse("debug='yes'", G, on("gfx942", add_with(debug="yes"), X, X), "debug", "'yes'"),
        accept("name with spaces and slashes", G,
               on("sm_90", add_with(name="my op/add v2"), X, X),
               check=lambda calls: calls[0].summary()["name"] == "my op/add v2"),
        refuse("name=b'add' (bytes)", G, on("sm_90", add_with(name=b"add"), X, X), "name",
               "b'add'"),
        refuse("xla_native='yes'", G, on("sm_90", add_with(xla_native="yes"), X, X),
               "xla_native", "'yes'"),
        refuse("xla_native=1", G, on("sm_90", add_with(xla_native=1), X, X), "xla_native", "1"),
        refuse("batch_grid_axis='0'", G, on("sm_90", add_with(batch_grid_axis="0"), X, X),
               "batch_grid_axis", "'0'"),
        refuse("batch_grid_axis=True", G, on("sm_90", add_with(batch_grid_axis=True), X, X),
               "batch_grid_axis", "True"),
        either("serialized_metadata=bytearray", G,
               on("sm_90", add_with(serialized_metadata=bytearray(b"m")), X, X),
               "serialized_metadata", "bytearray"),
        refuse("misspelt input_output_alias=", G,
               on("sm_90", add_with(input_output_alias={0: 0}), X, X),
               "input_output_alias", "input_output_aliases", from_issue="unclear"),
        refuse("misspelt num_warp=", G, on("sm_90", add_with(num_warp=8), X, X), "num_warp",
               "num_warps"),
    ]


def accumulate(x, out, **call):
    settings = dict(kernel=accumulate_kernel, out_shape=out, grid=(N // 256,), BLOCK=256,
                    input_output_aliases={1: 0})
    settings.update(call)
    return jtr.triton_call(x, out, **settings)


def aliased(text: str) -> bool:
    return "tf.aliasing_output" in text or "output_operand_alias" in text


def _aliases_and_zeroing():
    alias_np = dict(input_output_aliases={np.int64(1): 0})
    return [
        refuse("input_output_aliases={True: 0}", G,
               lambda: lower_text("cuda", functools.partial(accumulate, input_output_aliases={
                   True: 0}), X, X), "input_output_aliases", "True", from_issue="silent"),
        accept("input_output_aliases={np.int64(1): 0}", G,
               lambda: lower_text("cuda", functools.partial(accumulate, **alias_np), X, X),
               check=aliased, from_issue="unclear"),
        accept("input_output_aliases={np.int64(1): 0} [cpu]", G,
               lambda: interpret(functools.partial(accumulate, **alias_np), ramp(), ramp()),
               check=lambda out: np.allclose(out, 2 * np.arange(N)), from_issue="unclear"),
        refuse("input_output_aliases={-1: 0}", G,
               on("sm_90", functools.partial(accumulate, input_output_aliases={-1: 0}), X, X),
               "input_output_aliases", "-1"),
        refuse("input_output_aliases={1.0: 0}", G,
               on("sm_90", functools.partial(accumulate, input_output_aliases={1.0: 0}), X, X),
               "input_output_aliases", "1.0"),
        refuse("input_output_aliases={'1': 0}", G,
               on("sm_90", functools.partial(accumulate, input_output_aliases={"1": 0}), X, X),
               "input_output_aliases", "'1'"),
        refuse("input_output_aliases={0: 0, 1: 0}", G,
               on("sm_90", functools.partial(accumulate, input_output_aliases={0: 0, 1: 0}),
                  X, X), "input_output_aliases", "twice"),
        accept("zeroed_outputs=(np.int64(0),)", G,
               on("sm_90", add_with(zeroed_outputs=(np.int64(0),)), X, X),
               check=lambda calls: zeroed_bytes(calls)[-1] == 4 * N, from_issue="unclear"),
        refuse("zeroed_outputs=(True,)", G, on("sm_90", add_with(zeroed_outputs=(True,)), X, X),
               "zeroed_outputs", "True"),
        refuse("zeroed_outputs=(-1,)", G, on("gfx942", add_with(zeroed_outputs=(-1,)), X, X),
               "zeroed_outputs", "-1"),
        accept("zeroed_outputs=(0, 0)", G, on("sm_90", add_with(zeroed_outputs=(0, 0)), X, X),
               check=lambda calls: zeroed_bytes(calls)[-1] == 4 * N),
        refuse("zeroed_outputs callable returning None", G,
               on("sm_90", add_with(zeroed_outputs=lambda meta: None), X, X),
               "zeroed_outputs", "None"),
        refuse("zeroed_outputs=0 (an int)", G, on("sm_90", add_with(zeroed_outputs=0), X, X),
               "zeroed_outputs", "0"),
    ]


def cases():
    return _grids() + _launch_settings() + _flags() + _aliases_and_zeroing()
