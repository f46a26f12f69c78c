"""The stamp that names a remembered Triton key (`compile/_folders.py`) changes with any file
of the installation. The key handed over in a second process:
tests/process/test_triton_key_processes.py."""

from __future__ import annotations

import os

from jax_triton_rocm.compile import _folders


def test_the_stamp_changes_with_any_file_even_with_its_time_put_back(tmp_path):
    tree = tmp_path / "triton"
    (tree / "_C").mkdir(parents=True)
    library = tree / "_C" / "libtriton.so"
    library.write_bytes(b"\x7fELF one")
    (tree / "__pycache__").mkdir()
    before = _folders.installation_stamp(str(tree))
    (tree / "__pycache__" / "x.pyc").write_bytes(b"byte code")  # Triton hashes no byte code
    assert _folders.installation_stamp(str(tree)) == before
    times = os.stat(library)
    library.write_bytes(b"\x7fELF two")  # the same size
    os.utime(library, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert _folders.installation_stamp(str(tree)) != before
    library.write_bytes(b"\x7fELF one")
    os.utime(library, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert _folders.installation_stamp(str(tree)) != before  # its change time moved
