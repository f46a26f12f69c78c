"""`jtr.partitioned`: a function of Triton calls split across devices by an einsum-like rule.

The behaviours on several devices run in one child process with four CPU devices
(`partition_checks.py`, one result line each, asserted one test each); the rest here, on the
test process's one CPU device.
"""

import os
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.api import _partition, _tuning
from jax_triton_rocm.backends import _vendors
from tests.support import kernels, lowering_utils
from tests.support import partition_kernels as pk
from tests.support.subprocess_utils import ROOT, run_python

with open(os.path.join(ROOT, "tests", "support", "partition_checks.py")) as _checks:
    BEHAVIOURS = re.findall(r"^@check\ndef (\w+)\(", _checks.read(), re.M)


@pytest.fixture(scope="module")
def on_four_cpu_devices() -> dict[str, str]:
    """Each behaviour's result line from one run of `partition_checks.main()`."""
    result = run_python("from tests.support import partition_checks; partition_checks.main()",
                        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=4",
                             "JAX_PLATFORMS": "cpu", "JAX_TRITON_ROCM_AUTOTUNE_DIR": ""},
                        timeout=600)
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines() if ": " in line)
    lines["(process)"] = f"exit {result.returncode}; stderr tail:\n{result.stderr[-3000:]}"
    return lines


@pytest.mark.parametrize("behaviour", BEHAVIOURS)
def test_on_four_cpu_devices(on_four_cpu_devices, behaviour):
    assert on_four_cpu_devices.get(behaviour) == "ok", (
        on_four_cpu_devices.get(behaviour, "no result line"), on_four_cpu_devices["(process)"])


# Rules refused when `partitioned` is called, before any function exists to trace.

@pytest.mark.parametrize("rule,problem", [
    ("b n, b n", "0 '->'"),
    ("b n -> b -> n", "2 '->'"),
    ("... n -> n", "'...' is not supported"),
    ("(b n) -> b", "compound dimensions"),
    ("b.n -> b", "operand 0 has 'b.n'"),
    ("b b -> b", "operand 0 names two of its dimensions b"),
    ("b n ->", "names no output"),
    ("b n -> b k", "output dimension(s) k appear in no operand"),
])
def test_malformed_rule_is_refused_naming_the_rule_and_the_problem(rule, problem):
    with pytest.raises(ValueError) as raised:
        jtr.partitioned(rule)
    assert repr(rule) in str(raised.value) and problem in str(raised.value)


