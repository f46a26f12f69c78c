"""MoE token permutation (examples/moe_permute.py): Triton primitives against the jnp version.

Run on a GPU machine: `python benchmarks/moe_permute.py [--tokens N] [--experts E] [--hidden H]
[--top-k K]`. Times, per jitted call (median of 30 after a warm-up that also runs jaxlib's
autotuning), the row-id map, permute and unpermute built on `triton_call_lowering`, and the same
steps in jnp (`permute_reference`, `unpermute_reference`, which scatter and gather from the
routing mask), and prints them with their ratios side by side from one run (the machines are
shared and noisy: compare within a run, not across). Without a CUDA or ROCm device it prints one
line saying so and exits with status 1.
"""

from __future__ import annotations

if __name__ == "__main__":  # what this run needs, said before JAX is imported
    import _needs

    _needs.gpu_needed(__file__)

import argparse
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp

from _common import median_seconds


def _load_example():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "examples",
                        "moe_permute.py")
    spec = importlib.util.spec_from_file_location("moe_permute", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _median_ms(fn, *args, repeats=30):
    return 1e3 * median_seconds(fn, *args, repeats=repeats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=16384)
    parser.add_argument("--experts", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    args = parser.parse_args(argv)
    platform = jax.devices()[0].platform
    if platform not in ("cuda", "rocm", "gpu"):
        from jax_triton_rocm.backends import _no_gpu

        print(f"benchmarks/moe_permute.py: needs a CUDA or ROCm GPU, and JAX has none here: "
              f"{_no_gpu.no_gpu_reason()}", file=sys.stderr)
        return 1
    moe = _load_example()
    tokens, experts, hidden, k = args.tokens, args.experts, args.hidden, args.top_k
    num_out = tokens * k
    mask, probs = moe.top_k_routing(jax.random.key(0), tokens, experts, k)
    x = jax.random.normal(jax.random.key(1), (tokens, hidden), jnp.float32).astype(args.dtype)
    row_id_map = jax.jit(moe.make_row_id_map)(mask)
    rows, _ = moe.permute_reference(x, mask, probs, num_out)

    steps = [
        ("row-id map", jax.jit(moe.make_row_id_map), (mask,),
         jax.jit(moe.destinations_reference), (mask,)),
        ("permute", jax.jit(moe.permute, static_argnums=3), (x, row_id_map, probs, num_out),
         jax.jit(moe.permute_reference, static_argnums=3), (x, mask, probs, num_out)),
        ("unpermute", jax.jit(moe.unpermute), (rows, row_id_map, probs),
         jax.jit(moe.unpermute_reference), (rows, mask, probs)),
    ]
    print(f"device: {jax.devices()[0].device_kind}; jax {jax.__version__}; {tokens} tokens, "
          f"{experts} experts, top-{k}, hidden {hidden}, {args.dtype}")
    print(f"{'step':12s}  {'Triton ms':>10s}  {'jnp ms':>10s}  {'jnp/Triton':>10s}")
    for name, triton_fn, triton_args, jnp_fn, jnp_args in steps:
        triton_ms = _median_ms(triton_fn, *triton_args)
        jnp_ms = _median_ms(jnp_fn, *jnp_args)
        print(f"{name:12s}  {triton_ms:10.3f}  {jnp_ms:10.3f}  {jnp_ms / triton_ms:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
