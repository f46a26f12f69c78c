"""Triton's folders that cannot be made or written, wherever they come from: the default cache
folder under HOME or TRITON_HOME (a read-only HOME, one under a file, one that cannot be made, a
TRITON_HOME that is a file), too long a TRITON_CACHE_DIR, a TRITON_DUMP_DIR under a file. Each
gives one warning naming the variable and the folder, and kernels compile in a private folder.

Triton reads HOME once, when it is imported, so those cases run in a fresh process. A read-only
HOME is a read-only bind mount in a private mount namespace (`unshare`): the tests run as root
here, for whom permission bits do not stop a write.
"""

import logging
import os

import jax.numpy as jnp
import pytest
import triton

from jax_triton_rocm.compile import _folders
from tests.support import kernels
from tests.support.lowering_utils import (capture_one, lower_add_in_fresh_process, spec,
                                          the_folder_warning)
from tests.support.subprocess_utils import mount_namespaces

X = spec((1024,), jnp.float32)


@pytest.mark.skipif(not mount_namespaces(), reason="needs unshare -rm (user and mount "
                    "namespaces) to make a read-only HOME for root")
def test_a_read_only_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    read_only = (f"mount --bind {home} {home} && mount -o remount,ro,bind {home} {home} && "
                 f'exec "$@"')
    warnings = lower_add_in_fresh_process(tmp_path, {"HOME": str(home)},
                                       prefix=("unshare", "-rm", "sh", "-c", read_only, "sh"))
    the_folder_warning(warnings, "HOME", f"{home}/.triton/cache", "Read-only file system")
    assert os.listdir(home) == []


@pytest.fixture
def temp_root(temp_root, monkeypatch):
    """conftest's private folder for the package's temporary folders, before this process has
    made its private dump folder."""
    monkeypatch.setattr(_folders, "_private", {})
    return temp_root


def _lowered_add(platform="cuda"):
    return capture_one(lambda x, y: kernels.add(x, y), X, X, platform=platform).kernels[0]


def test_too_long_a_cache_folder(tmp_path, temp_root, monkeypatch, caplog):
    folder = str(tmp_path / "/".join(["d" * 200] * 25))  # beyond PATH_MAX, 4096 bytes
    monkeypatch.setenv("TRITON_CACHE_DIR", folder)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        _lowered_add()
    warnings = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
    warning = the_folder_warning(warnings, "TRITON_CACHE_DIR", f"{len(folder)} characters",
                           "File name too long")
    assert len(warning) < 1200  # the folder is shown by its ends
    assert os.listdir(temp_root) == []


def test_a_dump_folder_under_a_file(tmp_path, temp_root, monkeypatch, caplog):
    (tmp_path / "a-file").write_text("")
    folder = str(tmp_path / "a-file" / "dump")
    monkeypatch.setenv("TRITON_KERNEL_DUMP", "1")
    monkeypatch.setenv("TRITON_ALWAYS_COMPILE", "1")  # Triton dumps what it compiles
    monkeypatch.setenv("TRITON_DUMP_DIR", folder)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        _lowered_add("cuda")
        _lowered_add("rocm")
    warnings = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
    warning = the_folder_warning(warnings, "TRITON_DUMP_DIR", folder, "Not a directory")
    [dumps] = os.listdir(temp_root)
    assert dumps.startswith("jax_triton_rocm_triton_dump_") and str(temp_root / dumps) in warning
    dumped = [name for _, _, names in os.walk(temp_root / dumps) for name in names]
    assert "add_kernel.ttir" in dumped
    assert triton.knobs.cache.dump_dir == folder  # the knob is given back
