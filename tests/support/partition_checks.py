"""Behaviours of `jtr.partitioned` on four CPU devices, checked in one child process.

`test_partition.py` runs `main()` in a process started with
`--xla_force_host_platform_device_count=4` (the flag must be set before JAX starts), which prints
one line per behaviour, `NAME: ok` or `NAME: FAIL ...`; the test asserts on each line, so a
failure names its behaviour. Kernels run in Triton's interpreter, one host callback per shard.
"""

from __future__ import annotations

import os
import sys
import traceback

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

import jax_triton_rocm as jtr
from jax_triton_rocm.api import _partition
from jax_triton_rocm.routes.cpu import _interpret
from jax_triton_rocm.routes import _arch, _choices
from tests.support import autotune_utils, kernels, lowering_utils
from tests.support import library_kernels as lk
from tests.support import partition_kernels as pk

MESH = Mesh(np.array(jax.devices("cpu")[:4]), ("d",))
CHECKS = {}
SEEN_SHAPES: list[tuple[int, ...]] = []  # the first operand's shape at each interpreted run


def check(fn):
    CHECKS[fn.__name__] = fn
    return fn


def put(x, *spec, mesh=MESH):
    return jax.device_put(x, NamedSharding(mesh, P(*spec)))


def assert_split(out, *spec, mesh=MESH):
    want = NamedSharding(mesh, P(*spec))
    assert out.sharding.is_equivalent_to(want, out.ndim), f"{out.sharding} is not {want}"


def run_seen(fn, *args, **jit_options):
    """fn's result under jit, and the shapes its interpreted kernels ran on."""
    SEEN_SHAPES.clear()
    out = jax.block_until_ready(jax.jit(fn, **jit_options)(*args))
    return out, list(SEEN_SHAPES)


def unsharded(fn, *args):
    """The plain function on one device: what every split must reproduce."""
    one = jax.devices("cpu")[0]
    return jax.jit(fn)(*(jax.device_put(np.asarray(a), one) for a in args))


@check
def split_rows_are_not_gathered():
    x, y = pk.matrix(seed=1), pk.matrix(seed=2)
    xs, ys = put(x, "d", None), put(y, "d", None)
    assert "all-gather" not in lowering_utils.compiled_text(pk.add, xs, ys)
    out, seen = run_seen(pk.add, xs, ys)
    assert_split(out, "d", None)
    np.testing.assert_array_equal(out, unsharded(kernels.add, x, y))
    assert seen == [(2, 8)] * 4, seen


@check
def each_shard_traces_the_function_at_its_own_shape():
    traced = []

    @jtr.partitioned("n, n -> n")
    def add(x, y):
        traced.append(x.shape)
        return kernels.add(x, y)

    x = put(jnp.arange(64.0), "d")
    out, seen = run_seen(add, x, x)
    np.testing.assert_array_equal(out, 2 * jnp.arange(64.0))
    assert traced == [(64,), (16,)], traced  # the full call, then one shard's (grid 1, n 16)
    assert seen == [(16,)] * 4, seen


@check
def split_columns_are_not_gathered():
    x = pk.matrix(seed=3)
    xs = put(x, None, "d")
    assert "all-gather" not in lowering_utils.compiled_text(pk.add, xs, xs)
    out, seen = run_seen(pk.add, xs, xs)
    assert_split(out, None, "d")
    np.testing.assert_array_equal(out, 2 * x)
    assert seen == [(8, 2)] * 4, seen


@check
def two_mesh_axes_split_two_dimensions():
    mesh = Mesh(np.array(jax.devices("cpu")[:4]).reshape(2, 2), ("x", "y"))
    x = put(pk.matrix(seed=4), "x", "y", mesh=mesh)
    assert "all-gather" not in lowering_utils.compiled_text(pk.add, x, x)
    out, seen = run_seen(pk.add, x, x)
    assert_split(out, "x", "y", mesh=mesh)
    assert seen == [(4, 4)] * 4, seen


