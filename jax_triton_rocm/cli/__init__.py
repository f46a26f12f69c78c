"""`python -m jax_triton_rocm`: `info`, the demo and the start-up checks."""
