"""Triton's folders that cannot be made or written, wherever they come from: the default cache
folder under HOME or TRITON_HOME (a read-only HOME, one under a file, one that cannot be made, a
TRITON_HOME that is a file), too long a TRITON_CACHE_DIR, a TRITON_DUMP_DIR under a file. Each
gives one warning naming the variable and the folder, and kernels compile in a private folder.

Triton reads HOME once, when it is imported, so those cases run in a fresh process. A read-only
HOME is a read-only bind mount in a private mount namespace (`unshare`): the tests run as root
here, for whom permission bits do not stop a write.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_cache_homes.py.
"""


import pytest

from tests.support.lowering_utils import lower_add_in_fresh_process, the_folder_warning


@pytest.mark.process
def test_a_home_under_a_file(tmp_path):
    (tmp_path / "a-file").write_text("")
    home = str(tmp_path / "a-file" / "home")
    warnings = lower_add_in_fresh_process(tmp_path, {"HOME": home})
    the_folder_warning(warnings, "HOME", f"{home}/.triton/cache", "Not a directory")


@pytest.mark.process
def test_a_home_that_cannot_be_made(tmp_path):
    warnings = lower_add_in_fresh_process(tmp_path, {"HOME": "/proc/no-such-home"})
    the_folder_warning(warnings, "HOME", "/proc/no-such-home/.triton/cache", "No such file")


@pytest.mark.process
def test_a_triton_home_that_is_a_file(tmp_path):
    (tmp_path / "a-file").write_text("")
    home = str(tmp_path / "a-file")
    warnings = lower_add_in_fresh_process(tmp_path, {"TRITON_HOME": home})
    the_folder_warning(warnings, "TRITON_HOME", f"{home}/.triton/cache", "Not a directory")
