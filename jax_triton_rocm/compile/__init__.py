"""`triton.compile` through the one shared kernel cache, configs compiled in parallel."""