@pytest.mark.parametrize("reductions,problem", [
    ({"b": "sum"}, "'b', which is an output dimension"),
    ({"k": "sum"}, "'k', which is in no operand"),
    ({"n": "mean"}, "reductions['n'] = 'mean' is none of sum, max, min"),
])
def test_bad_reduction_is_refused(reductions, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        jtr.partitioned("b n -> b", reductions=reductions)


def test_rule_must_be_a_string():
    with pytest.raises(TypeError, match="must be a string"):
        jtr.partitioned(("b", "n"))


# Arrays that disagree with the rule are refused before the function is traced.

def _recording(rule):
    traced = []

    @jtr.partitioned(rule)
    def add(x, y):
        traced.append(x.shape)
        return kernels.add(x, y)

    return add, traced


@pytest.mark.parametrize("shapes,error,problem", [
    ([(4, 8)], TypeError, "has 2 operand(s) but the function was called with 1 array(s)"),
    ([(4, 8), (32,)], ValueError, "operand 1 has shape (32,) (rank 1) but its spec 'b n'"),
    ([(4, 8), (4, 6)], ValueError, "'n' has size 8 in operand 0 but 6 in operand 1 (axis 1"),
])
def test_arrays_disagreeing_with_the_rule_are_refused_before_tracing(shapes, error, problem):
    add, traced = _recording("b n, b n -> b n")
    with pytest.raises(error, match=re.escape(problem)):
        add(*(jnp.ones(s) for s in shapes))
    with pytest.raises(error, match=re.escape(problem)):
        jax.jit(add)(*(jnp.ones(s) for s in shapes))
    assert traced == []


@pytest.mark.parametrize("rule,problem", [
    ("b n, b n -> b", "output 0 has shape (4, 8) (rank 2) but its spec 'b'"),
    ("b n, b n -> b n, b n", "names 2 output(s) but the function returned 1 array(s)"),
    ("b n, b n -> n b", "'n' has size 8 in the operands but 4 in output 0"),
])
def test_outputs_disagreeing_with_the_rule_are_refused(rule, problem):
    add, _ = _recording(rule)
    with pytest.raises(ValueError, match=re.escape(problem)):
        add(jnp.ones((4, 8)), jnp.ones((4, 8)))


def test_an_argument_that_is_no_array_is_refused():
    with pytest.raises(TypeError, match="argument 1 is dict"):
        pk.add(jnp.ones((2, 2)), {"y": 1})


def test_static_keywords_must_be_hashable():
    with pytest.raises(TypeError, match="keyword arguments are static and must be hashable"):
        pk.add(jnp.ones((2, 256)), jnp.ones((2, 256)), block=[256])


def test_a_closure_over_a_traced_value_is_refused():
    def outer(x, y):
        return jtr.partitioned("b n -> b n")(lambda a: kernels.add(a, y))(x)

    with pytest.raises(ValueError, match="pass it as an argument"):
        jax.jit(outer)(jnp.ones((2, 8)), jnp.ones((2, 8)))


def test_grad_says_where_to_put_a_custom_vjp():
    with pytest.raises(NotImplementedError, match="jax.custom_vjp"):
        jax.grad(lambda x: pk.add(x, x).sum())(jnp.ones((2, 8)))


# On one device the function runs whole.

def test_one_device_gives_the_plain_functions_values():
    x, y = pk.matrix(seed=1), pk.matrix(seed=2)
    np.testing.assert_array_equal(pk.add(x, y), kernels.add(x, y))
    np.testing.assert_array_equal(jax.jit(pk.add)(x, y), kernels.add(x, y))
    np.testing.assert_allclose(jax.jit(pk.row_sum_reduced)(x), x.sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(pk.add(x, y, block=128), x + y)  # a static keyword


def test_vmap_on_one_device_maps_mapped_operands_only():
    x = jnp.stack([pk.matrix(seed=s) for s in range(3)])
    one = pk.matrix(seed=9)
    np.testing.assert_array_equal(jax.jit(jax.vmap(pk.add, in_axes=(0, None)))(x, one), x + one)
    nested = jax.vmap(jax.vmap(pk.add_flat, in_axes=(0, None)), in_axes=(None, 0))
    np.testing.assert_array_equal(nested(x[0], x[1]), x[0][None, :, :] + x[1][:, None, :])


def test_vmap_prepends_a_free_dimension_to_the_rule():
    rule = _partition.parse_rule("b n, n -> b", {"n": "sum"})
    batched = rule.batched([True, False])
    assert batched.text == "vmap0 b n, n -> vmap0 b"
    assert batched.reductions == (("n", "sum"),) and batched.may_split("vmap0")


def test_export_for_one_device_carries_the_kernel_for_each_vendor():
    x = jax.ShapeDtypeStruct((64, 256), jnp.float32)
    rocm = _vendors.plugin_features("rocm") or _vendors.assumed_features("rocm")
    if not rocm.module_image:  # jaxlib before 0.11.1: the HSACO could travel only as a path
        with jtr.target_arch(rocm="gfx942"), pytest.raises(ValueError, match="module_image"):
            jax.export.export(jax.jit(pk.add), platforms=["rocm"],
                              disabled_checks=jtr.disabled_checks())(x, x)
        pytest.skip(f"a ROCm export needs jaxlib 0.11.1+ (here {rocm.detected_from}); the "
                    f"refusal is checked above")
    with jtr.target_arch(cuda="sm_90", rocm="gfx942"):
        exported = jax.export.export(jax.jit(pk.add), platforms=["cuda", "rocm"],
                                     disabled_checks=jtr.disabled_checks())(x, x)
    text = jax.export.deserialize(exported.serialize()).mlir_module()
    targets = re.findall(r"stablehlo\.custom_call @([\w$.]+)\(", text)
    assert len(targets) == 2 and set(targets) <= set(jtr.CUSTOM_CALL_TARGET_NAME.targets), targets
    assert "CustomSPMDPartitioning" not in text


def test_rocm_lowering_on_one_device_launches_the_whole_array():
    call = lowering_utils.lower_one(pk.row_sum, pk.matrix(16, 100), platform="rocm")
    assert call.summary()["launches"][0]["grid"] == (16, 1, 1)


def test_the_tuner_tunes_a_partitioned_call():
    jaxpr = jax.make_jaxpr(pk.tuned_add)(jnp.ones((2, 8)), jnp.ones((2, 8))).jaxpr
    (eqn,) = jaxpr.eqns
    assert eqn.primitive.name == "triton_partitioned" and _tuning._may_call_triton(eqn)


# Which mesh axes split each dimension (`_partition.assign_axes`).

def _assign(rule, specs, sizes, mesh=(("d", 4),), results=()):
    parsed = _partition.parse_rule(*rule if isinstance(rule, tuple) else (rule,))
    sources = [(parsed.operands, specs), (parsed.results, results)]
    return _partition.assign_axes(parsed, sources, sizes, dict(mesh))


def test_a_dimension_that_does_not_divide_evenly_stays_whole():
    assert _assign("b n -> b n", [("d", None)], {"b": 6, "n": 8}) == {}
    assert _assign("b n -> b n", [("d", None)], {"b": 8, "n": 8}) == {"b": ("d",)}


def test_an_unconstrained_or_multi_axis_entry_is_read_as_its_mesh_axes():
    unconstrained = jax.sharding.PartitionSpec.UNCONSTRAINED
    axes = _assign("b n -> b n", [(unconstrained, ("d", "e"))], {"b": 8, "n": 8},
                   mesh=(("d", 2), ("e", 2)))
    assert axes == {"n": ("d", "e")}


def test_a_mesh_axis_splits_one_dimension_only():
    axes = _assign("b n, n b -> b n", [("d", None), ("d", None)], {"b": 8, "n": 8})
    assert axes == {"b": ("d",)}


def test_contracted_dimensions_stay_whole_unless_reduced():
    sizes = {"b": 8, "n": 8}
    assert _assign("b n -> b", [(None, "d")], sizes) == {}
    assert _assign(("b n -> b", {"n": "max"}), [(None, "d")], sizes) == {"n": ("d",)}


def test_several_mesh_axes_may_split_one_dimension_and_outputs_fill_gaps():
    mesh = (("x", 2), ("y", 2))
    sizes = {"b": 8, "n": 8}
    assert _assign("b n -> b n", [(("x", "y"), None)], sizes, mesh) == {"b": ("x", "y")}
    assert _assign("b n -> b n", [None], sizes, mesh, results=[(None, "y")]) == {"n": ("y",)}
    assert _partition.partition_spec(("b", "n"), {"b": ("x", "y")}) == (("x", "y"), None)


def test_partitioned_is_public():
    assert "partitioned" in jtr.__all__
    assert repr(pk.add) == "partitioned('b n, b n -> b n')(add)"
    assert pk.add.__wrapped__ is kernels.add