@check
def operands_split_differently_follow_the_first():
    x, y = pk.matrix(seed=5), pk.matrix(seed=6)
    out, seen = run_seen(pk.add, put(x, "d", None), put(y, None, "d"))
    assert_split(out, "d", None)
    np.testing.assert_array_equal(out, unsharded(kernels.add, x, y))
    assert seen == [(2, 8)] * 4, seen


@check
def whole_operands_follow_the_requested_output_split():
    x = pk.matrix(seed=7)
    split = NamedSharding(MESH, P("d", None))
    assert "all-gather" not in lowering_utils.compiled_text(pk.add, x, x, out_shardings=split)
    out, seen = run_seen(pk.add, x, x, out_shardings=split)
    np.testing.assert_array_equal(out, 2 * x)
    assert seen == [(2, 8)] * 4, seen


@check
def broadcast_operand_is_split_like_its_dimension():
    x, bias = pk.matrix(seed=8), jnp.arange(8.0)
    xs = put(x, None, "d")
    assert "all-gather" not in lowering_utils.compiled_text(pk.add_bias, xs, bias)
    out, _ = run_seen(pk.add_bias, xs, bias)
    assert_split(out, None, "d")
    np.testing.assert_array_equal(out, x + bias)


@check
def contracted_dimension_is_gathered_first():
    x = pk.matrix(seed=9)
    xs = put(x, None, "d")
    assert "all-gather" in lowering_utils.compiled_text(pk.row_sum, xs)
    out, seen = run_seen(pk.row_sum, xs)
    np.testing.assert_allclose(out, unsharded(pk.row_reduce, x), rtol=1e-6)
    assert all(shape[1] == 8 for shape in seen), seen  # whole rows on every device


@check
def free_dimension_beside_a_contracted_one_stays_split():
    x = pk.matrix(seed=10)
    xs = put(x, "d", None)
    assert "all-gather" not in lowering_utils.compiled_text(pk.row_sum, xs)
    out, seen = run_seen(pk.row_sum, xs)
    assert_split(out, "d")
    np.testing.assert_allclose(out, unsharded(pk.row_reduce, x), rtol=1e-6)
    assert seen == [(2, 8)] * 4, seen


@check
def contracted_dimension_reduced_by_sum_stays_split():
    x = pk.matrix(seed=11)
    xs = put(x, None, "d")
    text = lowering_utils.compiled_text(pk.row_sum_reduced, xs)
    assert "all-gather" not in text and "all-reduce" in text
    out, seen = run_seen(pk.row_sum_reduced, xs)
    np.testing.assert_allclose(out, unsharded(pk.row_reduce, x), rtol=1e-5, atol=1e-6)
    assert seen == [(8, 2)] * 4, seen


@check
def contracted_dimension_reduced_by_max_stays_split():
    x = pk.matrix(seed=12)
    xs = put(x, None, "d")
    assert "all-gather" not in lowering_utils.compiled_text(pk.row_max_reduced, xs)
    out, seen = run_seen(pk.row_max_reduced, xs)
    np.testing.assert_array_equal(out, np.max(x, axis=1))
    assert seen == [(8, 2)] * 4, seen


@check
def library_primitive_takes_its_partitioning_from_a_rule():
    x = pk.matrix(16, 33, seed=13)
    xs = put(x, "d", None)
    assert "all-gather" not in lowering_utils.compiled_text(pk.row_amax, xs)
    out, seen = run_seen(pk.row_amax, xs)
    assert_split(out, "d")
    np.testing.assert_array_equal(out, unsharded(lk.row_amax_sharded, x))
    assert seen == [(4, 33)] * 4, seen
    reduced, seen = run_seen(pk.row_amax_reduced, put(pk.matrix(8, 32, seed=14), None, "d"))
    np.testing.assert_array_equal(reduced, np.max(np.abs(pk.matrix(8, 32, seed=14)), axis=1))
    assert seen == [(8, 8)] * 4, seen


