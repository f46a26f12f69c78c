"""The trace of one call read top-down, as `tools/structure.py` measures it (in a process of its
own). The modules' names and docstrings: tests/cpu/test_module_layout.py."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

import jax_triton_rocm

PACKAGE = pathlib.Path(jax_triton_rocm.__file__).parent

# The most times the trace of one cold call (`triton_call` to `bind`) may come back to a package
# file it had left (`tools/structure.py`, "comes back to a file"); 44 before the trace was made
# to read top-down (docs/design.md, "The trace of a call").
MAX_TRACE_COMEBACKS = 8


@pytest.mark.process
def test_the_trace_of_a_call_comes_back_to_few_files():
    root = PACKAGE.parent
    spec = importlib.util.spec_from_file_location("structure", root / "tools" / "structure.py")
    structure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(structure)
    figures = structure.phase_figures(str(root))
    assert figures["trace: comes back to a file"] <= MAX_TRACE_COMEBACKS, (
        f"the trace came back to files {figures['_trace back']}: read a fact once (a field of "
        f"`spec._spec.Unwrapped.params`, `checks._arguments.CallArguments`), or call the step "
        f"from where its file is already on the stack")

