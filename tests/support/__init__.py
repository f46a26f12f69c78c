"""What the tests share and are not tests themselves: kernels, readers, checks and helpers
(`tests/cpu`, `tests/gpu` and `tests/process` import them; so do `conftest.py`, tools/ and
benchmarks/)."""
