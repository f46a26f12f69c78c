"""Tests that need a GPU (marked `gpu`; skipped, with the reason, where JAX sees none)."""
