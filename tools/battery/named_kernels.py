"""Kernels whose constexpr shares its name with an argument of `triton_call` itself."""

from tests.support.kernels import scaled_by_parameter

BY_NAME = {name: scaled_by_parameter(name) for name in ("name", "grid", "debug", "kernel")}