@check
def vmap_adds_a_dimension_that_may_be_split():
    x = jnp.stack([pk.matrix(seed=s) for s in range(4)])
    xs = put(x, "d", None, None)
    assert "all-gather" not in lowering_utils.compiled_text(jax.vmap(pk.add), xs, xs)
    out, _ = run_seen(jax.vmap(pk.add), xs, xs)
    assert_split(out, "d", None, None)
    np.testing.assert_array_equal(out, 2 * x)
    one = pk.matrix(seed=5)
    out, _ = run_seen(jax.vmap(pk.add, in_axes=(0, None)), xs, one)
    np.testing.assert_array_equal(out, x + one)
    out, _ = run_seen(jax.vmap(pk.row_sum_reduced, in_axes=1), put(x, None, None, "d"))
    np.testing.assert_allclose(out, x.sum(axis=2).T, rtol=1e-5, atol=1e-5)


@check
def eager_call_keeps_the_split():
    x = put(pk.matrix(seed=15), "d", None)
    out = pk.add(x, x)
    assert_split(out, "d", None)
    np.testing.assert_array_equal(out, 2 * np.asarray(x))


@check
def autotuned_kernel_runs_per_shard():
    x = pk.matrix(seed=16)
    out, seen = run_seen(pk.tuned_add, put(x, "d", None), put(x, "d", None))
    np.testing.assert_array_equal(out, 2 * x)
    assert seen == [(2, 8)] * 4, seen


@check
def numpy_constant_of_the_function_is_kept():
    x = put(jnp.arange(16.0), "d")
    assert "all-gather" not in lowering_utils.compiled_text(pk.add_two, x)
    out, seen = run_seen(pk.add_two, x)
    np.testing.assert_array_equal(out, jnp.arange(16.0) + 2)
    assert seen == [(4,)] * 4, seen


@check
def host_callback_of_its_own_is_refused():
    @jtr.partitioned("b n -> b n")
    def noisy(x):
        jax.debug.print("shard {}", x.shape)
        return kernels.add(x, x)

    try:
        jax.jit(noisy)(put(pk.matrix(), "d", None))
    except Exception as err:  # XLA wraps the partitioner's error in its own
        assert "host callback of its own" in str(err), str(err)[-2000:]
    else:
        raise AssertionError("a host callback in the per-shard body ran")


@check
def export_across_devices_is_refused():
    spec = jax.ShapeDtypeStruct((8, 8), jnp.float32, sharding=NamedSharding(MESH, P("d", None)))
    try:
        with jtr.target_arch(cuda="sm_90"):
            jax.export.export(jax.jit(pk.add), platforms=["cuda"],
                              disabled_checks=jtr.disabled_checks())(spec, spec)
    except NotImplementedError as err:
        assert "across 4 devices" in str(err) and "shard_map" in str(err), str(err)
    else:
        raise AssertionError("exported")


def per_shard_lowering(fn, rule_fn, platform, *shapes, spec=("d", None)):
    """The per-shard function custom_partitioning's `partition` returns for operands split by
    `spec`, lowered for `platform` on the shard's shapes (what XLA would compile there)."""
    arrays = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
    closed = jax.make_jaxpr(fn)(*arrays)
    partition = _partition._callbacks(fn, rule_fn.rule, closed, None, "f")["partition"]
    split = NamedSharding(MESH, P(*spec))
    operands = [jax.ShapeDtypeStruct(s, jnp.float32, sharding=split) for s in shapes]
    results = [jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=split) for a in closed.out_avals]
    _, per_shard, _, arg_shardings = partition(MESH, tuple(operands), results)
    shards = [jax.ShapeDtypeStruct(s.shard_shape(a.shape), jnp.float32)
              for s, a in zip(arg_shardings, arrays)]
    return lowering_utils.lower_for(per_shard, *shards, platform=platform)


