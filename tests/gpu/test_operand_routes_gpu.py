"""jax-triton 0.4's operands on every route (jaxlib's Triton call and XLA's on a GPU, marked
`gpu`; Triton's interpreter on the CPU): keyword operands, tuples, an output whose pointer comes
before an operand's, 0.4's alias layout with zeroed outputs, and `TensorDescriptor`s, host-side
(a TMA map on sm_90+, plain parameters elsewhere) and built inside the kernel.

The tests on every route (`every_route`) are in tests/support/every_route/operands.py;
tests/cpu/test_operand_routes.py collects them too, where they run on the interpreter, and this
file on the GPU routes.
"""

from tests.support.every_route.operands import *  # noqa: F403  (its tests)
