"""Kernels run through every route a call can take, compared with jax.numpy references: on
Triton's interpreter, on the CPU. The tests are tests/support/every_route/calls.py's
(tests/gpu/test_routes_gpu.py runs them on the GPU routes, with the tests only a GPU can run),
collected here with the routes of this folder (the `routes` mark).
"""

from tests.support.every_route.calls import (  # run here on this folder's routes
    test_vector_add_matches_jnp,
    test_eager_call_outside_jit_matches_jnp,
    test_fused_softmax_matches_jax_nn,
    test_matmul_matches_jnp,
    test_int_float_bool_scalars_reach_the_kernel,
    test_input_output_aliases_with_donation_updates_in_place,
    test_zeroed_outputs_are_zeroed_before_each_launch,
    test_two_outputs_in_pytree_order,
    test_callable_grid_sees_the_metaparameters,
    test_inside_lax_scan,
    test_copy_round_trips_every_dtype,
    test_a_function_given_as_a_constexpr_computes_on_every_route,
)

# Every-route tests, written once in tests/support/every_route/calls.py.
__all__ = [
    "test_vector_add_matches_jnp",
    "test_eager_call_outside_jit_matches_jnp",
    "test_fused_softmax_matches_jax_nn",
    "test_matmul_matches_jnp",
    "test_int_float_bool_scalars_reach_the_kernel",
    "test_input_output_aliases_with_donation_updates_in_place",
    "test_zeroed_outputs_are_zeroed_before_each_launch",
    "test_two_outputs_in_pytree_order",
    "test_callable_grid_sees_the_metaparameters",
    "test_inside_lax_scan",
    "test_copy_round_trips_every_dtype",
    "test_a_function_given_as_a_constexpr_computes_on_every_route",
]
