"""`Ref` operands (`jax.new_ref`, jax-triton 0.4's in-place buffers) on every route: jaxlib's
Triton call and XLA's on a GPU (marked `gpu`), Triton's interpreter on the CPU. A Ref is read
before the call and written back after it, so the routes see plain aliasing; `jax.vmap` and
`jax.grad` behave as JAX allows.

The tests on every route (`every_route`) are in tests/support/every_route/refs.py;
tests/cpu/test_refs.py collects them too, where they run on the interpreter, and this
file on the GPU routes.
"""

from tests.support.every_route.refs import *  # noqa: F403  (its tests)
