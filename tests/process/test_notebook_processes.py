"""examples/redefining_kernels.ipynb, executed in a real Jupyter kernel (nbclient, ipykernel):
a kernel defined again in a later cell, and a `@triton.jit` helper rebound, are what the next
call runs on the CPU and what the next lowering for sm_90 compiles."""

import os
import re

import numpy as np
import pytest

from tests.support.subprocess_utils import ROOT

nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed (the `test` extra)")
nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (the `test` extra)")
kernelspec = pytest.importorskip("ipykernel.kernelspec",
                                 reason="ipykernel is not installed (the `test` extra)")
pytestmark = pytest.mark.process  # a Jupyter kernel, a Python process of its own

NOTEBOOK = os.path.join(ROOT, "examples", "redefining_kernels.ipynb")
CELL_TIMEOUT_S = 240
KERNEL_NAME = "jax-triton-rocm-tests"


def _kernel_manager(tmp_path):
    """A manager for a kernel that runs this interpreter (`write_kernel_spec` names
    `sys.executable`) and imports this checkout, from a kernelspec of its own (never a user's
    `python3`), with Jupyter's and IPython's folders in `tmp_path`."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_client.manager import KernelManager

    kernels = tmp_path / "kernels"
    kernelspec.write_kernel_spec(kernels / KERNEL_NAME, overrides={"env": {
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        "JUPYTER_DATA_DIR": str(tmp_path / "jupyter-data"),
    }})
    return KernelManager(kernel_name=KERNEL_NAME,
                         kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(kernels)]),
                         connection_file=str(tmp_path / "connection.json"))


@pytest.fixture(scope="module")
def printed(tmp_path_factory):
    """What each code cell of the notebook printed, by cell id, the notebook run top to bottom
    in its folder as Jupyter runs it (each cell within CELL_TIMEOUT_S)."""
    tmp_path = tmp_path_factory.mktemp("notebook")
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook, km=_kernel_manager(tmp_path), timeout=CELL_TIMEOUT_S, startup_timeout=120,
        resources={"metadata": {"path": os.path.dirname(NOTEBOOK)}})
    client.execute()
    return {cell.id: "".join(output.get("text", "") for output in cell.outputs
                             if output.output_type == "stream" and output.name == "stdout")
            for cell in notebook.cells if cell.cell_type == "code"}


def _shown(printed, cell, label):
    """The line `label: value` that `cell` printed, its value."""
    [value] = re.findall(rf"^{re.escape(label)}: (.*(?:\n [^\n]*)*)$", printed[cell], re.M)
    return value


def _array(text):
    return np.array(text.strip().strip("[]").split(), dtype=np.float32)


def _binaries(printed, *cells):
    return [_shown(printed, cell, "sm_90 binary") for cell in cells]


def test_register_may_be_called_again_and_returns_the_same_platforms(printed):
    registered = _shown(printed, "register", "registered")
    assert "'cuda'" in registered and "'rocm'" in registered
    assert _shown(printed, "register", "registered again") == registered


@pytest.mark.parametrize("cell,label,expected", [
    ("kernel", "x + y", np.add),
    ("kernel-redefined", "x - y", np.subtract),
    ("helper", "op = x * y", np.multiply),
    ("helper-rebound", "op = max(x, y)", np.maximum),
])
def test_each_new_definition_runs_on_the_cpu(printed, cell, label, expected):
    x, y = (_array(_shown(printed, "inputs", name)) for name in ("x", "y"))
    np.testing.assert_array_equal(_array(_shown(printed, cell, label)), expected(x, y))


def test_a_kernel_defined_again_compiles_a_new_sm90_binary(printed):
    added, subtracted = _binaries(printed, "kernel", "kernel-redefined")
    assert re.fullmatch(r"[0-9a-f]{16}", added) and added != subtracted


def test_a_rebound_helper_compiles_a_new_sm90_binary(printed):
    multiplied, maximum = _binaries(printed, "helper", "helper-rebound")
    assert re.fullmatch(r"[0-9a-f]{16}", multiplied) and multiplied != maximum
