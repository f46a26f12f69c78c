"""Tests that need no GPU and start no Python process: the quick run on any machine."""
