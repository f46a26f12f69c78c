"""`Ref` operands (`jax.new_ref`, jax-triton 0.4's in-place buffers) on every route: jaxlib's
Triton call and XLA's on a GPU (marked `gpu`), Triton's interpreter on the CPU. A Ref is read
before the call and written back after it, so the routes see plain aliasing; `jax.vmap` and
`jax.grad` behave as JAX allows.

The tests on every route (`every_route`) are in tests/support/every_route/refs.py;
tests/cpu/test_refs.py collects them too, where they run on the interpreter, and this
file on the GPU routes.
"""

from tests.support.every_route.refs import (  # run here on this folder's routes
    test_a_ref_is_updated_in_place,
    test_a_ref_beside_an_allocated_output,
    test_a_ref_in_a_tuple,
    test_refs_of_an_autotuned_kernel_are_updated_once,
    test_refs_under_vmap_as_arguments_and_made_inside,
    test_the_same_ref_twice_is_one_buffer_as_in_triton,
)

# Every-route tests, written once in tests/support/every_route/refs.py.
__all__ = [
    "test_a_ref_is_updated_in_place",
    "test_a_ref_beside_an_allocated_output",
    "test_a_ref_in_a_tuple",
    "test_refs_of_an_autotuned_kernel_are_updated_once",
    "test_refs_under_vmap_as_arguments_and_made_inside",
    "test_the_same_ref_twice_is_one_buffer_as_in_triton",
]
