"""The chunkwise recurrent kernel of `recurrent_kernels` on a GPU, NVIDIA or AMD, its initial
states made by an earlier kernel of the same jit, on memory poisoned first: on every route (the
default, jaxlib's call, XLA's), one call against two chained calls and against the recurrence in
NumPy; and on the default route, bitwise against the same kernels launched by Triton's own
launcher from PyTorch.
"""

import jax
import numpy as np
import pytest

from tests.support import recurrent_kernels as rk
from tests.support.real_data_kernels import poison_memory

SHAPE = rk.LARGE
NAMES = ("C_states", "N_states", "M_states", "C_last", "N_last", "M_last")
ROUTES = pytest.mark.parametrize("route", [pytest.param(name, marks=pytest.mark.gpu)
                                           for name in ("default", "jaxlib", "xla")],
                                 indirect=True)


def _run(program, inputs) -> tuple[np.ndarray, ...]:
    """`program` jitted on `inputs`, on memory that holds NaN where no kernel writes."""
    poison_memory(1)
    return tuple(np.asarray(out) for out in jax.jit(lambda i: program(SHAPE, i))(inputs))


@ROUTES
def test_two_chained_calls_give_the_states_of_one_call(route):
    inputs = {name: route.put(value) for name, value in rk.make_inputs(SHAPE).items()}
    single, chained = _run(rk.single_run, inputs), _run(rk.chained_run, inputs)
    for name, got, want in zip(NAMES, chained, single, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=name)


@ROUTES
def test_one_call_gives_the_states_of_the_recurrence(route):
    host = rk.make_inputs(SHAPE)
    single = _run(rk.single_run, {name: route.put(value) for name, value in host.items()})
    for name, got, want in zip(NAMES, single, rk.reference(SHAPE, host), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.gpu
@pytest.mark.parametrize("route", ["default"], indirect=True)
def test_the_default_route_matches_tritons_launcher_bitwise(route):
    try:
        import torch
    except ImportError:
        pytest.skip("needs PyTorch to launch the kernels with Triton's own launcher")
    if not torch.cuda.is_available():
        pytest.skip("needs PyTorch with a GPU (CUDA or ROCm) to launch the kernels")
    host = rk.make_inputs(SHAPE)
    ours = _run(rk.single_run, {name: route.put(value) for name, value in host.items()})
    theirs = rk.torch_run(SHAPE, host)
    for name, got, want in zip(NAMES, ours, theirs, strict=True):
        unequal = np.count_nonzero(got.view(np.uint32) != want.view(np.uint32))
        assert unequal == 0, f"{name}: {unequal} of {got.size} elements differ from Triton's"
