"""One call read top-down, as `tools/structure.py` measures it (in fresh processes): each phase
runs no more package functions, crosses no more package files and switches back to a file it
had visited no more often than it does now. Lower a figure here when a change brings it down;
never raise it to let a change in. The modules' names and docstrings:
tests/cpu/test_module_layout.py."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

import jax_triton_rocm

pytestmark = pytest.mark.process  # lowers in a fresh process per route

ROOT = pathlib.Path(jax_triton_rocm.__file__).parent.parent
# The most each phase of one cold call runs (`python tools/structure.py`), lowered as changes
# landed and raised only where a feature moved work into the phase: in 0.3.0 the trace plans
# the call's launches and starts its compiles (the lowering takes them, so jaxlib's lowering
# fell from 126 functions), a lowering reads what each compiled kernel writes from its IR, and
# the checks run as named steps, one rule each (more functions, in the same files).
# The same with and without jax-cuda13-plugin.
MOST = {
    "trace": {"functions": 103, "files": 20, "switches back to a file": 26},
    "lowering, jaxlib": {"functions": 91, "files": 19, "switches back to a file": 20},
    "lowering, xla": {"functions": 120, "files": 21, "switches back to a file": 29},
}


@pytest.fixture(scope="module")
def figures():
    spec = importlib.util.spec_from_file_location("structure", ROOT / "tools" / "structure.py")
    structure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(structure)
    return structure.phase_figures(str(ROOT))


@pytest.mark.parametrize("phase", list(MOST))
def test_each_phase_runs_no_more_of_the_package_than_it_does_now(figures, phase):
    found = {what: figures[f"{phase}: {what}"] for what in MOST[phase]}
    worse = {what: f"{found[what]} (at most {most})"
             for what, most in MOST[phase].items() if found[what] > most}
    back = figures[f"_{phase} back"]
    assert not worse, (
        f"{phase}: {worse}; switched back to {sorted(set(back), key=back.count, reverse=True)} "
        f"(`python tools/structure.py --details` counts each file); read a fact once, or call "
        f"the step from the file that already holds what it needs")
