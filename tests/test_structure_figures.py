"""The lowering of one call stays readable: each GPU route's lowering phase comes back to a
file it had left at most as often as it does now (`tools/structure.py`, `phase_figures`: a
memo checked inside the main path, or helpers called one at a time from another file, raise
it). Lower a figure here when a change brings it down; never raise it to let a change in."""

import importlib.util
import os

import pytest

pytestmark = pytest.mark.process  # lowers in a fresh process per route

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Reached when the routes were made to read top-down (issue 45): 48 and 34 before.
MOST_COMEBACKS = {"lowering, jaxlib": 33, "lowering, xla": 22}


def _structure():
    spec = importlib.util.spec_from_file_location(
        "structure", os.path.join(ROOT, "tools", "structure.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_lowering_phases_come_back_no_more_than_they_do_now():
    figures = _structure().phase_figures(ROOT)
    found = {phase: figures[f"{phase}: comes back to a file"] for phase in MOST_COMEBACKS}
    over = {phase: (n, MOST_COMEBACKS[phase], figures[f"_{phase} back"])
            for phase, n in found.items() if n > MOST_COMEBACKS[phase]}
    assert not over, f"the lowering comes back to files more often than it did: {over}"
