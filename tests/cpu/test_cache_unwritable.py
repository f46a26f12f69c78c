"""A Triton cache folder that cannot be written: kernels compile anyway, without it, after one
warning; failures of the environment are not remembered as the kernel's.

Tests run as root here, where a read-only folder is writable anyway; unwritable folders are a
folder under a file (NotADirectoryError for everyone) and Triton's cache writes refused with the
PermissionError a read-only folder gives other users (monkeypatched).
"""

import errno
import logging
import os

import jax
import jax.numpy as jnp
import pytest
import triton
import triton.language as tl
from triton.runtime import cache as triton_cache

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state
from jax_triton_rocm.compile import _cache, _errors, _folders
from tests.support import kernels
from tests.support.lowering_utils import capture_one, spec

X = spec((4096,), jnp.float32)


@triton.jit
def negate_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, -tl.load(x_ptr + offsets))


def negate(x):
    # jaxlib's route: these tests read the binary the call carries.
    return jtr.triton_call(x, kernel=negate_kernel, out_shape=x, grid=(16,), BLOCK=256,
                           xla_native=False)


def lowered_binary(fn, platform="cuda") -> bytes:
    jtr.clear_caches()
    binary = capture_one(fn, X, platform=platform).kernels[0].binary
    assert _cache.binary_problem(binary, {"cuda": "cuda", "rocm": "hip"}[platform]) is None
    return binary


def private_folders(temp_root) -> list[str]:
    """The private cache folders left in `temp_root` (HSACO folders of path delivery may be
    there too)."""
    return [n for n in os.listdir(temp_root) if n.startswith("jax_triton_rocm_triton_cache_")]


def unwritable_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "cannot be written" in r.getMessage()]


def test_a_cache_folder_under_a_file_compiles_with_one_warning(tmp_path, temp_root,
                                                               monkeypatch, caplog):
    (tmp_path / "a-file").write_text("")
    folder = str(tmp_path / "a-file" / "cache")
    monkeypatch.setenv("TRITON_CACHE_DIR", folder)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        lowered_binary(lambda x: kernels.add(x, x), platform="cuda")
        lowered_binary(lambda x: kernels.add(x, x), platform="rocm")
        lowered_binary(negate, platform="rocm")
    [warning] = unwritable_warnings(caplog)
    assert f"TRITON_CACHE_DIR={folder!r}" in warning and "Not a directory" in warning
    assert private_folders(temp_root) == []


def _refuse_writes_under(folder: str, monkeypatch) -> None:
    """Makes Triton's cache writes under `folder` fail as in a read-only folder."""
    put = triton_cache.FileCacheManager.put

    def read_only_put(self, data, filename, binary=True):
        if self.cache_dir.startswith(folder):
            path = os.path.join(self.cache_dir, filename)
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return put(self, data, filename, binary)

    monkeypatch.setattr(triton_cache.FileCacheManager, "put", read_only_put)


def test_a_read_only_cache_folder_compiles_with_one_warning(tmp_path, temp_root, monkeypatch,
                                                            caplog):
    folder = str(tmp_path / "read-only")
    monkeypatch.setenv("TRITON_CACHE_DIR", folder)
    _refuse_writes_under(folder, monkeypatch)
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        lowered_binary(negate)
        lowered_binary(lambda x: kernels.add(x, x))
    [warning] = unwritable_warnings(caplog)
    assert "TRITON_CACHE_DIR" in warning and "Permission denied" in warning
    assert private_folders(temp_root) == []


def test_the_same_process_caches_again_once_the_folder_is_fixed(tmp_path, temp_root,
                                                                monkeypatch):
    (tmp_path / "a-file").write_text("")
    folder = tmp_path / "a-file" / "cache"
    monkeypatch.setenv("TRITON_CACHE_DIR", str(folder))
    unwritable = lowered_binary(negate)
    (tmp_path / "a-file").unlink()
    assert lowered_binary(negate) == unwritable
    assert [name for entry in folder.iterdir() for name in os.listdir(entry)
            if name.endswith(".cubin")] == ["negate_kernel.cubin"]


