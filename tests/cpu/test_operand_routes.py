"""jax-triton 0.4's operands on every route, here Triton's interpreter on the CPU: the tests of
tests/support/every_route/operands.py, collected here with the routes of this folder (the `routes`
mark).
"""

from tests.support.every_route.operands import (  # run here on this folder's routes
    test_keyword_operands_around_a_constexpr,
    test_an_output_whose_pointer_precedes_an_operands,
    test_nested_tuples_of_mixed_dtypes,
    test_an_aliased_output_before_one_with_a_pointer,
    test_the_0_4_alias_layout_updates_in_place_and_zeroes_through_the_input,
    test_a_host_descriptor_reads_its_block_and_pads,
    test_descriptors_built_inside_the_kernel,
)

# Every-route tests, written once in tests/support/every_route/operands.py.
__all__ = [
    "test_keyword_operands_around_a_constexpr",
    "test_an_output_whose_pointer_precedes_an_operands",
    "test_nested_tuples_of_mixed_dtypes",
    "test_an_aliased_output_before_one_with_a_pointer",
    "test_the_0_4_alias_layout_updates_in_place_and_zeroes_through_the_input",
    "test_a_host_descriptor_reads_its_block_and_pads",
    "test_descriptors_built_inside_the_kernel",
]
