"""Files in cache and store folders are read only where they are regular files of the folder,
bounded (`_files.read_entry_file`), and a folder the package reads back from that other users can
write is named in one warning (`_files.others_can_write`, ssh's rule)."""

import logging
import os
import threading
import time

import jax.numpy as jnp
import pytest

from jax_triton_rocm.base import _env, _files, _state
from jax_triton_rocm.routes import _choices
from tests.support import kernels
from tests.support.lowering_utils import lower_for, spec

NOBODY = 65534  # another user's id, to own folders as root
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's folder needs "
                                "root (os.chown)")


def test_a_regular_file_is_read_whole(tmp_path):
    (tmp_path / "f.json").write_bytes(b"[1, 2]")
    assert _files.read_entry_file(str(tmp_path), "f.json", 6) == b"[1, 2]"


def test_a_file_larger_than_its_bound_is_refused(tmp_path):
    (tmp_path / "f.json").write_bytes(b"x" * 1000)
    with pytest.raises(_files.RefusedFile, match="larger than 999 bytes"):
        _files.read_entry_file(str(tmp_path), "f.json", 999)


@pytest.mark.parametrize("name", ["../f.json", "a/f.json", "..", ""])
def test_only_a_name_directly_inside_the_folder_is_read(tmp_path, name):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.json").write_bytes(b"{}")
    with pytest.raises(_files.RefusedFile, match="not the name of a file directly inside"):
        _files.read_entry_file(str(tmp_path / "a"), name, 100)


def test_a_link_to_a_device_is_refused_unopened(tmp_path):
    os.symlink("/dev/zero", tmp_path / "f.ttir")
    with pytest.raises(_files.RefusedFile, match="a symbolic link, not a regular file"):
        _files.read_entry_file(str(tmp_path), "f.ttir", 1 << 20)


