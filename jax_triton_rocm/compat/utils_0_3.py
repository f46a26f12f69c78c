"""jax-triton 0.3.1's `jax_triton.utils` (`jax_triton_rocm.compat.v0_3`'s `utils`): the same
three helpers, from the same place (Pallas)."""

from jax.experimental.pallas import cdiv, next_power_of_2, strides_from_shape

__all__ = ["cdiv", "strides_from_shape", "next_power_of_2"]
