"""A changed `@triton.jit` callee gives a new binary on every route, in the same process and
after `clear_caches()`: a helper rebound in its module (the notebook workflow), one reached
through a module attribute or called by another helper, a helper decorated otherwise, one edited
in place, a global that a helper reads, and the same through a kernel that calls another kernel
(a trampoline)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.compile import _compile
from jax_triton_rocm.routes.xla import _xla_native
from tests.support import callee_helpers, callee_kernels
from tests.support.lowering_utils import capture_one, lower_one, spec

N = 256
X = spec((N,), jnp.float32)
CPU = jax.devices("cpu")[0]


def _call(kernel, xla_native=False):
    def call(x):
        return jtr.triton_call(x, kernel=kernel, out_shape=x, grid=(1,), BLOCK=N,
                               xla_native=xla_native)

    return call


def _gpu(platform):
    def outcome(kernel):
        compiled = capture_one(_call(kernel), X, platform=platform).kernels[0]
        return compiled.ttir, compiled.binary

    return outcome


def _xla_call(kernel):
    ir = lower_one(_call(kernel, xla_native=True), X, platform="cuda").native["ir"]
    return str(_xla_native.parse_ttir(ir)), ir


def _cpu(kernel):
    out = jax.jit(_call(kernel))(jax.device_put(jnp.zeros(N, jnp.float32), CPU))
    return " ".join(f"{float(v):.6e}" for v in np.unique(np.asarray(out))), None


ROUTES = {"sm_90": _gpu("cuda"), "gfx942": _gpu("rocm"), "XLA's call (sm_90)": _xla_call,
          "CPU interpreter": _cpu}


def _rebind(owner, name, value):
    def change(monkeypatch):
        monkeypatch.setattr(owner, name, value)
    return change


def _edit_in_place(monkeypatch):
    """Triton's own way of editing a function's source (`_unsafe_update_src`); returns the undo."""
    del monkeypatch
    helper, source = callee_kernels.helper, callee_kernels.helper.src
    helper._unsafe_update_src(source.replace("1000", "4000"))
    return [lambda: helper._unsafe_update_src(source)]


CHANGES = {
    # name: (kernel, change, constant before, constant after, routes it applies to)
    "a helper rebound in the kernel's module": (
        "calls_helper_kernel", _rebind(callee_kernels, "helper", callee_kernels.other_helper),
        1000, 2000, ROUTES),
    "a helper's helper rebound, reached through a module attribute": (
        "calls_through_module_kernel",
        _rebind(callee_helpers, "leaf", callee_helpers.other_leaf), 100, 200, ROUTES),
    "a helper that reads a global, rebound in": (
        "calls_helper_kernel", _rebind(callee_kernels, "helper", callee_kernels.global_helper),
        1000, 3000, ROUTES),
    "a kernel called by a trampoline kernel, its helper rebound": (
        "trampoline_kernel", _rebind(callee_kernels, "helper", callee_kernels.other_helper),
        1000, 2000, ROUTES),
    # Triton's interpreter runs a function's Python code as loaded, not an edited source.
    "a helper edited in place": (
        "calls_helper_kernel", _edit_in_place, 1000, 4000,
        {k: v for k, v in ROUTES.items() if k != "CPU interpreter"}),
}


@pytest.fixture
def changes(monkeypatch):
    """Applies a change (through `monkeypatch`, or returning its own undo), undone after."""
    undo = []
    yield lambda change: undo.extend(change(monkeypatch) or ())
    for step in reversed(undo):
        step()
    jtr.clear_caches()


def _cases():
    for change_name, (kernel, change, before, after, routes) in CHANGES.items():
        for route in routes:
            for clear in (False, True):
                yield pytest.param(route, kernel, change, before, after, clear,
                                   id=f"{change_name}, {route}, "
                                      f"{'after clear_caches' if clear else 'same process'}")


@pytest.mark.parametrize("route,kernel,change,before,after,clear", list(_cases()))
def test_a_changed_callee_gives_a_new_binary(route, kernel, change, before, after, clear,
                                             changes):
    outcome = ROUTES[route]
    kernel = getattr(callee_kernels, kernel)
    old_text, old_binary = outcome(kernel)
    changes(change)
    if clear:
        jtr.clear_caches()
    new_text, new_binary = outcome(kernel)
    assert f"{before:.6e}" in old_text and f"{after:.6e}" not in old_text
    assert f"{after:.6e}" in new_text, new_text[-2000:]
    if route == "CPU interpreter":  # the whole sum: the old constant is gone from it
        assert f"{before:.6e}" not in new_text
    if old_binary is not None:
        assert new_binary != old_binary


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_a_helper_decorated_otherwise_gives_a_new_binary(platform, changes):
    kernel = callee_kernels.calls_scalar_helper_kernel
    inlined = _gpu(platform)(kernel)
    assert callee_kernels.program_offset_noinline.src == callee_kernels.program_offset.src
    changes(_rebind(callee_kernels, "program_offset", callee_kernels.program_offset_noinline))
    called = _gpu(platform)(kernel)
    assert "tt.call" not in inlined[0] and "tt.call" in called[0]
    assert called[1] != inlined[1]


def test_a_rebound_global_read_by_a_helper_gives_a_new_key(changes):
    kernel = callee_kernels.calls_helper_kernel
    changes(_rebind(callee_kernels, "helper", callee_kernels.global_helper))
    before = _compile.graph_key(kernel)
    changes(_rebind(callee_kernels, "OFFSET", tl.constexpr(3500)))
    after = _compile.graph_key(kernel)
    assert before[0] == after[0] and before[1] != after[1]
    assert ("tests.support.callee_kernels:OFFSET", "constexpr:builtins.int:3500") in after[1]


def test_the_graph_key_follows_a_callee_rebound_in_any_function_of_the_graph(changes):
    trampoline = callee_kernels.trampoline_kernel
    first = _compile.graph_key(trampoline)
    assert _compile.graph_key(trampoline) == first  # nothing changed: nothing parsed again
    changes(_rebind(callee_kernels, "helper", callee_kernels.other_helper))
    second = _compile.graph_key(trampoline)
    assert len(second[0]) == len(first[0]) == 3
    assert second[0][:2] == first[0][:2] and second[0][2] != first[0][2]


def test_an_unchanged_graph_is_not_parsed_again(monkeypatch):
    kernel = callee_kernels.calls_through_module_kernel
    _compile.graph_key(kernel)
    parsed = []
    for fn in (kernel, callee_helpers.middle, callee_helpers.leaf):
        monkeypatch.setattr(fn, "parse", lambda fn=fn: parsed.append(fn) or type(fn).parse(fn))
    _compile.graph_key(kernel)
    assert parsed == []
    monkeypatch.setattr(callee_helpers, "leaf", callee_helpers.other_leaf)
    _compile.graph_key(kernel)
    assert parsed == [callee_helpers.middle]  # the one whose callee changed, and only once