def _fill_the_disk(folder: str, monkeypatch) -> None:
    """Makes Triton's cache writes under `folder` fail half-way, as on a full disk."""

    class HalfWritten:
        def __init__(self, file):
            self.file = file

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.file.close()

        def write(self, data):
            self.file.write(data[:len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")

    def full_disk_open(path, mode="r", *args, **kwargs):
        file = open(path, mode, *args, **kwargs)
        return HalfWritten(file) if "w" in mode and path.startswith(folder) else file

    monkeypatch.setattr(triton_cache, "open", full_disk_open, raising=False)


def test_the_folders_of_writes_a_full_disk_stopped_are_removed_a_minute_later(
        cache_dir, temp_root, monkeypatch):
    with monkeypatch.context() as full:
        _fill_the_disk(str(cache_dir), full)
        lowered_binary(negate)
    [entry] = [path for path in cache_dir.iterdir() if path.name != _folders.FOLDER_NAME]
    [left] = os.listdir(entry)  # one write failed, and the compile went on in a private folder
    assert left.startswith("tmp.pid_") and os.listdir(entry / left), left
    lowered_binary(negate)  # too young to be removed: a writer may be in it
    assert left in os.listdir(entry)
    for path in [*(entry / left).iterdir(), entry / left]:
        os.utime(path, (1, 1))
    lowered_binary(negate)
    assert left not in os.listdir(entry) and "negate_kernel.cubin" in os.listdir(entry)


def test_a_failure_of_the_environment_is_not_remembered(temp_root, monkeypatch):
    compile_fn = triton.compile

    def failing_compile(*args, **kwargs):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(triton, "compile", failing_compile)
    jtr.clear_caches()
    with pytest.raises(OSError, match="Input/output error"):
        capture_one(negate, X, platform="cuda")
    monkeypatch.setattr(triton, "compile", compile_fn)
    jax.clear_caches()  # JAX's lowerings only: the package's kernel cache keeps what it holds
    _state.COMPILED_KERNELS.stats.clear()
    capture_one(negate, X, platform="cuda")
    assert _state.COMPILED_KERNELS.stats["compiles"] == 1


def test_a_failure_of_the_kernel_is_still_remembered():
    err = RuntimeError("PassManager::run failed")
    cache = _state.KernelCache()

    _, held = cache.claim("key")
    cache.finish("key", err, keep=_errors.is_kernel_error(err))
    held.release()
    with pytest.raises(RuntimeError):
        cache.claim("key")
    assert cache.stats["failures"] == 1 and cache.stats["hits"] == 1


@pytest.mark.parametrize("error,kernels_own", [
    (OSError(errno.EROFS, "Read-only file system"), False),
    (PermissionError(errno.EACCES, "Permission denied"), False),
    (MemoryError(), False),
    (RuntimeError("Could not create or locate cache dir"), False),
    (UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"), False),
    (RuntimeError("PassManager::run failed"), True),
    (_errors.KernelPassFailure("Triton's compiler passes rejected kernel k"), True),
    (ValueError("num_warps must be a power of 2"), True),
    (AssertionError("num_ctas must be 1"), True),
    (NotImplementedError("fp8e4nv not supported on gfx942"), True),
], ids=lambda v: type(v).__name__ if isinstance(v, BaseException) else str(v))
def test_errors_of_the_environment_are_told_from_the_kernels(error, kernels_own):
    assert _errors.is_kernel_error(error) is kernels_own


def test_a_triton_compile_error_is_the_kernels():
    from triton.compiler.errors import CompilationError, CompileTimeAssertionFailure
    from triton.runtime.errors import PTXASError

    assert _errors.is_kernel_error(CompilationError("", None, None))
    assert _errors.is_kernel_error(CompileTimeAssertionFailure("", None, None))
    assert _errors.is_kernel_error(PTXASError("ptxas failed"))


def test_a_private_folder_lives_until_the_last_compile_using_it_ends(temp_root, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", "/the/users/folder")
    knobs = _folders._override(triton, ("dir",))
    private = triton.knobs.cache.dir
    assert os.path.dirname(private) == str(temp_root) and os.path.isdir(private)
    _folders._override(triton, ("dir",))
    assert triton.knobs.cache.dir == private  # one private folder for both
    _folders._release(knobs)
    assert os.path.isdir(private) and triton.knobs.cache.dir == private
    _folders._release(knobs)
    assert not os.path.exists(private)
    assert triton.knobs.cache.dir == "/the/users/folder"
    assert "dir" not in vars(triton.knobs.cache)


def test_a_private_folder_outlives_a_compile_that_began_without_one(temp_root, monkeypatch):
    # A compile that needed no override is still in flight when another's private folder would
    # be undone: the knobs stay on it, and the folder stays, until the first compile ends too.
    monkeypatch.setenv("TRITON_CACHE_DIR", "/the/users/folder")
    knobs = _folders._override(triton, ())
    assert triton.knobs.cache.dir == "/the/users/folder"  # nothing overridden for it
    _folders._override(triton, ("dir",))
    private = triton.knobs.cache.dir
    assert os.path.dirname(private) == str(temp_root) and os.path.isdir(private)
    _folders._release(knobs)
    assert triton.knobs.cache.dir == private and os.path.isdir(private)
    _folders._release(knobs)
    assert not os.path.exists(private)
    assert triton.knobs.cache.dir == "/the/users/folder"
    assert "dir" not in vars(triton.knobs.cache)


@pytest.mark.parametrize("error,reason", [
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/c/cache"), True),
    (NotADirectoryError(errno.ENOTDIR, "Not a directory", "/c"), True),
    (PermissionError(errno.EACCES, "Permission denied", "/c/cache/KEY/tmp.pid_1/k.json"), True),
    (OSError(errno.ENOSPC, "No space left on device"), True),
    (FileNotFoundError(errno.ENOENT, "No such file", "/usr/bin/ptxas"), False),
    (PermissionError(errno.EACCES, "Permission denied", "/c/cache-other/x"), False),
], ids=["the folder", "a folder above it", "a file in it", "full disk", "elsewhere",
        "a sibling folder"])
def test_only_errors_about_the_cache_folder_fall_back(error, reason):
    assert (_folders.unwritable_reason(error, "/c/cache") is not None) is reason
