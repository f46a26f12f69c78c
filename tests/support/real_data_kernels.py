"""Autotuned kernels whose addresses come from operands computed in the same program, and the
checks the GPU tests run on them, each in a fresh process on poisoned memory
(test_gpu_autotune_real_data.py).

A kernel that reads or writes at an index computed earlier in the same jit is what jaxlib's
typed-FFI autotuner breaks: it times the configs before the index exists, on whatever the memory
held. `poison_memory` fills the allocator's memory with huge int32 values first, so such an index
points far out of bounds instead of at a lucky zero.
"""

from __future__ import annotations

import functools
import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support.subprocess_utils import ROOT

CONFIGS = [triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4),
           triton.Config({"BLOCK": 256}, num_warps=4)]
N = 1 << 16
BINS = 1000


def poison_memory(gib: int = 2) -> None:
    """Allocates and frees `gib` GiB of int32 at their maximum, which later buffers may reuse."""
    junk = jnp.full((gib << 28,), np.iinfo(np.int32).max, jnp.int32)
    junk.block_until_ready()
    del junk


def run_poisoned(fn, *args):
    """`jax.jit(fn)(*args)` with the buffer of every int32 result (the indices the tests return)
    holding the int32 maximum before the program runs.

    The poison is handed over as donated inputs, which XLA reuses for results of their shape: so
    an index that the program computes starts as a huge value in exactly the buffer the kernel
    will read, whatever the allocator does.
    """
    results = jax.tree.leaves(jax.eval_shape(fn, *args))
    junk = [jnp.full(r.shape, np.iinfo(np.int32).max, jnp.int32) for r in results
            if r.dtype == jnp.int32]

    def program(args, junk):
        del junk
        return fn(*args)

    return jax.jit(program, donate_argnums=1, keep_unused=True)(args, junk)


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def gather_kernel(x_ptr, idx_ptr, n, out_ptr, BLOCK: tl.constexpr):
    """out[r] = x[idx[r]]."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    idx = tl.load(idx_ptr + offsets, mask=mask, other=0)
    tl.store(out_ptr + offsets, tl.load(x_ptr + idx, mask=mask), mask=mask)


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def histogram_kernel(bins_ptr, n, counts_in_ptr, counts_ptr, BLOCK: tl.constexpr):
    """counts[bins[i]] += 1 in place: the output `counts` is aliased to `counts_in`."""
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    bins = tl.load(bins_ptr + offsets, mask=mask, other=0)
    tl.atomic_add(counts_ptr + bins, 1, mask=mask)


def gather(x, idx):
    return jtr.triton_call(x, idx, x.size, kernel=gather_kernel, out_shape=x,
                           grid=lambda meta: (triton.cdiv(x.size, meta["BLOCK"]),))


def sorted_gather(x, key):
    """x in the order of `key`, through an index computed in the same jit; the index too."""
    idx = jnp.argsort(key).astype(jnp.int32)
    return gather(x, idx), idx


def histogram(values):
    """Counts of `values % BINS`, through an in-place kernel on counts computed in the jit; the
    bins too."""
    bins = (values % BINS).astype(jnp.int32)
    counts = jnp.zeros((BINS,), jnp.int32) + (bins[0] < 0).astype(jnp.int32)
    counts = jtr.triton_call(bins, bins.size, counts, kernel=histogram_kernel,
                             out_shape=jax.ShapeDtypeStruct((BINS,), jnp.int32),
                             grid=lambda meta: (triton.cdiv(bins.size, meta["BLOCK"]),),
                             input_output_aliases={1: 0})
    return counts, bins


def _inputs(seed: int = 0, n: int = N):
    x = jax.random.normal(jax.random.key(seed), (n,), jnp.float32)
    key = jax.random.uniform(jax.random.key(seed + 1), (n,))
    return x, key


def check_sorted_gather() -> None:
    x, key = _inputs()
    out, idx = run_poisoned(sorted_gather, x, key)
    np.testing.assert_array_equal(idx, jnp.argsort(key))
    np.testing.assert_array_equal(out, x[jnp.argsort(key)])


def check_histogram() -> None:
    values = jax.random.randint(jax.random.key(2), (N,), 0, 1 << 20)
    counts, _ = run_poisoned(histogram, values)
    np.testing.assert_array_equal(counts, np.bincount(np.asarray(values) % BINS, minlength=BINS))


def check_sorted_gather_under_vmap() -> None:
    xs = jax.random.normal(jax.random.key(3), (4, N // 4), jnp.float32)
    keys = jax.random.uniform(jax.random.key(4), (4, N // 4))
    out, idx = run_poisoned(jax.vmap(sorted_gather), xs, keys)
    order = jnp.argsort(keys, axis=1)
    np.testing.assert_array_equal(idx, order)
    np.testing.assert_array_equal(out, jnp.take_along_axis(xs, order, axis=1))


def check_sorted_gather_under_shard_map(n_devices: int = 2) -> None:
    """The gather per shard, over `n_devices` GPUs (one: shard_map's lowering on one GPU)."""
    from jax.sharding import Mesh, PartitionSpec as P

    devices = jax.devices()[:n_devices]
    assert len(devices) == n_devices, f"needs {n_devices} devices, has {jax.devices()}"
    mesh = Mesh(np.array(devices), ("d",))
    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:  # jax < 0.7 spells it jax.experimental.shard_map
        from jax.experimental.shard_map import shard_map
    program = shard_map(sorted_gather, mesh=mesh, in_specs=(P("d"), P("d")),
                        out_specs=(P("d"), P("d")))
    x, key = _inputs(5)
    out, idx = run_poisoned(program, x, key)
    shard = N // n_devices
    for half in [slice(i * shard, (i + 1) * shard) for i in range(n_devices)]:
        order = jnp.argsort(key[half])
        np.testing.assert_array_equal(idx[half], order)
        np.testing.assert_array_equal(out[half], x[half][order])


@functools.cache
def moe_example():
    spec = importlib.util.spec_from_file_location(
        "moe_permute", os.path.join(ROOT, "examples", "moe_permute.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def moe_chain(mask, x, probs, num_out_tokens):
    """The row-id map (three library primitives, two in place) and the autotuned permute, with
    the map among the outputs."""
    moe = moe_example()
    row_id_map = moe.make_row_id_map(mask)
    rows, row_probs = moe.permute(x, row_id_map, probs, num_out_tokens)
    return rows, row_probs, row_id_map


def _moe_problem(tokens=4096, experts=64, hidden=1024, k=8):
    moe = moe_example()
    mask, probs = moe.top_k_routing(jax.random.key(6), tokens, experts, k)
    x = jax.random.normal(jax.random.key(7), (tokens, hidden), jnp.float32)
    return mask, x, probs, tokens * k


def check_moe_chain() -> None:
    moe = moe_example()
    mask, x, probs, num_out = _moe_problem()
    rows, row_probs, row_id_map = run_poisoned(
        functools.partial(moe_chain, num_out_tokens=num_out), mask, x, probs)
    np.testing.assert_array_equal(row_id_map, moe.make_row_id_map_reference(mask))
    want_rows, want_probs = moe.permute_reference(x, mask, probs, num_out)
    np.testing.assert_array_equal(rows, want_rows)
    np.testing.assert_array_equal(row_probs, want_probs)


def _emitted(fn, *args) -> list[dict]:
    """What jaxlib receives for each Triton call of `jit(fn)(*args)`, and the calls a lowering
    left to jaxlib's autotuner."""
    from jax_triton_rocm.routes import _choices

    with _choices.session() as current:
        lowered = jax.jit(fn).trace(*args).lower()
    calls = [{"target": call.target, "launches": [
        {"grid": list(k["grid"]), "num_warps": k["num_warps"]}
        for k in call.summary()["launches"]]} for call in jtr.kernel_calls(lowered)]
    return [{"undecided": sorted(current.undecided), "calls": calls}]


def tune_sorted_gather() -> list[dict]:
    """Picks the gather's config on real data, checks the result; returns what is emitted."""
    x, key = _inputs()
    out, idx = jtr.autotune(sorted_gather, x, key)
    np.testing.assert_array_equal(out, x[jnp.argsort(key)])
    check_sorted_gather()
    return _emitted(sorted_gather, x, key)


def tune_moe_chain() -> list[dict]:
    moe = moe_example()
    mask, x, probs, num_out = _moe_problem()
    chain = functools.partial(moe_chain, num_out_tokens=num_out)
    rows, _, row_id_map = jtr.autotune(chain, mask, x, probs)
    np.testing.assert_array_equal(row_id_map, moe.make_row_id_map_reference(mask))
    np.testing.assert_array_equal(rows, moe.permute_reference(x, mask, probs, num_out)[0])
    check_moe_chain()
    return _emitted(chain, mask, x, probs)


def run_all() -> None:
    """Every check above in this one process, on poisoned memory (for compute-sanitizer, whose
    start-up per process is slow): `python -c "from tests.support import real_data_kernels as rd;
    rd.run_all()"`."""
    poison_memory()
    checks = [check_sorted_gather, check_histogram, check_moe_chain,
              check_sorted_gather_under_vmap, tune_sorted_gather, tune_moe_chain,
              functools.partial(check_sorted_gather_under_shard_map, min(len(jax.devices()), 2))]
    for check in checks:
        check()
        name = getattr(check, "__name__", None) or f"{check.func.__name__}{check.args}"
        print(f"{name}: ok", flush=True)