@check
def shard_lowers_for_rocm_gfx942():
    lowered = per_shard_lowering(kernels.add, pk.add, "rocm", (1024, 256), (1024, 256))
    calls = jtr.kernel_calls(lowered)
    assert len(calls) == 1, calls
    launch = calls[0].summary()["launches"][0]
    assert launch["grid"] == (256, 1, 1), launch  # one shard: 256 rows of 256, by 256
    assert launch["compute_capability"] == 94, launch  # gfx942


@check
def shard_lowers_for_cuda_sm90():
    lowered = per_shard_lowering(kernels.add, pk.add, "cuda", (1024, 256), (1024, 256))
    (call,) = jtr.kernel_calls(lowered)
    launch = call.summary()["launches"][0]
    assert launch["grid"] == (256, 1, 1) and call.target == "triton_kernel_call_ffi", launch


@check
def autotuned_shard_is_tuned_at_its_own_shape():
    kind, _arch.device_kind = _arch.device_kind, lambda platform, context: "Stand-in GPU"
    try:
        _tuned_keys()
    finally:
        _arch.device_kind = kind


def _tuned_keys():
    with _choices.session() as shard_session:
        per_shard_lowering(autotune_utils.tuned_add, pk.tuned_add, "cuda", (64, 256), (64, 256))
    with _choices.session() as direct:
        lowering_utils.lower_for(autotune_utils.tuned_add, autotune_utils.f32(16, 256),
                                 autotune_utils.f32(16, 256), platform="cuda")
    with _choices.session() as whole:
        lowering_utils.lower_for(autotune_utils.tuned_add, autotune_utils.f32(64, 256),
                                 autotune_utils.f32(64, 256), platform="cuda")
    assert list(shard_session.undecided) == list(direct.undecided), "not the shard's key"
    assert list(shard_session.undecided) != list(whole.undecided), "keyed by the full shape"


@check
def gspmd_partitioner_splits_the_same_way():
    jax.config.update("jax_use_shardy_partitioner", False)
    try:
        add = jtr.partitioned("b n, b n -> b n")(kernels.add)
        x = put(pk.matrix(seed=17), "d", None)
        assert "all-gather" not in lowering_utils.compiled_text(add, x, x)
        out, seen = run_seen(add, x, x)
        assert_split(out, "d", None)
        assert seen == [(2, 8)] * 4, seen
        summed = jtr.partitioned("b n -> b", reductions={"n": "sum"})(pk.row_reduce)
        xs = put(pk.matrix(seed=18), None, "d")
        assert "all-gather" not in lowering_utils.compiled_text(summed, xs)
        out, seen = run_seen(summed, xs)
        np.testing.assert_allclose(out, pk.matrix(seed=18).sum(axis=1), rtol=1e-5, atol=1e-6)
        assert seen == [(8, 2)] * 4, seen
    finally:
        jax.config.update("jax_use_shardy_partitioner", True)


@check
def example_runs_on_four_cpu_devices():
    import runpy

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = os.path.join(root, "examples", "sharded_add.py")
    example = runpy.run_path(path, run_name="example")
    assert example["run"](jax.devices("cpu")[:4]).startswith("4 cpu devices"), "no summary"


def main(names=None) -> None:
    real_run = _interpret.run_on_host

    def recording_run(call, *arrays):
        SEEN_SHAPES.append(np.shape(arrays[0]))
        return real_run(call, *arrays)

    _interpret.run_on_host = recording_run
    for name, fn in CHECKS.items():
        if names and name not in names:
            continue
        try:
            fn()
        except Exception as err:
            detail = "".join(traceback.format_exception(err)).replace("\n", " | ")
            print(f"{name}: FAIL {type(err).__name__}: {detail[-1500:]}", flush=True)
        else:
            print(f"{name}: ok", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
