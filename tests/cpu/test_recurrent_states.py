"""A chunkwise recurrent kernel whose initial states come from an earlier kernel of the same jit
(`recurrent_kernels`), on the CPU: run in Triton's interpreter, as one call and as two chained
calls, against the recurrence in NumPy; and lowered for sm_90 and gfx942 on jaxlib's route (the
default) and XLA's (asked), which compiles it for both. The same programs run on a GPU, on every
route and against Triton's own launcher, in test_gpu_recurrent_states.py.
"""

import jax
import numpy as np
import pytest

from jax_triton_rocm.base import _compat, _env
from tests.support import recurrent_kernels as rk
from tests.support.lowering_utils import call_targets

CPU = jax.devices("cpu")[0]
SHAPE = rk.SMALL
NAMES = ("C_states", "N_states", "M_states", "C_last", "N_last", "M_last")


@pytest.fixture(scope="module")
def inputs():
    return {name: jax.device_put(value, CPU) for name, value in rk.make_inputs(SHAPE).items()}


@pytest.fixture(scope="module")
def single(inputs):
    return jax.jit(lambda i: rk.single_run(SHAPE, i))(inputs)


def test_one_call_gives_the_states_of_the_recurrence(inputs, single):
    expected = rk.reference(SHAPE, rk.make_inputs(SHAPE))
    for name, got, want in zip(NAMES, single, expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_two_chained_calls_give_the_states_of_one_call(inputs, single):
    chained = jax.jit(lambda i: rk.chained_run(SHAPE, i))(inputs)
    for name, got, want in zip(NAMES, chained, single, strict=True):
        assert np.array_equal(got, want), name


def _targets(program, platform):
    """The custom call of each kernel of `program`, lowered for `platform` on the CPU."""
    args = {name: jax.ShapeDtypeStruct(value.shape, value.dtype)
            for name, value in rk.make_inputs(SHAPE).items()}
    return call_targets(lambda i: program(SHAPE, i), args, platform=platform)


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
@pytest.mark.parametrize("program,calls", [(rk.single_run, 4), (rk.chained_run, 5)],
                         ids=["one call", "two chained calls"])
@pytest.mark.usefixtures("fresh_lowerings")
def test_the_programs_compile_for_sm_90_and_gfx942_on_jaxlibs_route(platform, program, calls):
    assert _targets(program, platform) == [_compat.FFI_CALL_NAME] * calls


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
@pytest.mark.parametrize("program,calls", [(rk.single_run, 4), (rk.chained_run, 5)],
                         ids=["one call", "two chained calls"])
@pytest.mark.usefixtures("fresh_lowerings")
def test_the_programs_compile_for_sm_90_and_gfx942_on_xlas_route(monkeypatch, platform, program,
                                                                  calls):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "1")  # as the GPU tests' `xla` route does
    assert _targets(program, platform) == [_compat.XLA_TRITON_CALL_NAME] * calls
