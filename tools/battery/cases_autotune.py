"""Battery cases for `@triton.autotune` and `@triton.heuristics`, through both APIs."""

from __future__ import annotations

import numpy as np
import triton

import jax_triton_rocm as jtr
from harness import (N, X, accept, add_kernel, either, interpret, library_route, lower, ramp,
                     refuse, scale_kernel)

G = "autotune"


def tuned(*configs, prune=None, key=("n",)):
    prune_by = {"early_config_prune": prune} if prune is not None else None
    return triton.autotune(configs=list(configs), key=list(key), prune_configs_by=prune_by)(
        add_kernel)


def with_heuristics(**rules):
    return triton.heuristics(rules)(add_kernel)


def call_on(platform: str, kernel, **call):
    """A run lowering `triton_call(add_kernel wrapped as `kernel`)` without BLOCK at the call."""
    def fn(x, y):
        return jtr.triton_call(x, y, N, kernel=kernel, out_shape=x,
                               grid=lambda meta: (triton.cdiv(N, meta["BLOCK"]),), **call)

    if platform == "cpu":
        return lambda: interpret(fn, ramp(), ramp())
    return lambda: lower(platform, fn, X, X)


def launches(calls) -> list:
    return calls[0].summary()["launches"]


B128, B256 = triton.Config({"BLOCK": 128}), triton.Config({"BLOCK": 256})


def _configs():
    return [
        refuse("Config(num_warps=0) [sm_90]", G,
               call_on("cuda", tuned(triton.Config({"BLOCK": 128}, num_warps=0))), "num_warps",
               "0", from_issue="silent"),
        refuse("Config(num_warps=0) [gfx942]", G,
               call_on("rocm", tuned(triton.Config({"BLOCK": 128}, num_warps=0), B256)),
               "num_warps", "0", from_issue="silent"),
        refuse("Config(num_warps=3)", G,
               call_on("cuda", tuned(triton.Config({"BLOCK": 128}, num_warps=3))), "num_warps",
               "3"),
        refuse("Config(num_stages=0)", G,
               call_on("cuda", tuned(triton.Config({"BLOCK": 128}, num_stages=0))),
               "num_stages", "0"),
        refuse("Config(maxnreg=1000)", G,
               call_on("cuda", tuned(triton.Config({"BLOCK": 128}, maxnreg=1000))), "maxnreg",
               "1000"),
        refuse("Config kwargs with a typo (BLOCKK)", G,
               call_on("cuda", tuned(triton.Config({"BLOCKK": 128}))), "BLOCKK"),
        refuse("Config(num_warps=64) [gfx942]: no config can launch", G,
               call_on("rocm", tuned(triton.Config({"BLOCK": 128}, num_warps=64))), "num_warps",
               "64"),
        accept("Config({'BLOCK': np.int64(2048)}), cold cache [sm_90]", G,
               call_on("cuda", tuned(triton.Config({"BLOCK": np.int64(2048)}), B256)),
               check=lambda calls: len(launches(calls)) == 2),
        accept("Config({'BLOCK': np.int64(128)}) [cpu]", G,
               call_on("cpu", tuned(triton.Config({"BLOCK": np.int64(128)}))),
               check=lambda out: np.allclose(out, 2 * np.arange(N))),
        accept("two identical configs", G, call_on("rocm", tuned(B128, B128))),
        either("key naming no parameter", G,  # Triton 3.9 refuses it when decorating
               lambda: call_on("cuda", tuned(B128, B256, key=("nope",)))(), "key", "nope"),
        accept("autotuned kernel [cpu]", G, call_on("cpu", tuned(B128, B256)),
               check=lambda out: np.allclose(out, 2 * np.arange(N))),
    ]


def _pruning():
    return [
        refuse("early_config_prune returning None", G,
               call_on("cuda", tuned(B128, B256, prune=lambda configs, named, **kw: None)),
               "early_config_prune", "None", from_issue="unclear"),
        refuse("early_config_prune returning dicts", G,
               call_on("cuda", tuned(B128, B256, prune=lambda configs, named, **kw: [
                   {"BLOCK": 128}])), "early_config_prune", "dict", from_issue="unclear"),
        refuse("early_config_prune raising", G,
               call_on("rocm", tuned(B128, B256, prune=lambda configs, named, **kw: 1 // 0)),
               "early_config_prune", "ZeroDivisionError"),
        accept("early_config_prune returning a generator", G,
               call_on("cuda", tuned(B128, B256, prune=lambda configs, named, **kw: (
                   c for c in configs if c.kwargs["BLOCK"] == 256))),
               check=lambda calls: len(launches(calls)) == 1),
        accept("early_config_prune returning a new config", G,
               call_on("cuda", tuned(B128, B256, prune=lambda configs, named, **kw: [
                   triton.Config({"BLOCK": 512})])),
               check=lambda calls: len(launches(calls)) == 1),
    ]


def _heuristics():
    return [
        refuse("heuristic reading a missing key", G,
               call_on("cuda", with_heuristics(BLOCK=lambda args: args["BLOCKSIZE"])),
               "BLOCKSIZE", "heuristic", from_issue="unclear"),
        refuse("heuristic reading a missing key [cpu]", G,
               call_on("cpu", with_heuristics(BLOCK=lambda args: args["BLOCKSIZE"])),
               "BLOCKSIZE", "heuristic", from_issue="unclear"),
        refuse("heuristic setting num_warps=0", G,
               call_on("cuda", triton.heuristics({"num_warps": lambda args: 0})(
                   triton.heuristics({"BLOCK": lambda args: 256})(add_kernel))),
               "num_warps", "0"),
        accept("heuristic returning np.int64(512), cold cache [gfx942]", G,
               call_on("rocm", with_heuristics(BLOCK=lambda args: np.int64(512)))),
        accept("heuristic returning np.int64(256) [cpu]", G,
               call_on("cpu", with_heuristics(BLOCK=lambda args: np.int64(256))),
               check=lambda out: np.allclose(out, 2 * np.arange(N))),
        refuse("heuristic returning 'big'", G,
               call_on("cuda", with_heuristics(BLOCK=lambda args: "big")), "BLOCK", "'big'"),
    ]


def _through_the_library_api():
    def rule(kernel, **call):
        return lambda ctx, x: jtr.triton_call_lowering(
            ctx, kernel, x, grid=lambda meta: (N // meta["BLOCK"],),
            constexprs={"n": N, "SCALE": 2.0}, **call)

    tuned_scale = lambda *configs: triton.autotune(list(configs), key=["n"])(  # noqa: E731
        scale_kernel)
    return [
        refuse("Config(num_warps=0) through triton_call_lowering", G, library_route(
            "sm_90", rule(tuned_scale(triton.Config({"BLOCK": 128}, num_warps=0)))),
               "num_warps", "0", from_issue="silent"),
        accept("autotuned scale through triton_call_lowering [cpu]", G, library_route(
            "cpu", rule(tuned_scale(B128, B256))),
               check=lambda out: np.allclose(out, 2.0 * np.arange(N))),
    ]


def cases():
    return _configs() + _pruning() + _heuristics() + _through_the_library_api()
