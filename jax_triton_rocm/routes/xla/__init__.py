"""The route through XLA's own Triton custom call."""
