"""Coexisting with jax-triton, which sets TRITON_CACHE_DIR to the empty string when imported.

This file holds the tests that need no GPU and start no Python process; the others are in
tests/process/test_triton_cache_dir_processes.py.
"""

import os




def test_the_default_stays_until_the_last_overlapping_compile_ends(monkeypatch, tmp_path):
    import triton

    from jax_triton_rocm.compile import _folders

    monkeypatch.setenv("TRITON_CACHE_DIR", "")
    monkeypatch.setenv("TRITON_HOME", str(tmp_path))
    default = str(tmp_path / ".triton" / "cache")
    knobs = _folders._override(triton, ())
    _folders._override(triton, ())
    _folders._release(knobs)
    assert triton.knobs.cache.dir == default  # the second compile still runs
    _folders._release(knobs)
    assert triton.knobs.cache.dir == ""
    assert "dir" not in vars(triton.knobs.cache) and os.environ["TRITON_CACHE_DIR"] == ""
