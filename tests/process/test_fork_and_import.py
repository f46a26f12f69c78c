"""Fork safety and Triton import variants, each in a fresh process.

Every scenario runs in its own interpreter: JAX itself does not survive a fork once the parent
has created arrays (a child that creates arrays or exits through `sys.exit` can hang or crash
inside JAX), so the parents here only trace with abstract values and lower, which JAX does
survive.
"""

import pytest

from tests.support.subprocess_utils import (TRITON_WITHOUT_NVIDIA, failing_import, last_line,
                                           run_python)

pytestmark = pytest.mark.process  # each test starts Python processes

PRELUDE = """
    import os, sys, threading, time
    import jax.numpy as jnp
    import triton
    from jax_triton_rocm.base import _state
    from tests.support import kernels
    from tests.support.lowering_utils import lower_for, lower_one, spec
    X = spec((4096,), jnp.float32)

    def wait_child(pid, timeout=180):
        deadline = time.time() + timeout
        while time.time() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            time.sleep(0.1)
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        return "hung"

    def child_exit(code):
        # A forked child leaves through os._exit (JAX may hang in a normal exit), past the atexit
        # handler that removes the HSACO folder it made: remove it as that handler would.
        hsaco = sys.modules.get("jax_triton_rocm.backends.hip._hip_files")
        if hsaco is not None:
            hsaco.HSACO_FOLDER.remove()
        os._exit(code)
"""


def test_child_forked_during_a_parent_compile_lowers_the_same_kernel_without_waiting():
    # The parent's compile runs in its lowering (no early compile at the trace): the fork then
    # comes while the parent's thread waits in the package, not inside JAX's lowering, where a
    # forked child can hang in JAX itself.
    result = run_python(PRELUDE + """
    os.environ["JAX_TRITON_ROCM_EARLY_COMPILE"] = "0"
    parent = os.getpid()
    inside, release = threading.Event(), threading.Event()
    real_compile = triton.compile

    def held_compile(*args, **kwargs):
        if os.getpid() == parent:  # only the parent's compile is held
            inside.set()
            release.wait(120)
        return real_compile(*args, **kwargs)

    triton.compile = held_compile
    worker = threading.Thread(target=lambda: lower_for(kernels.add, X, X, platform="rocm"))
    worker.start()
    assert inside.wait(120), "the parent's compile never started"
    pid = os.fork()
    if pid == 0:
        try:
            # Another jitted function around the same kernel: the same kernel key, whose lock
            # the parent's thread holds at the fork.
            call = lower_one(lambda x, y: kernels.add(x, y), X, X, platform="rocm")
            ok = call.message.kernel_call.kernel.kernel_name == "add_kernel"
            child_exit(0 if ok else 3)
        except BaseException:
            child_exit(4)
    status = wait_child(pid)
    release.set()
    worker.join()
    print("child", status)
    """)
    assert last_line(result) == "child 0", result.stderr[-3000:]


def test_childs_normal_exit_leaves_the_parents_hsaco_files():
    # The parent writes its HSACO through the package without starting a JAX backend: a forked
    # child of a process with a live XLA client hangs in XLA's own teardown at a normal exit.
    result = run_python(PRELUDE + """
    from triton.backends.compiler import GPUTarget
    from jax_triton_rocm.backends.hip import _hip, _hip_files
    from jax_triton_rocm.compile import _compile
    from jax_triton_rocm.kernel import _layout
    bound = _layout.lay_out_arguments(
        kernels.add_kernel, _hip.BACKEND.triton_backend,
        positional=(("array", 0), ("array", 1), ("scalar", 4096)), in_avals=(X, X),
        out_avals=(X,), constexprs={"BLOCK": 256})
    compiled = _compile.compile_job(_compile.make_job(
        kernels.add_kernel, GPUTarget("hip", "gfx942", 64), bound, {"num_warps": 4},
        arch="gfx942", gluon=False, binary_key="hsaco", asm_key="amdgcn", symbol="add_kernel"))
    parent_file = _hip_files.HSACO_FOLDER.file_for(compiled.key, compiled.binary, compiled.name)
    parent_folder = _hip_files.HSACO_FOLDER.path()
    _hip_files.LOADED_KERNELS.add("loaded-in-parent")
    os.environ["JAX_TRITON_ROCM_HSACO_DELIVERY"] = "path"
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        child_file = lower_one(lambda x, y: kernels.add(x, y, block=128), X, X,
                               platform="rocm").message.kernel_call.kernel.ptx
        facts = [os.path.dirname(child_file) != parent_folder,
                 "loaded-in-parent" not in _hip_files.LOADED_KERNELS]
        os.write(write, (child_file + "|" + ",".join(map(str, facts))).encode())
        sys.exit(0)  # a normal exit: atexit handlers run
    os.close(write)
    status = wait_child(pid)
    child_file, facts = os.read(read, 4096).decode().split("|")
    print(status, os.path.exists(parent_file), os.path.isdir(parent_folder),
          os.path.exists(child_file), facts)
    """)
    # The child's own folder is gone with it; the parent's file and folder stay.
    assert last_line(result) == "0 True True False True,True", result.stderr[-3000:]


def test_parent_removes_its_hsaco_folder_at_exit():
    result = run_python(PRELUDE + """
    os.environ["JAX_TRITON_ROCM_HSACO_DELIVERY"] = "path"
    lower_one(kernels.add, X, X, platform="rocm")
    from jax_triton_rocm.backends.hip import _hip_files
    print(_hip_files.HSACO_FOLDER.path())
    """)
    folder = last_line(result)
    import os

    assert folder.startswith("/") and not os.path.exists(folder), result.stderr[-2000:]


