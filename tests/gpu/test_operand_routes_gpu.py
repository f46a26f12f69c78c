"""jax-triton 0.4's operands on every route (jaxlib's Triton call and XLA's on a GPU, marked
`gpu`; Triton's interpreter on the CPU): keyword operands, tuples, an output whose pointer comes
before an operand's, 0.4's alias layout with zeroed outputs, and `TensorDescriptor`s, host-side
(a TMA map on sm_90+, plain parameters elsewhere) and built inside the kernel.

The tests on every route (`every_route`) are in tests/support/every_route/operands.py;
tests/cpu/test_operand_routes.py collects them too, where they run on the interpreter, and this
file on the GPU routes.
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
