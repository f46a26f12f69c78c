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

from jax_triton_rocm.compile import _cache
from tests.support import kernels
from tests.support.lowering_utils import LOWER_ADD_LOGGING_WARNINGS, capture_one, spec
from tests.support.subprocess_utils import mount_namespaces, run_python

X = spec((1024,), jnp.float32)
TRITON_FOLDERS = ("TRITON_CACHE_DIR", "TRITON_HOME", "TRITON_DUMP_DIR", "TRITON_KERNEL_DUMP")



def _lower_in_fresh_process(tmp_path, env, prefix=()):
    """Lowers an add for sm_90 in a new process with `env` and no Triton folder variable but
    those `env` sets; returns the warnings it logged. Its temporary folder must end empty."""
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    result = run_python(LOWER_ADD_LOGGING_WARNINGS, prefix=prefix,
                        env={**env, "TMPDIR": str(temporary), "JAX_PLATFORMS": "cpu"},
                        unset=tuple(name for name in TRITON_FOLDERS if name not in env))
    assert result.returncode == 0 and "lowered 1" in result.stdout, result.stderr[-3000:]
    assert os.listdir(temporary) == []
    return [line for line in result.stderr.splitlines() if line.startswith("LOG jax_triton_rocm")]


def _the_warning(warnings, variable, folder, reason):
    [warning] = warnings
    assert "cannot be written" in warning and reason in warning, warning
    assert f"{variable}=" in warning and folder in warning, warning
    return warning


@pytest.mark.skipif(not mount_namespaces(), reason="needs unshare -rm (user and mount "
                    "namespaces) to make a read-only HOME for root")
def test_a_read_only_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    read_only = (f"mount --bind {home} {home} && mount -o remount,ro,bind {home} {home} && "
                 f'exec "$@"')
    warnings = _lower_in_fresh_process(tmp_path, {"HOME": str(home)},
                                       prefix=("unshare", "-rm", "sh", "-c", read_only, "sh"))
    _the_warning(warnings, "HOME", f"{home}/.triton/cache", "Read-only file system")
    assert os.listdir(home) == []


@pytest.fixture
def temp_root(temp_root, monkeypatch):
    """conftest's private folder for the package's temporary folders, before this process has
    made its private dump folder."""
    monkeypatch.setattr(_cache, "_private_dump", None)
    return temp_root


def _lowered_add(platform="cuda"):
    return capture_one(lambda x, y: kernels.add(x, y), X, X, platform=platform).kernels[0]


def test_too_long_a_cache_folder(tmp_path, temp_root, monkeypatch, caplog):
    folder = str(tmp_path / "/".join(["d" * 200] * 25))  # beyond PATH_MAX, 4096 bytes
    monkeypatch.setenv("TRITON_CACHE_DIR", folder)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        _lowered_add()
    warnings = [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]
    warning = _the_warning(warnings, "TRITON_CACHE_DIR", f"{len(folder)} characters",
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
    warning = _the_warning(warnings, "TRITON_DUMP_DIR", folder, "Not a directory")
    [dumps] = os.listdir(temp_root)
    assert dumps.startswith("jax_triton_rocm_triton_dump_") and str(temp_root / dumps) in warning
    dumped = [name for _, _, names in os.walk(temp_root / dumps) for name in names]
    assert "add_kernel.ttir" in dumped
    assert triton.knobs.cache.dump_dir == folder  # the knob is given back
