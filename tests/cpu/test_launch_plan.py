"""One launch plan (`plan._plan.launches`) for every route: jaxlib's Triton call, XLA's own,
the CPU interpreter and `triton_call_lowering`; the same verdict on a grid or zeroed outputs
whichever route a call takes."""

import jax
import jax.numpy as jnp
import pytest
import triton

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _backend, _vendors
from jax_triton_rocm.plan import _plan
from tests.support import autotune_utils, kernels
from tests.support import library_kernels as lk
from tests.support.lowering_utils import DEFAULT_ARCH, lower_for, spec

X = spec((1000,), jnp.float32)
CPU = jax.devices("cpu")[0]


@pytest.fixture
def planned(monkeypatch):
    """Records the spec of every call the plan is asked for."""
    seen = []
    launches = _plan.launches

    def recording(call_spec, *args, **kwargs):
        seen.append(call_spec)
        return launches(call_spec, *args, **kwargs)

    monkeypatch.setattr(_plan, "launches", recording)
    return seen


def _add(x, y, **kwargs):
    return kernels.add(x, y, **kwargs)


ROUTES = {
    "jaxlib": lambda: lower_for(_add, X, X, platform="cuda"),
    "jaxlib rocm": lambda: lower_for(_add, X, X, platform="rocm"),
    "xla_native": lambda: lower_for(lambda x, y: _add(x, y, xla_native=True), X, X,
                                    platform="cuda"),
    "interpreter": lambda: jax.block_until_ready(jax.jit(_add)(
        jax.device_put(jnp.ones(1000), CPU), jax.device_put(jnp.ones(1000), CPU))),
    "library": lambda: lower_for(lk.sum_diff, X, X, platform="cuda"),
    "library interpreter": lambda: jax.block_until_ready(jax.jit(lk.sum_diff)(
        jax.device_put(jnp.ones(1000), CPU), jax.device_put(jnp.ones(1000), CPU))),
}


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_takes_its_launches_from_the_plan(route, planned):
    jtr.clear_caches()  # no lowered-call memo: the route plans afresh
    ROUTES[route]()
    assert len(planned) == 1 and planned[0].kernel_name in ("add_kernel", "sum_diff_kernel")


@pytest.mark.parametrize("xla_native", [False, True])
def test_a_grid_beyond_the_target_is_refused_on_both_gpu_routes(xla_native):
    with pytest.raises(ValueError, match=r"grid=\(1, 65536, 1\): dimension 1 .* 65535"):
        lower_for(lambda x, y: jtr.triton_call(
            x, y, x.size, kernel=kernels.add_kernel, out_shape=x, grid=(1, 65536), BLOCK=256,
            xla_native=xla_native), X, X, platform="cuda")


def test_zeroed_outputs_returned_by_a_callable_are_checked_on_the_cpu_too():
    x = jax.device_put(jnp.ones(1000), CPU)
    with pytest.raises(ValueError, match=r"zeroed_outputs\(meta\)=\(5,\): 5 is not an output"):
        jax.jit(lambda x: jtr.triton_call(
            x, x, x.size, kernel=kernels.add_kernel, out_shape=x, grid=(4,), BLOCK=256,
            zeroed_outputs=lambda meta: (5,)))(x)


def _launches(fn, *args):
    """The plan of the one call in `fn(*args)`, for a target that checks nothing."""
    from triton.backends.compiler import BaseBackend

    (eqn,) = jax.make_jaxpr(fn)(*args).eqns
    call = eqn.params["spec"]
    return call, _plan.launches(call, (X,) * len(args), (X,),
                                _backend.LaunchSite(BaseBackend, None, _vendors.COMPILE_OPTIONS))


def test_warps_default_to_tritons_in_the_plan_and_configs_keep_their_own():
    x = jnp.ones(1000)
    call, (launch,) = _launches(_add, x, x)
    assert call.num_warps is None and launch.num_warps == _plan.DEFAULT_NUM_WARPS == 4
    _, launches = _launches(autotune_utils.tuned_add, x, x)
    assert [launch.num_warps for launch in launches] == [
        c.num_warps for c in autotune_utils.ADD_CONFIGS]
    assert [launch.grid for launch in launches] == [
        (triton.cdiv(1000, c.kwargs["BLOCK"]), 1, 1) for c in autotune_utils.ADD_CONFIGS]



TYPED_CALLS = {
    "plain, jaxlib": lambda x: _add(x, x),
    "plain, xla_native": lambda x: _add(x, x, xla_native=True),
    "autotuned, jaxlib": lambda x: autotune_utils.tuned_add(x, x),
}


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
@pytest.mark.parametrize("call", TYPED_CALLS)
def test_a_lowering_types_the_calls_values_once_for_its_key_and_every_config(
        platform, call, monkeypatch):
    # The call's check types its values once (`_spec.argument_types`, carried on the spec), for
    # the plan memo's key (whose `compile_view` it holds) and the layout of every autotune
    # config; otherwise the lowering, the key and each config's layout would type them again.
    from jax_triton_rocm.spec import _spec

    typed = []
    for name in ("argument_types", "compile_view"):
        def counting(*args, _typing=getattr(_spec, name), _name=name, **kwargs):
            typed.append(_name)
            return _typing(*args, **kwargs)

        monkeypatch.setattr(_spec, name, counting)
    x = autotune_utils.f32(4096)
    # No layout, lowered call or plan kept by an earlier test: the trace runs the full check.
    jtr.clear_caches()
    with monkeypatch.context() as unpatched:  # the trace's checks type the call too: not counted
        unpatched.setattr(_spec, "argument_types", _spec.argument_types.__kwdefaults__["_typing"])
        unpatched.setattr(_spec, "compile_view", _spec.compile_view.__kwdefaults__["_typing"])
        traced = jax.jit(TYPED_CALLS[call]).trace(x)
    with jtr.target_arch(**{platform: DEFAULT_ARCH[platform]}):
        traced.lower(lowering_platforms=(platform,))
    assert len(autotune_utils.ADD_CONFIGS) > 1
    assert typed == []
