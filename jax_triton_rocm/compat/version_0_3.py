"""The jax-triton version whose public API `jax_triton_rocm.compat.v0_3` offers (jax-triton's
`jax_triton.version`). The package's own version is `jax_triton_rocm.__version__`."""

__version_info__ = (0, 3, 1)
"""jax-triton's version that `jax_triton_rocm.compat.v0_3` stands in for: code that picks its
call surface by `jax_triton.__version_info__` picks 0.3's, which this module takes."""

__version__ = ".".join(str(part) for part in __version_info__)
"""`__version_info__` as a string, "0.3.1"."""
