"""One launch plan (`plan._plan.launches`) for every route: jaxlib's Triton call, XLA's own,
the CPU interpreter and `triton_call_lowering`; the same verdict on a grid or zeroed outputs
whichever route a call takes."""

import functools

import jax
import jax.numpy as jnp
import pytest
import triton

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.plan import _plan
from tests.support import autotune_utils, kernels, two_apis
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
                                _plan.LaunchSite(BaseBackend, None, _vendors.COMPILE_OPTIONS))


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
    from jax_triton_rocm.kernel import _spec

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


# A grid with a 0 launches nothing, as Triton's launcher skips it, on every route.

def _empty_grid_call(x, y, **call):
    """x + y by `add_kernel` over n=0 elements: a grid of triton.cdiv(0, BLOCK) = 0 programs."""
    call.setdefault("grid", lambda meta: (triton.cdiv(0, meta["BLOCK"]),))
    return jtr.triton_call(x, y, 0, kernel=kernels.add_kernel, out_shape=x, BLOCK=256, **call)


@pytest.mark.parametrize("platform,xla_native", [("cuda", "0"), ("rocm", "0"), ("cuda", "1")],
                         ids=["jaxlib sm_90", "jaxlib gfx942", "xla sm_90"])
@pytest.mark.parametrize("api", two_apis.APIS)
def test_an_empty_grid_lowers_to_no_kernel_call_on_the_gpu_routes(platform, xla_native, api,
                                                                   monkeypatch):
    from jax_triton_rocm.base import _env

    monkeypatch.setenv(_env.ENV_XLA_NATIVE, xla_native)
    fn = two_apis.call_through(api, grid=lambda meta: (0,), zeroed_outputs=(0,))
    lowered = lower_for(fn, two_apis.X, two_apis.X, platform=platform)
    assert jtr.kernel_calls(lowered) == []
    text = lowered.as_text()
    assert "custom_call" not in text and "stablehlo.constant dense<0.0" in text


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_a_skipped_launch_returns_the_aliased_input_and_zeros_for_a_zeroed_output(platform):
    # Output 0 aliases x and is zeroed too: jaxlib zeroes the shared buffer, so zeros.
    text = lower_for(lambda x, y: jtr.triton_call(
        x, y, 0, kernel=kernels.sum_and_diff_kernel, out_shape=(x, y), grid=(0,), BLOCK=256,
        input_output_aliases={0: 0, 1: 1}, zeroed_outputs=(0,)), X, X,
        platform=platform).as_text()
    assert "custom_call" not in text
    assert "return %0, %arg1 :" in text and "stablehlo.constant dense<0.0" in text


def test_a_skipped_launch_returns_the_aliased_input_and_zeros_on_the_cpu():
    x, y = (jax.device_put(jnp.arange(1000, dtype=jnp.float32) + k, CPU) for k in (1, 2))
    zeroed, aliased = jax.jit(lambda x, y: jtr.triton_call(
        x, y, 0, kernel=kernels.sum_and_diff_kernel, out_shape=(x, y), grid=(4, 0), BLOCK=256,
        input_output_aliases={0: 0, 1: 1}, zeroed_outputs=(0,)))(x, y)
    assert (zeroed == 0).all() and (aliased == y).all()


def test_an_empty_problem_gives_empty_outputs_on_the_cpu():
    x = jax.device_put(jnp.zeros((0,), jnp.float32), CPU)
    out = jax.jit(_empty_grid_call)(x, x)
    assert out.shape == (0,) and out.devices() == x.devices()


UNWRITTEN_ROUTES = {
    "jaxlib": lambda fn: lower_for(fn, X, X, platform="cuda"),
    "jaxlib rocm": lambda fn: lower_for(fn, X, X, platform="rocm"),
    "xla_native": lambda fn: lower_for(functools.partial(fn, xla_native=True), X, X,
                                       platform="cuda"),
    "interpreter": lambda fn: jax.jit(fn)(*[jax.device_put(jnp.ones(1000), CPU)] * 2),
}


@pytest.mark.parametrize("route", UNWRITTEN_ROUTES)
def test_an_output_a_skipped_launch_leaves_unwritten_is_refused_naming_it_the_grid_and_the_fix(
        route):
    with pytest.raises(ValueError, match=r"Kernel add_kernel: its grid \(0, 1, 1\) has a 0, so "
                                         r"no program runs .* nothing writes output 0 "
                                         r"\(float32\[1000\]\)\. List the output in "
                                         r"zeroed_outputs .* input_output_aliases"):
        UNWRITTEN_ROUTES[route](_empty_grid_call)


@pytest.mark.parametrize("xla_native", ["0", "1"], ids=["jaxlib", "xla"])
def test_an_autotuned_kernel_whose_every_config_has_an_empty_grid_compiles_nothing(
        xla_native, monkeypatch, fresh_caches):
    from jax_triton_rocm.base import _env, _state

    monkeypatch.setenv(_env.ENV_XLA_NATIVE, xla_native)
    empty = spec((0,), jnp.float32)
    lowered = lower_for(autotune_utils.tuned_add, empty, empty, platform="cuda")
    assert jtr.kernel_calls(lowered) == []
    assert _state.COMPILED_KERNELS.stats["compiles"] == 0


def test_autotune_configs_of_which_only_some_have_an_empty_grid_are_refused():
    x = spec((256,), jnp.float32)
    with pytest.raises(ValueError, match=r"the grids of some autotune configs have a 0 and "
                                         r"others' not \(config \(BLOCK: 128, .*\): grid "
                                         r"\(2, 1, 1\); config \(BLOCK: 256, .*\): grid \(1, 1, "
                                         r"1\); config \(BLOCK: 512, .*\): grid \(0, 1, 1\)\)"):
        lower_for(lambda x, y: jtr.triton_call(
            x, y, x.size, kernel=autotune_utils.tuned_add_kernel, out_shape=x,
            grid=lambda meta: (x.size // meta["BLOCK"],)), x, x, platform="cuda")


@pytest.mark.usefixtures("fresh_caches")
@pytest.mark.parametrize("xla_native", [False, True])
def test_a_kept_plan_relaunched_with_an_empty_grid_launches_nothing(xla_native, monkeypatch):
    # The same kernel and settings at another size, n of the same divisibility (by 16), take
    # the kept plan (`_plan.relaunch`).
    def add(x, y):
        return kernels.add(x, y, zeroed_outputs=(0,), xla_native=xla_native)

    relaunched, relaunch = [], _plan.relaunch
    monkeypatch.setattr(_plan, "relaunch",
                        lambda planned, *args: relaunched.append(planned) or relaunch(planned,
                                                                                     *args))
    full, empty = spec((1024,), jnp.float32), spec((0,), jnp.float32)
    assert len(jtr.kernel_calls(lower_for(add, full, full, platform="cuda"))) == 1
    assert jtr.kernel_calls(lower_for(add, empty, empty, platform="cuda")) == []
    assert relaunched
