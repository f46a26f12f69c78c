"""Path-delivered HSACO files: removed by the process that wrote them, however it ends, or, when
it ended without removing them, by the next process that makes a folder.

This file holds the tests that need no GPU and start no Python process; the others are in
tests/process/test_hip_files_processes.py.
"""

import os
import threading

from jax_triton_rocm.backends.hip import _hip_files
from tests.support.binary_utils import hip_folder


def _this_process() -> tuple[str, int, str]:
    return _hip_files._pid_namespace(), os.getpid(), _hip_files._process_state(os.getpid())[1]


def test_a_folder_of_a_live_process_is_kept_and_a_reused_pid_is_told_by_its_start_time(tmp_path):
    namespace, pid, start = _this_process()
    mine = hip_folder(tmp_path, namespace, pid, start)
    reused = hip_folder(tmp_path, namespace, pid, int(start) - 1)  # an earlier process, same PID
    assert _hip_files.remove_orphaned_folders(str(tmp_path)) == [reused]
    assert os.path.isdir(mine)


def test_folders_whose_owner_cannot_be_seen_are_kept(tmp_path):
    namespace, pid, start = _this_process()
    other_namespace = hip_folder(tmp_path, int(namespace) + 1, 2**22 + 7, start)
    unnamed = os.path.join(str(tmp_path), _hip_files.FOLDER_PREFIX + "k2j4n1")  # no owner
    os.makedirs(unnamed)
    assert _hip_files.remove_orphaned_folders(str(tmp_path)) == []
    assert os.path.isdir(other_namespace) and os.path.isdir(unnamed)


def test_two_cleaners_at_once_remove_every_dead_folder_without_an_error(tmp_path):
    namespace, _, _ = _this_process()
    dead = [hip_folder(tmp_path, namespace, 2**22 + i, 1) for i in range(40)]
    errors = []

    def clean():
        try:
            _hip_files.remove_orphaned_folders(str(tmp_path))
        except Exception as err:  # noqa: BLE001  (collected for the assertion)
            errors.append(err)

    threads = [threading.Thread(target=clean) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == [] and not any(os.path.exists(folder) for folder in dead)
