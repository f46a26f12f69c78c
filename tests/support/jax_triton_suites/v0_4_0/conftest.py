"""jax-triton 0.4.0's own tests, with `import jax_triton` giving the package's 0.4 drop-in."""

import jax_triton_rocm.compat

jax_triton_rocm.compat.install_as_jax_triton("0.4")
