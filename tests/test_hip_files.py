"""Path-delivered HSACO files: removed by the process that wrote them, however it ends."""

import os
import signal

from tests.subprocess_utils import last_line, run_python

WRITE_ONE = """
    import os, signal, sys
    import jax.numpy as jnp
    from jax_triton_rocm.backends.hip import _hip_files
    from tests import kernels
    from tests.lowering_utils import lower_one, spec
    os.environ["JAX_TRITON_ROCM_HSACO_DELIVERY"] = "path"
    X = spec((4096,), jnp.float32)

    def write_one():
        kernel = lower_one(kernels.add, X, X, platform="rocm").message.kernel_call.kernel
        assert os.path.exists(kernel.ptx)
        return _hip_files.HSACO_FOLDER.path()
"""


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


def test_sigterm_with_the_default_action_removes_the_folder_and_terminates():
    result = run_python(WRITE_ONE + """
    print(write_one(), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)
    print("still running")
    """)
    folder = last_line(result)
    assert result.returncode == -signal.SIGTERM, result.stderr[-3000:]
    assert folder.startswith("/") and not os.path.exists(folder)


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


def test_clear_caches_forgets_the_files_so_the_next_lowering_writes_anew():
    result = run_python(WRITE_ONE + """
    import jax_triton_rocm as jtr
    first = lower_one(kernels.add, X, X, platform="rocm").message.kernel_call.kernel.ptx
    jtr.clear_caches()
    again = lower_one(kernels.add, X, X, platform="rocm").message.kernel_call.kernel.ptx
    print(first != again, os.path.exists(again))
    """)
    assert last_line(result) == "True True", result.stderr[-3000:]
