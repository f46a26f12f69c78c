"""A damaged entry in Triton's on-disk cache: found before its binary is used, compiled again and
replaced, with one warning naming the damaged file.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_cache_damage.py.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.support.cache_entries import BINARY, MACHINE, entry_file, garbage, truncate
from tests.support.subprocess_utils import ROOT, child_env, run_python


# Lowers the add kernel and prints the binary's e_machine and size (0 0: no binary).
LOWER_IN_A_NEW_PROCESS = """
    import sys
    import jax.numpy as jnp
    from tests.support import kernels
    from tests.support.lowering_utils import capture_one, spec
    X = spec((4096,), jnp.float32)
    binary = capture_one(kernels.add, X, X, platform=sys.argv[1]).kernels[0].binary
    print(int.from_bytes(binary[18:20], "little"), len(binary))
"""


@pytest.mark.process
@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_every_later_process_gets_a_whole_binary_and_only_the_first_warns(tmp_path, platform):
    env = {"TRITON_CACHE_DIR": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    code = f"import sys; sys.argv[1:] = [{platform!r}]\n"
    first = run_python(code, LOWER_IN_A_NEW_PROCESS, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    path = entry_file(tmp_path, platform, "." + BINARY[platform])
    truncate(path, platform, tmp_path)
    second = run_python(code, LOWER_IN_A_NEW_PROCESS, env=env)
    third = run_python(code, LOWER_IN_A_NEW_PROCESS, env=env)
    assert second.stdout.split() == third.stdout.split() == first.stdout.split()
    assert first.stdout.split()[0] == str(MACHINE[platform])
    assert path in second.stderr and "is damaged" in second.stderr
    assert "is damaged" not in third.stderr


@pytest.mark.process
def test_eight_processes_sharing_a_damaged_cache_all_get_a_whole_binary(tmp_path):
    env = {"TRITON_CACHE_DIR": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    code = "import sys; sys.argv[1:] = ['cuda']\n" + textwrap.dedent(LOWER_IN_A_NEW_PROCESS)
    whole = run_python(code, env=env)
    garbage(entry_file(tmp_path, "cuda", ".cubin"), "cuda", tmp_path)
    processes = [subprocess.Popen([sys.executable, "-c", code], env=child_env(env), cwd=ROOT,
                                  text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(8)]
    outputs = [process.communicate(timeout=300) for process in processes]
    assert all(process.returncode == 0 for process in processes), outputs[0][1][-3000:]
    assert {out.split()[0] if out else "" for out, _ in outputs} == {str(MACHINE["cuda"])}
    assert {out for out, _ in outputs} == {whole.stdout}


# Lowers the add kernel for sm_90 with at most 16 GiB of address space, so that a read of
# /dev/zero without bound ends in a MemoryError instead of filling the machine.
LOWER_WITH_BOUNDED_MEMORY = """
    import resource
    resource.setrlimit(resource.RLIMIT_AS, (16 << 30, 16 << 30))
    import jax.numpy as jnp
    from tests.support import kernels
    from tests.support.lowering_utils import capture_one, spec
    X = spec((4096,), jnp.float32)
    print(len(capture_one(kernels.add, X, X, platform="cuda").kernels[0].ttir))
"""


@pytest.mark.process
@pytest.mark.parametrize("how", ["a link to /dev/zero", "/dev/zero listed"])
def test_dev_zero_in_an_entry_is_refused_not_read(tmp_path, how):
    env = {"TRITON_CACHE_DIR": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    first = run_python(LOWER_WITH_BOUNDED_MEMORY, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    path = entry_file(tmp_path, "cuda", ".ttir")
    if how == "a link to /dev/zero":
        os.remove(path)
        os.symlink("/dev/zero", path)
    else:
        group_path = entry_file(tmp_path, "cuda", "__grp__add_kernel.json")
        with open(group_path) as f:
            children = json.load(f)["child_paths"]
        children["add_kernel.ttir"] = path = "/dev/zero"
        with open(group_path, "w") as f:
            json.dump({"child_paths": children}, f)
    second = run_python(LOWER_WITH_BOUNDED_MEMORY, env=env, timeout=300)
    assert second.returncode == 0, second.stderr[-3000:]
    assert second.stdout == first.stdout
    assert f"{path}: " in second.stderr and "is damaged" in second.stderr
