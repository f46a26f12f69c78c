"""Triton's installation key remembered across processes (`compile/_folders.py`): the key
handed to Triton is the one Triton hashes, any change to a file misses the memo, and a memo file
that is damaged, planted as a link, too large, or in a folder others can write is not used. Each
in processes of its own; the stamp itself: tests/cpu/test_triton_key.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from jax_triton_rocm.compile import _folders

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# One process: remember() before any compile, then what Triton's compile would read as its key.
_PROBE = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, ROOT)
    from triton.runtime import cache
    from jax_triton_rocm.compile import _folders
    original = cache.triton_key
    _folders.remember_triton_key()
    print(json.dumps({"handed": cache.triton_key is not original,
                      "equal": cache.triton_key() == original.__wrapped__()}))
""").replace("ROOT", repr(ROOT))


def _run(cache_dir, **env):
    result = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300,
        env={**os.environ, "TRITON_CACHE_DIR": str(cache_dir), "JAX_PLATFORMS": "cpu", **env})
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _memo_files(cache_dir):
    folder = cache_dir / _folders.FOLDER_NAME
    return sorted(folder.iterdir()) if folder.exists() else []


@pytest.fixture
def cache_dir(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    return folder


@pytest.mark.process
def test_the_second_process_gets_the_key_triton_hashes(cache_dir):
    assert _run(cache_dir) == {"handed": False, "equal": True}  # hashed, then remembered
    (memo,) = _memo_files(cache_dir)
    assert memo.suffix == ".key"
    assert _run(cache_dir) == {"handed": True, "equal": True}


@pytest.mark.process
def test_turned_off_by_its_variable(cache_dir):
    off = {"JAX_TRITON_ROCM_REMEMBER_TRITON_KEY": "0"}
    assert _run(cache_dir, **off) == {"handed": False, "equal": True}
    assert _memo_files(cache_dir) == []
    _run(cache_dir)
    assert _run(cache_dir, **off) == {"handed": False, "equal": True}


@pytest.mark.process
@pytest.mark.parametrize("damage", ["wrong version", "not hex", "empty", "too large", "link",
                                    "folder"])
def test_a_damaged_or_planted_memo_is_not_used(cache_dir, tmp_path, damage):
    _run(cache_dir)
    (memo,) = _memo_files(cache_dir)
    key = memo.read_text()
    memo.unlink()
    if damage == "wrong version":
        memo.write_text("0.0.1" + key[key.index("-") - 64:])
    elif damage == "not hex":
        memo.write_text(key[:-1] + "g")
    elif damage == "empty":
        memo.write_text("")
    elif damage == "too large":
        memo.write_text(key + "-" + "0" * 64 * 1100)
    elif damage == "link":
        elsewhere = tmp_path / "planted.key"
        elsewhere.write_text(key)
        memo.symlink_to(elsewhere)
    else:
        memo.mkdir()
    assert _run(cache_dir) == {"handed": False, "equal": True}


@pytest.mark.process
def test_a_folder_others_can_write_is_neither_read_nor_written(cache_dir):
    _run(cache_dir)
    os.chmod(cache_dir / _folders.FOLDER_NAME, 0o777)
    assert _run(cache_dir) == {"handed": False, "equal": True}
    for memo in _memo_files(cache_dir):
        memo.unlink()
    (cache_dir / _folders.FOLDER_NAME).rmdir()
    os.chmod(cache_dir, 0o777)  # a folder not made yet is judged by the folders above it
    assert _run(cache_dir) == {"handed": False, "equal": True}
    assert _memo_files(cache_dir) == []


@pytest.mark.process
def test_the_temporary_file_of_a_killed_writer_is_removed_once_stale(cache_dir):
    _run(cache_dir)
    (memo,) = _memo_files(cache_dir)
    dead, live = (memo.parent / f"{memo.name}.{tag}.tmp" for tag in ("0" * 32, "1" * 32))
    dead.write_text(memo.read_text()[:20])
    os.utime(dead, (1, 1))
    live.write_text(memo.read_text()[:20])
    assert _run(cache_dir) == {"handed": True, "equal": True}
    assert _memo_files(cache_dir) == [memo, live]