def test_a_fifo_is_refused_without_waiting(tmp_path):
    os.mkfifo(tmp_path / "f.ttir")
    outcome = []

    def read():
        try:
            _files.read_entry_file(str(tmp_path), "f.ttir", 100)
        except _files.RefusedFile as err:
            outcome.append(str(err))

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(20)
    blocked = thread.is_alive()
    if blocked:  # the read waits on the FIFO: open its other end to free it
        os.close(os.open(tmp_path / "f.ttir", os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
    assert not blocked and outcome == ["a FIFO, not a regular file"]


def test_a_folder_that_is_a_link_is_not_read_in(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.json").write_bytes(b"{}")
    os.symlink(tmp_path / "real", tmp_path / "entry")
    with pytest.raises(_files.RefusedFile, match="entry is a symbolic link, not a folder"):
        _files.read_entry_file(str(tmp_path / "entry"), "f.json", 100)


def test_deeply_nested_json_is_a_value_error():
    with pytest.raises(ValueError, match="nested too deeply"):
        _files.parse_json(b"[" * 100_000 + b"]" * 100_000)


def _folder(tmp_path, mode, parent_mode=0o755):
    parent = tmp_path / "parent"
    parent.mkdir()
    parent.chmod(parent_mode)
    folder = parent / "cache"
    folder.mkdir()
    folder.chmod(mode)
    return folder


@pytest.mark.parametrize("mode", [0o700, 0o755, 0o1755])
def test_a_folder_only_its_owner_writes_is_safe(tmp_path, mode):
    assert _files.others_can_write(str(_folder(tmp_path, mode))) is None


@pytest.mark.parametrize("mode", [0o775, 0o757, 0o777, 0o1777])
def test_a_folder_its_group_or_others_write_is_not_safe(tmp_path, mode):
    folder = _folder(tmp_path, mode)
    assert _files.others_can_write(str(folder)) == f"{folder} has mode {mode:o}"


def test_a_folder_inside_a_sticky_shared_folder_is_safe(tmp_path):
    assert _files.others_can_write(str(_folder(tmp_path, 0o755, parent_mode=0o1777))) is None


def test_a_folder_inside_a_shared_folder_without_the_sticky_bit_is_not_safe(tmp_path):
    folder = _folder(tmp_path, 0o755, parent_mode=0o777)
    assert _files.others_can_write(str(folder)) == f"{folder.parent} has mode 777"


def test_a_folder_not_made_yet_is_judged_by_the_folders_above_it(tmp_path):
    shared = _folder(tmp_path, 0o777)
    assert _files.others_can_write(str(shared / "new" / "cache")) == f"{shared} has mode 777"


def test_a_folder_not_made_yet_inside_a_sticky_folder_is_safe(tmp_path):
    assert _files.others_can_write(str(_folder(tmp_path, 0o1777) / "new")) is None


@needs_root
@pytest.mark.parametrize("which", ["folder", "parent"])
def test_a_folder_another_user_owns_is_not_safe(tmp_path, which):
    folder = _folder(tmp_path, 0o755)
    owned = folder if which == "folder" else folder.parent
    os.chown(owned, NOBODY, NOBODY)
    assert _files.others_can_write(str(folder)) == f"{owned} is owned by user id {NOBODY}"


def test_only_stale_temporaries_of_this_user_are_removed(tmp_path):
    old = {name: tmp_path / name for name in ("dead-writer.tmp", "data.key", "folder.tmp",
                                              "link.tmp")}
    old["dead-writer.tmp"].write_bytes(b"half a fi")
    old["data.key"].write_bytes(b"a key")
    old["folder.tmp"].mkdir()
    old["link.tmp"].symlink_to(old["data.key"])
    if os.geteuid() == 0:
        old["another-users.tmp"] = tmp_path / "another-users.tmp"
        old["another-users.tmp"].write_bytes(b"theirs")
        os.chown(old["another-users.tmp"], NOBODY, NOBODY)
    for path in old.values():
        os.utime(path, (1, 1), follow_symlinks=False)
    (tmp_path / "live-writer.tmp").write_bytes(b"being writ")
    _files.remove_stale_temporaries(str(tmp_path), stale_seconds=60)
    left = sorted(os.listdir(tmp_path))
    assert left == sorted(name for name in [*old, "live-writer.tmp"] if name != "dead-writer.tmp")


def _temporary_folder(parent, name: str, files: dict[str, bytes], age_s: float = 3600,
                      files_age_s: float | None = None):
    """The folder `name` in `parent` holding `files`, the folder `age_s` old, the files
    `files_age_s` (the same where None)."""
    folder = parent / name
    folder.mkdir()
    for file_name, data in files.items():
        (folder / file_name).write_bytes(data)
    now = time.time()
    for path in folder.iterdir():
        os.utime(path, (now - (files_age_s or age_s),) * 2, follow_symlinks=False)
    os.utime(folder, (now - age_s,) * 2)
    return folder


def test_only_stale_temporary_folders_of_this_user_are_removed(tmp_path):
    entry = tmp_path / "entry"
    entry.mkdir()
    (entry / "add_kernel.cubin").write_bytes(b"kept")
    elsewhere = _temporary_folder(tmp_path, "elsewhere", {"add_kernel.ptx": b"not in the entry"})
    removed = [_temporary_folder(entry, "tmp.pid_1_dead", {"add_kernel.ptx": b"half a fi"}),
               _temporary_folder(entry, "tmp.pid_2_empty", {})]
    kept = [_temporary_folder(entry, "tmp.pid_3_writing", {"add_kernel.ptx": b"being wr"},
                              files_age_s=1),
            _temporary_folder(entry, "tmp.pid_4_just_made", {}, age_s=1),
            _temporary_folder(entry, "tmp.pid_5_many", {f"f{i}": b"x" for i in range(17)}),
            _temporary_folder(entry, "other_prefix", {"add_kernel.ptx": b"old"})]
    odd = _temporary_folder(entry, "tmp.pid_6_odd", {"add_kernel.ptx": b"half a fi"})
    (odd / "link").symlink_to(elsewhere / "add_kernel.ptx")
    os.utime(odd / "link", (1, 1), follow_symlinks=False)
    os.utime(odd, (1, 1))
    kept.append(odd)
    (entry / "tmp.pid_7_link").symlink_to(elsewhere)
    (entry / "tmp.pid_8_file").write_bytes(b"no folder")
    os.utime(entry / "tmp.pid_8_file", (1, 1))
    if os.geteuid() == 0:
        kept.append(_temporary_folder(entry, "tmp.pid_9_theirs", {"add_kernel.ptx": b"theirs"}))
        os.chown(kept[-1], NOBODY, NOBODY)
        kept.append(_temporary_folder(entry, "tmp.pid_10_their_file", {"f": b"theirs"}))
        os.chown(kept[-1] / "f", NOBODY, NOBODY)
    counts = [len(os.listdir(folder)) for folder in kept]
    _files.remove_stale_temporaries(str(entry), stale_seconds=60)
    assert not any(folder.exists() for folder in removed)
    assert sorted(os.listdir(entry)) == sorted(
        ["add_kernel.cubin", "tmp.pid_7_link", "tmp.pid_8_file", *(f.name for f in kept)])
    assert [len(os.listdir(folder)) for folder in kept] == counts
    assert os.listdir(elsewhere) == ["add_kernel.ptx"]


def test_a_link_in_place_of_the_swept_folder_is_refused(tmp_path):
    folder = _temporary_folder(tmp_path, "entry", {})
    _temporary_folder(folder, "tmp.pid_1_dead", {"add_kernel.ptx": b"half a fi"})
    (tmp_path / "link").symlink_to(folder)
    with pytest.raises(_files.RefusedFile, match="a symbolic link, not a folder"):
        _files.remove_stale_temporaries(str(tmp_path / "link"))
    assert os.listdir(folder) == ["tmp.pid_1_dead"]


def unsafe_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if "can be written by other users" in r.getMessage()]


@pytest.fixture
def no_folder_warned(monkeypatch):
    monkeypatch.setattr(_state, "_WARNED", set())


X = spec((1024,), jnp.float32)


def test_a_triton_cache_others_can_write_is_named_in_one_warning(
        tmp_path, monkeypatch, no_folder_warned, fresh_caches, caplog):
    cache = _folder(tmp_path, 0o777)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(cache))
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        lower_for(kernels.add, X, X, platform="cuda")
        lower_for(kernels.add, X, X, platform="rocm")
    warnings = unsafe_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert f"{cache} (TRITON_CACHE_DIR=" in warnings[0] and "chmod go-w" in warnings[0]


def test_a_triton_cache_of_ones_own_gets_no_warning(
        tmp_path, monkeypatch, no_folder_warned, fresh_caches, caplog):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(_folder(tmp_path, 0o755)))
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        lower_for(kernels.add, X, X, platform="cuda")
    assert unsafe_warnings(caplog) == []


def test_an_autotune_store_others_can_write_is_named_in_one_warning(
        tmp_path, monkeypatch, no_folder_warned, fresh_caches, caplog):
    store = _folder(tmp_path, 0o777)
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(store))
    monkeypatch.setattr(_choices, "_swept", set())
    with caplog.at_level(logging.WARNING, logger="jax_triton_rocm"):
        assert _choices.STORE.get("ab" * 32) is None
        assert _choices.STORE.get("cd" * 32) is None
    warnings = unsafe_warnings(caplog)
    assert len(warnings) == 1, warnings
    assert f"{store} ({_env.ENV_AUTOTUNE_DIR}=" in warnings[0]
