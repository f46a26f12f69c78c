"""Stands in for jax-triton 0.3.1 where it matters to this package: importing it empties
Triton's cache directory variable, as jax-triton's `triton_lib.py` does at import."""

import os

os.environ["TRITON_CACHE_DIR"] = ""
