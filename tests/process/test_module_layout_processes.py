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
# Measured on main 78ec446 (issue 65 asks for at most 50 functions in the trace, 100 in a
# lowering and 12 switches per phase), then lowered as each change landed: the lowerings'
# switches since `compile._compile` finds the callees' names after Triton's walk (165 and 173
# before), one module keys the lowering's memos, the plan's too (`routes._lowering`), and a
# call's parameters are made where their class is (`_proto`); the trace's since `checks._kinds`'s
# walk dispatches in its own file, reads every node in one function, and the variables' check
# skips those unset (118 functions and 84 switches before); the lowerings' since the shell plans
# and encodes each route in one uncached step and jaxlib's route folds its one-caller helpers in,
# since the plan's records are built where they are defined (`_lowering.Kept`, `LaunchSite`), and
# since a kernel's image is serialized and deflated as it is made (`_proto.KernelImage.piece`);
# the lowerings' since the compile step sets Triton's folders and key in one module (`_folders`)
# and asks `_files` one question per file, compiles a call's kernels in `_compile` itself and
# checks a compile's result in one pass (`_cache.kernel_problem`, its binary read there), and
# since the kernel cache hands out a key and keeps the result without calling back (`claim`,
# `finish`); the trace's since one binder and one checker entry take the kernel's record once,
# since a trace registers the rules only (the vendor modules are the first lowering's), and
# since the binder asks once whether an operand is a Ref (`Leaf.is_ref`) and the checker checks
# both flags in one loop; the lowerings' since a backend's Triton classes and option names are
# class attributes, a compiled kernel's launch is checked by `LaunchLimits.problem` itself, and
# `_cache` reads options as JSON without a one-line helper; all three since the rules are
# registered once per process, by whoever asks first (`ensure_registered`); the lowerings' since
# `lowered_call` fetches the kernel's record once and passes it down (its lowered calls, plans,
# trampolines, call graph and XLA's IR checks read as plain dicts); the CUBIN's sections are
# walked in `_cubin` itself, the entry folder's link checked with the entry, the flag readers are
# `_env._flag` itself, and `extern_libs` are read by file name only where they differ; XLA's
# since a trampoline is defined where it is kept; jaxlib's since a lowering reads the environment
# once, at its top (`_env.lowering_settings`), and passes the values down; the lowerings' since
# the backend builds the `LaunchLimits` it defines and the plan checks them
# (`_plan.launch_problem`); jaxlib's since the route asked is read with the rest of the
# environment, in one question at the lowering's top; both since JAX's plugin hook asks only for
# the rules registered (`ensure_registered`, answered by its cache after the trace), and since
# the arguments as a config's heuristics and grid see them are made in `_plan`, their one user;
# jaxlib's files since `_cuda`, its one user, drops a CUBIN's PTX text itself (`without_ptx_text`).
# The same with and without jax-cuda13-plugin.
MOST = {
    "trace": {"functions": 50, "files": 12, "switches back to a file": 9},
    "lowering, jaxlib": {"functions": 93, "files": 20, "switches back to a file": 20},
    "lowering, xla": {"functions": 79, "files": 18, "switches back to a file": 20},
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
