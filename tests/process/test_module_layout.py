"""One call read top-down, as `tools/structure.py` measures it (in fresh processes): each phase
comes back to a file it had left at most as often as it does now (a memo checked inside the main
path, or helpers called one at a time from another file, raise it). Lower a figure here when a
change brings it down; never raise it to let a change in. The modules' names and docstrings:
tests/cpu/test_module_layout.py."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

import jax_triton_rocm

pytestmark = pytest.mark.process  # lowers in a fresh process per route

ROOT = pathlib.Path(jax_triton_rocm.__file__).parent.parent
# Reached when the trace and the routes were made to read top-down (issue 45, goal 8 each): 44,
# 48 and 34 before (docs/design.md, "Inside the modules").
MOST_COMEBACKS = {"trace": 8, "lowering, jaxlib": 8, "lowering, xla": 7}


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("structure", ROOT / "tools" / "structure.py")
    structure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(structure)
    return structure.phase_figures(str(ROOT))


@pytest.mark.parametrize("phase", list(MOST_COMEBACKS))
def test_each_phase_comes_back_to_files_no_more_than_it_does_now(figures, phase):
    found = figures[f"{phase}: comes back to a file"]
    assert found <= MOST_COMEBACKS[phase], (
        f"{phase} came back to files {found} times (at most {MOST_COMEBACKS[phase]}): "
        f"{figures[f'_{phase} back']}; read a fact once (a field of `spec._spec.Unwrapped.params`, "
        f"`checks._arguments.CallArguments`), or call the step from where its file is already "
        f"on the stack")