HIDE_NVIDIA = (*TRITON_WITHOUT_NVIDIA, """
    from jax_triton_rocm.backends import _vendors
    _vendors.PLUGIN_PACKAGES["cuda"] = ()  # an AMD machine has no CUDA plugin
""")


def test_amd_only_triton_lowers_for_rocm():
    result = run_python(*HIDE_NVIDIA, """
    import jax.numpy as jnp, triton.backends
    from tests.support import kernels
    from tests.support.lowering_utils import lower_one, spec
    x = spec((4096,), jnp.float32)
    kernel = lower_one(kernels.add, x, x, platform="rocm").message.kernel_call.kernel
    print(sorted(triton.backends.backends), kernel.kernel_name, "triton.backends.nvidia" in sys.modules)
    """)
    assert last_line(result) == "['amd'] add_kernel False", result.stderr[-3000:]


def test_amd_only_triton_refuses_cuda_with_a_clear_import_error():
    result = run_python(*HIDE_NVIDIA, """
    import jax_triton_rocm as jtr
    try:
        jtr.register(platforms=("cuda",))
    except ImportError as err:
        print("no 'nvidia' backend" in str(err), type(err.__cause__).__name__)
    """)
    assert last_line(result) == "True ModuleNotFoundError", result.stderr[-3000:]


@pytest.mark.parametrize("error", ["RuntimeError", "ValueError"])
def test_broken_nvidia_backend_fails_at_setup_for_cuda_not_at_first_lowering(error):
    result = run_python("""
    import sys
    import triton  # Triton itself imports; only the later import of the backend breaks
    sys.modules.pop("triton.backends.nvidia.compiler", None)
    """, failing_import("triton.backends.nvidia.compiler", error,
                        "simulated: NVIDIA backend built against another CUDA"), """
    import jax_triton_rocm as jtr
    try:
        jtr.register(platforms=("cuda",))
        print("registered")
    except ImportError as err:
        print("does not import" in str(err), type(err.__cause__).__name__)
    """)
    assert last_line(result) == f"True {error}", result.stderr[-3000:]


# The modules a first lowering imports; a fork while another thread is inside one of them must
# not leave the child waiting for it. The import is slowed so that the fork lands inside it.
@pytest.mark.parametrize("module,attempt", [
    ("triton.compiler.code_generator", 1),
    ("triton.compiler.code_generator", 2),
    ("jax_triton_rocm.backends.hip._hip", 1),
])
def test_fork_during_the_first_lowerings_imports_leaves_a_child_that_lowers(module, attempt,
                                                                             tmp_path):
    del attempt  # each attempt is a fresh process, forking at the import again
    result = run_python("""
    import importlib.abc, os, sys, threading, time
    MODULE = %r
    started = threading.Event()

    class SlowImport(importlib.abc.MetaPathFinder):
        # Runs under the module's import lock, before the module is found: the worker thread
        # holds that lock while the main thread forks.
        def find_spec(self, name, path=None, target=None):
            if name == MODULE and threading.current_thread() is not threading.main_thread():
                started.set()
                time.sleep(1.0)
            return None

    sys.meta_path.insert(0, SlowImport())
    """ % module, PRELUDE, """
    import jax_triton_rocm as jtr
    # Only the package's imports are under test: the worker imports what a lowering needs (as
    # the first lowering does, through register) and then waits, so that the fork never lands
    # inside JAX or Triton, which do not survive a fork in their own locks.
    release = threading.Event()

    def first_use():
        jtr.register(platforms=("rocm",))
        release.wait(120)
        lower_for(kernels.add, X, X, platform="rocm")

    assert MODULE not in sys.modules, "the module must still be unimported here"
    worker = threading.Thread(target=first_use)
    worker.start()
    assert started.wait(60), "the worker never imported " + MODULE
    pid = os.fork()
    if pid == 0:
        try:
            call = lower_one(lambda x, y: kernels.add(x, y, block=128), X, X, platform="rocm")
            child_exit(0 if call.message.kernel_call.kernel.kernel_name == "add_kernel" else 3)
        except BaseException:
            child_exit(4)
    status = wait_child(pid, timeout=90)
    release.set()
    worker.join()
    print("child", status)
    """, env={"TRITON_CACHE_DIR": str(tmp_path)})  # a cache miss: Triton's lazy imports run
    assert last_line(result) == "child 0", result.stderr[-3000:]


def test_a_child_lowering_the_parents_call_writes_its_own_hsaco():
    # The parent's lowered call names the parent's file, which jaxlib would read and delete.
    result = run_python(PRELUDE + """
    os.environ["JAX_TRITON_ROCM_HSACO_DELIVERY"] = "path"
    parent_file = lower_one(kernels.add, X, X, platform="rocm").message.kernel_call.kernel.ptx
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        import jax
        jax.clear_caches()  # JAX's own cache of the lowering; the package's is what is tested
        child_file = lower_one(kernels.add, X, X, platform="rocm").message.kernel_call.kernel.ptx
        os.write(write, child_file.encode())
        child_exit(0)
    os.close(write)
    status = wait_child(pid)
    child_file = os.read(read, 4096).decode()
    print(status, child_file != parent_file, os.path.exists(parent_file))
    """)
    assert last_line(result) == "0 True True", result.stderr[-3000:]
