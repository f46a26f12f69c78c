"""The tests' lowering helpers: every lowering runs the package's lowering rule, whatever was
lowered before in the same process (no test may depend on the order tests run in)."""

import jax.numpy as jnp

from tests.support import kernels
from tests.support.lowering_utils import capture_one, spec

X = spec((1024,), jnp.float32)


def test_capturing_one_function_twice_sees_a_call_each_time():
    first = capture_one(kernels.add, X, X, platform="cuda")
    second = capture_one(kernels.add, X, X, platform="cuda")
    assert first.kernels[0].name == second.kernels[0].name == "add_kernel"
