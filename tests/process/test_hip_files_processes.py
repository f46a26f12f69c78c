"""Path-delivered HSACO files: removed by the process that wrote them, however it ends, or, when
it ended without removing them, by the next process that makes a folder."""

import os
import signal
import subprocess
import sys
import time

import pytest

from jax_triton_rocm.backends.hip import _hip_files
from tests.support.binary_utils import hip_folder
from tests.support.subprocess_utils import ROOT, child_env, last_line, run_python

WRITE_ONE = """
    import os, signal, sys
    import jax.numpy as jnp
    from jax_triton_rocm.backends.hip import _hip_files
    from tests.support import kernels
    from tests.support.lowering_utils import lower_one, spec
    os.environ["JAX_TRITON_ROCM_HSACO_DELIVERY"] = "path"
    X = spec((4096,), jnp.float32)

    def write_one():
        kernel = lower_one(kernels.add, X, X, platform="rocm").message.kernel_call.kernel
        assert os.path.exists(kernel.ptx)
        return _hip_files.HSACO_FOLDER.path()
"""


@pytest.mark.process
def test_sigterm_removes_the_folder_and_still_runs_the_previous_handler():
    result = run_python(WRITE_ONE + """
    def users_handler(signum, frame):
        print("user's handler ran", flush=True)
        os._exit(7)  # past atexit: only the package's SIGTERM handler can have removed it

    signal.signal(signal.SIGTERM, users_handler)
    print(write_one(), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    """)
    folder, said = result.stdout.strip().splitlines()[-2:]
    assert said == "user's handler ran" and result.returncode == 7, result.stderr[-3000:]
    assert folder.startswith("/") and not os.path.exists(folder)


@pytest.mark.process
def test_sigterm_with_the_default_action_removes_the_folder_and_terminates():
    result = run_python(WRITE_ONE + """
    print(write_one(), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    print("still running")
    """)
    folder = last_line(result)
    assert result.returncode == -signal.SIGTERM, result.stderr[-3000:]
    assert folder.startswith("/") and not os.path.exists(folder)


@pytest.mark.process
def test_a_multiprocessing_child_removes_the_folder_it_made():
    # multiprocessing children leave through os._exit, past atexit.
    result = run_python(WRITE_ONE + """
    import multiprocessing

    def child(queue):
        queue.put(write_one())

    if __name__ == "__main__":
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        process = context.Process(target=child, args=(queue,))
        process.start()
        folder = queue.get(timeout=240)
        process.join(240)
        print(process.exitcode, folder)
    """)
    exitcode, folder = last_line(result).split()
    assert exitcode == "0", result.stderr[-3000:]
    assert not os.path.exists(folder)


@pytest.mark.process
def test_clear_caches_forgets_the_files_so_the_next_lowering_writes_anew():
    result = run_python(WRITE_ONE + """
    import jax_triton_rocm as jtr
    first = lower_one(kernels.add, X, X, platform="rocm").message.kernel_call.kernel.ptx
    jtr.clear_caches()
    again = lower_one(kernels.add, X, X, platform="rocm").message.kernel_call.kernel.ptx
    print(first != again, os.path.exists(again))
    """)
    assert last_line(result) == "True True", result.stderr[-3000:]


# Makes this process's HSACO folder (as its first path-delivered kernel does) and prints it; then
# waits for a line: "os._exit" ends the process past every exit handler, anything else normally.
OWN_A_FOLDER = """
import os, sys
from jax_triton_rocm.backends.hip import _hip_files
print(_hip_files.HSACO_FOLDER.path(), flush=True)
if sys.stdin.readline().strip() == "os._exit":
    os._exit(0)
"""


def _start_owner(env: dict) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-c", OWN_A_FOLDER], env=env, cwd=ROOT,
                               text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    return process, process.stdout.readline().strip()


@pytest.mark.process
def test_a_new_folder_removes_those_of_processes_killed_or_ended_by_os_exit(tmp_path):
    env = child_env({"TMPDIR": str(tmp_path)})
    live = [_start_owner(env) for _ in range(2)]
    try:
        (killed, killed_folder), (ended, ended_folder) = _start_owner(env), _start_owner(env)
        killed.kill()
        killed.wait()
        ended.communicate("os._exit\n", timeout=60)
        assert os.path.isdir(killed_folder) and os.path.isdir(ended_folder)
        result = run_python(OWN_A_FOLDER, env={"TMPDIR": str(tmp_path)})
        assert result.returncode == 0, result.stderr[-3000:]
        assert not os.path.exists(killed_folder) and not os.path.exists(ended_folder)
        assert all(os.path.isdir(folder) for _, folder in live)
    finally:
        for process, _ in live:
            process.communicate("exit\n", timeout=60)
    assert os.listdir(tmp_path) == []  # the live ones removed theirs at exit


@pytest.mark.process
def test_a_folder_of_a_zombie_process_is_removed(tmp_path):
    child = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + 30
        while _hip_files._process_state(child.pid)[0] != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        state, start = _hip_files._process_state(child.pid)
        assert state == "Z"
        folder = hip_folder(tmp_path, _hip_files._pid_namespace(), child.pid, start)
        assert _hip_files.remove_orphaned_folders(str(tmp_path)) == [folder]
    finally:
        child.wait()
