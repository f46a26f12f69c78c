"""Tests that start Python processes of their own (marked `process`: slow on the CPU)."""
