"""The add kernel's entries in Triton's on-disk cache, and two ways to damage one (the tests of
a damaged cache entry, in tests/cpu and tests/process)."""

import json
import os

from tests.support.binary_utils import EM_AMDGPU, EM_CUDA

BINARY = {"cuda": "cubin", "rocm": "hsaco"}
MACHINE = {"cuda": EM_CUDA, "rocm": EM_AMDGPU}


def entry_file(cache_dir, platform: str, which: str) -> str:
    """The file of the add kernel's entry for `platform` named `which`, or ending with it (an
    extension such as ".cubin")."""
    matches = [os.path.join(entry, name) for entry in map(str, cache_dir.iterdir())
               for name in os.listdir(entry)
               if (name == which or which.startswith(".") and name.endswith(which))
               and _entry_platform(entry) == platform]
    assert len(matches) == 1, matches
    return matches[0]


def _entry_platform(entry: str) -> str:
    with open(os.path.join(entry, "add_kernel.json")) as meta:
        return {"cuda": "cuda", "hip": "rocm"}[json.load(meta)["target"]["backend"]]


def truncate(path, platform, cache_dir):
    with open(path, "r+b") as f:
        f.truncate(os.path.getsize(path) // 2)


def garbage(path, platform, cache_dir):
    with open(path, "wb") as f:
        f.write(os.urandom(os.path.getsize(path)))
