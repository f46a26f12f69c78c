"""A kernel's name on every route (jaxlib's, XLA's, Triton's interpreter on the CPU): the name
never becomes code, a name Triton can make a symbol of works everywhere with Triton's symbol, and
one it cannot gets the same clear error everywhere.

Triton names a kernel's symbol after the last dotted part of its function's `__qualname__`
(`pkg.add` gives `add`) and refuses one that is not an identifier; `__name__` alone is free.
"""

import uuid

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton

import jax_triton_rocm as jtr
from tests.support import kernels
from tests.support.lowering_utils import lower_for, native_calls, spec

ROUTES = ["jaxlib", "xla", "cpu"]
N = 1024
CPU = jax.devices("cpu")[0]


def _add_kernel(name: str, qualname: str):
    """A fresh add kernel (x, y, n, out; n a runtime scalar, so XLA's route makes a trampoline)
    whose function is named `name` and `qualname` before @triton.jit decorates it. Its source
    is its own: Triton's cache keys a binary on the source, not the name, so another kernel of
    the same text would give its binary, symbol included."""
    fn = kernels.kernel_from_source(f'''
def k(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    # {uuid.uuid4()}
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + tl.load(y_ptr + offsets, mask=mask), mask=mask)
''')
    fn.__name__, fn.__qualname__ = name, qualname
    return triton.jit(fn)


def _run(kernel, route: str):
    """The add through `kernel` on `route`: the symbol the lowering names (GPU routes, lowered
    for sm_90) or the sum of ones (the CPU)."""
    def call(x, y):
        return jtr.triton_call(x, y, x.size, kernel=kernel, out_shape=x, grid=(N // 256,),
                               BLOCK=256, xla_native=route == "xla")

    if route == "cpu":
        ones = jax.device_put(jnp.ones(N, jnp.float32), CPU)
        return np.asarray(jax.jit(call)(ones, ones))
    lowered = lower_for(call, spec((N,), jnp.float32), spec((N,), jnp.float32), platform="cuda")
    if route == "xla":
        [native] = native_calls(lowered)
        return native["name"]
    [emitted] = jtr.kernel_calls(lowered)
    return emitted.message.kernel_call.kernel.kernel_name


# What a name holding code appends to when that code runs.
RAN: list[str] = []


def _code_name(marker: str) -> str:
    """A function name that, pasted into `def NAME(...)` and run, appends `marker` to `RAN`."""
    return f"f(): pass\nimport {__name__} as m; m.RAN.append({marker!r})\ndef g"


@pytest.mark.parametrize("route", ROUTES)
def test_a_qualified_name_holding_code_is_refused_on_every_route_and_never_run(route):
    name = _code_name(f"qualname {route}")
    with pytest.raises(ValueError, match=r"(?s)kernel .*RAN.* cannot be compiled.*"
                                         r"is not an identifier.*fn.__qualname__ = "):
        _run(_add_kernel(name, name), route)
    assert RAN == []


@pytest.mark.parametrize("route", ROUTES)
def test_a_name_holding_code_with_an_identifier_for_qualname_works_and_never_runs(route):
    result = _run(_add_kernel(_code_name(f"name {route}"), "k"), route)
    assert RAN == []
    if route == "cpu":
        np.testing.assert_array_equal(result, np.full(N, 2, np.float32))
    else:
        assert result == "k"


@pytest.mark.parametrize("route", ROUTES)
def test_a_dotted_name_works_on_every_route_with_the_symbol_triton_gives_it(route):
    result = _run(_add_kernel("pkg.add", "pkg.add"), route)
    if route == "cpu":
        np.testing.assert_array_equal(result, np.full(N, 2, np.float32))
    else:
        assert result == "add"


@pytest.mark.parametrize("route", ROUTES)
def test_a_name_that_is_no_identifier_gets_one_clear_error_on_every_route(route):
    with pytest.raises(ValueError, match=r"kernel 'my kernel' cannot be compiled: .*'my kernel' "
                                         r"is not an identifier.*'my_kernel'"):
        _run(_add_kernel("my kernel", "my kernel"), route)


@pytest.mark.parametrize("route", ROUTES)
def test_a_name_holding_a_path_gets_one_clear_error_on_every_route(route):
    with pytest.raises(ValueError, match=r"kernel '\.\./\.\./add' cannot be compiled: Triton "
                                         r"names a kernel's cache files after .*__name__ = 'k'"):
        _run(_add_kernel("../../add", "k"), route)
