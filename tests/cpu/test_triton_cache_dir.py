"""Coexisting with jax-triton, which sets TRITON_CACHE_DIR to the empty string when imported.

This file holds the tests that need no GPU and start no Python process; the others are in
tests/process/test_triton_cache_dir_processes.py.
"""

import os




def test_the_default_stays_until_the_last_overlapping_compile_ends(monkeypatch, tmp_path):
    import triton

    from jax_triton_rocm.base import _files

    monkeypatch.setenv("TRITON_CACHE_DIR", "")
    monkeypatch.setenv("TRITON_HOME", str(tmp_path))
    default = str(tmp_path / ".triton" / "cache")
    first, second = (_files.usable_cache_dir(triton) for _ in range(2))
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert triton.knobs.cache.dir == default  # the second compile still runs
    second.__exit__(None, None, None)
    assert triton.knobs.cache.dir == ""
    assert "dir" not in vars(triton.knobs.cache) and os.environ["TRITON_CACHE_DIR"] == ""
