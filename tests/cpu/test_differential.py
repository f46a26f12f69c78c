"""The differential check's logic on the CPU (tests/support/differential_utils.py,
tests/support/differential.py): a call's planned launches read into what Triton's launcher takes,
in the kernel's parameter order, and the verdicts on the outputs.

The launcher here runs the kernel in Triton's interpreter on NumPy buffers and records what it
was given; the package's outputs come from its own CPU route (the interpreter too), so an
equal verdict is the mapping's, and a deliberate difference must be found.
"""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm import backends
from jax_triton_rocm.base import _state
from jax_triton_rocm.compile import _compile
from jax_triton_rocm.plan import _plan
from jax_triton_rocm.routes import _arch
from jax_triton_rocm.routes._primitive import triton_kernel_p
from jax_triton_rocm.routes.cpu import _interpret_host
from jax_triton_rocm.kernel import _spec
from tests.support import differential, kernels
from tests.support import differential_utils as du

CPU = jax.devices("cpu")[0]


@triton.jit
def first_half_kernel(x_ptr, out_ptr, HALF: tl.constexpr):
    offsets = tl.arange(0, HALF)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets) + 1.0)


@triton.heuristics({"BLOCK": lambda args: 128 if args["n"] > 100 else 32})
@triton.jit
def heuristic_block_kernel(x_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + BLOCK, mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 64}, num_warps=2),
                          triton.Config({"BLOCK": 128}, num_warps=4)], key=["n"])
@triton.jit
def tuned_add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask)
             + tl.load(y_ptr + offsets, mask=mask), mask=mask)


class InterpreterLauncher:
    """Triton's interpreter on NumPy buffers, with what each launch was given kept."""

    def __init__(self):
        self.launched = []

    def buffer(self, array):
        return np.array(array, copy=True, order="C")

    def host(self, buffer, aval):
        return np.array(buffer, copy=True)

    def release(self):
        pass

    def launch(self, kernel, grid, arguments, options):
        self.launched.append((grid, list(arguments), dict(options)))

        def host_value(param, value):
            if param.is_constexpr:
                return value
            if isinstance(value, np.ndarray):
                pointer = _spec.pointer_type(value.dtype, what="buffer")
                return _interpret_host.HostTensor(value, tl.str_to_ty(pointer[1:], None))
            if isinstance(value, (bool, int, float)):
                return _interpret_host.typed_scalar(value, "scalar")
            return value

        with _state.LOCKS.triton_language, _interpret_host.interpreter_adapted(False):
            _interpret_host.interpreted(kernel)[grid](*[host_value(param, value) for param, value
                                                         in zip(kernel.params, arguments)])


def call_of(fn, *args):
    """The call `fn(*args)` binds, `args` being its operands, as the check describes it when
    lowered for CUDA sm_90; and the package's outputs for `args` on the CPU."""
    jaxpr = jax.make_jaxpr(fn)(*args)
    [eqn] = [e for e in jaxpr.eqns if e.primitive is triton_kernel_p]
    assert len(eqn.invars) == len(args), "give fn the call's operands"
    spec = eqn.params["spec"]
    in_avals = tuple(v.aval for v in eqn.invars)
    out_avals = tuple(v.aval for v in eqn.outvars)
    backend = backends.backend("cuda")
    site = backend.answers(_arch.GpuArch("cuda", "sm_90", "the test")).launch_site
    launches = _plan.launches(spec, in_avals, out_avals, site)
    call = du.describe(spec.unwrapped.jit_fn, spec.kernel_name, "jaxlib", "the test", spec,
                       in_avals, out_avals, launches,
                       lambda launch: _compile.triton_options(
                           launch, spec, backend.compile_options, backend.option_names))
    outputs = jax.tree.leaves(jax.jit(fn)(*args))
    return call, [np.asarray(a) for a in args], [np.asarray(o) for o in outputs]


def on_cpu(x):
    return jax.device_put(x, CPU)


def test_an_output_placed_before_its_input_reaches_the_launcher_first():
    x = on_cpu(jnp.arange(100, dtype=jnp.float32))
    call, inputs, outputs = call_of(lambda x: jtr.triton_call(
        in_ptr=x, n=x.size, kernel=kernels.double_into_first_kernel, out_type=x, grid=(2,),
        BLOCK=64), x)
    launcher = InterpreterLauncher()
    verdict, detail, launch = du.compare(call, inputs, outputs, launcher)
    assert (verdict, detail) == (du.EQUAL, "400 bytes written")
    grid, arguments, options = launcher.launched[0]
    assert grid == (2, 1, 1) and options["num_warps"] == 4
    out, given, n, block = arguments
    assert np.array_equal(given, inputs[0]) and np.array_equal(out, given * 2)
    assert (n, block) == (100, 64)
    assert "grid (2, 1, 1)" in launch and "num_warps=4" in launch


def test_scalars_go_as_values_and_keyword_parameters_as_constexprs():
    x = on_cpu(jnp.linspace(-1, 1, 300, dtype=jnp.float32))
    call, inputs, outputs = call_of(lambda x: jtr.triton_call(
        x, 2.5, 3, True, kernel=kernels.scale_shift_kernel, out_shape=x, grid=(3,), n=300,
        BLOCK=128), x)
    launcher = InterpreterLauncher()
    assert du.compare(call, inputs, outputs, launcher)[0] == du.EQUAL
    _, scale, shift, flip, n, _, block = launcher.launched[0][1]
    assert (scale, shift, flip, block) == (2.5, 3, True, 128)
    assert isinstance(n, tl.constexpr) and n.value == 300  # a keyword compiles it in


def test_a_heuristics_value_reaches_the_launcher():
    x = on_cpu(jnp.ones(300, jnp.float32))
    call, inputs, outputs = call_of(lambda x: jtr.triton_call(
        x, x.size, kernel=heuristic_block_kernel, out_shape=x, grid=(3,)), x)
    launcher = InterpreterLauncher()
    assert du.compare(call, inputs, outputs, launcher)[0] == du.EQUAL
    assert launcher.launched[0][1][-1] == 128
    assert np.all(outputs[0] == 129.0)


def test_an_autotuned_call_is_equal_to_the_config_that_gives_its_outputs():
    x = on_cpu(jnp.arange(256, dtype=jnp.float32))
    call, inputs, outputs = call_of(lambda x, y: jtr.triton_call(
        x, y, x.size, kernel=tuned_add_kernel, out_shape=x, grid=lambda meta: (
            triton.cdiv(256, meta["BLOCK"]),)), x, x + 1)
    assert [launch.options["num_warps"] for launch in call.launches] == [2, 4]
    verdict, detail, launch = du.compare(call, inputs, outputs, InterpreterLauncher())
    assert verdict == du.EQUAL and detail.endswith("(config 1 of 2)")
    assert "BLOCK: 64" in launch


def test_a_deliberate_difference_is_unequal_and_says_where():
    x = on_cpu(jnp.arange(100, dtype=jnp.float32))
    call, inputs, outputs = call_of(kernels.add, x, x)
    outputs[0] = outputs[0].copy()
    outputs[0].view(np.uint8)[5] ^= 1
    verdict, detail, _ = du.compare(call, inputs, outputs, InterpreterLauncher())
    assert (verdict, detail) == (du.UNEQUAL, "output 0: 1 of 400 bytes")


def test_bytes_the_kernel_never_writes_are_not_compared():
    x = on_cpu(jnp.arange(32, dtype=jnp.float32))
    call, inputs, outputs = call_of(lambda x: jtr.triton_call(
        x, kernel=first_half_kernel, out_shape=x, grid=(1,), HALF=16), x)
    assert np.all(outputs[0][16:] == 0)  # the CPU route's zeros; a GPU's would be garbage
    assert du.compare(call, inputs, outputs, InterpreterLauncher())[:2] == (
        du.EQUAL, "64 bytes written")


def test_bytes_two_launches_disagree_on_make_the_call_nondeterministic():
    same = np.arange(4, dtype=np.float32)
    other = same.copy()
    other[2] = 7.0
    verdict, detail = du.difference([same], [same], [other], poisoned=[True])
    assert verdict == du.NONDETERMINISTIC and detail.startswith("1 written bytes differ")
    assert du.difference([other], [same], [same], poisoned=[True])[0] == du.UNEQUAL


def test_an_aliased_output_is_launched_in_its_inputs_buffer():
    x, y = on_cpu(jnp.arange(64.0, dtype=jnp.float32)), on_cpu(jnp.ones(64, jnp.float32))
    call, inputs, outputs = call_of(lambda x, y: kernels.add_inplace(x, y, block=64), x, y)
    assert call.aliases == ((0, 0),)
    launcher = InterpreterLauncher()
    assert du.compare(call, inputs, outputs, launcher)[0] == du.EQUAL
    arguments = launcher.launched[0][1]
    assert arguments[3] is arguments[0]


def test_a_zeroed_output_starts_at_zero():
    x = on_cpu(jnp.ones(1000, jnp.float32))
    call, inputs, outputs = call_of(lambda x: jtr.triton_call(
        x, x.size, kernel=kernels.atomic_sum_kernel, out_shape=jax.ShapeDtypeStruct((1,),
        jnp.float32), grid=(4,), BLOCK=256, zeroed_outputs=(0,)), x)
    launcher = InterpreterLauncher()
    assert du.compare(call, inputs, outputs, launcher)[:2] == (du.EQUAL, "4 bytes written")
    assert outputs[0][0] == 1000.0


def test_a_scalar_the_launcher_would_type_otherwise_is_not_compared():
    x = on_cpu(jnp.ones(100, jnp.float32))
    call, inputs, outputs = call_of(lambda x: jtr.triton_call(
        x, np.int64(100), kernel=kernels.copy_kernel, out_shape=x, grid=(1,), BLOCK=128), x)
    verdict, detail, _ = du.compare(call, inputs, outputs, InterpreterLauncher())
    assert verdict == du.NOT_COMPARED
    assert detail == ("parameter 'n' is a runtime scalar the package passes as i64 and Triton's "
                      "launcher would pass as i32")


def test_the_plugin_writes_one_line_per_call_and_joins_the_parts(tmp_path):
    path = str(tmp_path / "report.jsonl")
    (tmp_path / "report.jsonl.gw3").write_text("stale\n")
    plugin = differential.DifferentialPlugin(path, None)
    call = du.CallDescription(kernels.add_kernel, "add_kernel", "xla", "the call fits it", (),
                              (), (), not_compared="a Gluon tensor descriptor")
    plugin.test = "tests/test_x.py::test_y"
    plugin.received(call, ())
    plugin.flush()
    plugin.pytest_sessionfinish(None)
    [line] = [json.loads(text) for text in open(path)]
    assert {k: line[k] for k in ("test", "kernel", "route", "verdict", "detail")} == {
        "test": "tests/test_x.py::test_y", "kernel": "add_kernel", "route": "xla",
        "verdict": du.NOT_COMPARED, "detail": "a Gluon tensor descriptor"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.jsonl"]


def test_the_torch_launcher_says_what_it_needs_without_pytorch_here():
    try:
        import torch
    except ImportError:
        with pytest.raises(RuntimeError, match="PyTorch is not installed"):
            du.TorchLauncher()
        return
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="sees no GPU"):
            du.TorchLauncher()


def _driver():
    import importlib.util

    from tests.support.subprocess_utils import ROOT

    loaded = importlib.util.spec_from_file_location(
        "differential_driver", f"{ROOT}/tools/differential.py")
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module


def _line(route, verdict, kernel="k", test="t::a", detail="d"):
    return {"test": test, "kernel": kernel, "route": route, "verdict": verdict,
            "detail": detail, "launch": "grid (1, 1, 1)"}


def test_the_summary_fails_on_a_jaxlib_call_that_differs_and_reports_xlas():
    driver = _driver()
    runs = {"0": [_line("jaxlib", "equal", "a"), _line("jaxlib", "equal", "b"),
                  _line("jaxlib", "unequal", "c", "t::c", "output 0: 4 of 64 bytes"),
                  _line("jaxlib", "not compared", detail="a Gluon tensor descriptor"),
                  _line("jaxlib", "not instrumented", detail="lowered for jax.export")],
            "1": [_line("xla", "equal", "a"), _line("xla", "unequal", "b", "t::b"),
                  _line("jaxlib", "nondeterministic", "atomic")]}
    outcomes = {"0": (True, "3 passed"), "1": (True, "3 passed")}
    lines, failed = driver.summary(runs, outcomes, None)
    assert failed and lines[-1] == "differential check: FAILED"
    table = {tuple(line.split()[:2]): line.split()[2:] for line in lines
             if line.startswith("XLA_NATIVE=") and len(line.split()) == 10}
    assert table[("XLA_NATIVE=0", "jaxlib")] == ["3", "4", "2", "1", "0", "1", "0", "1"]
    assert table[("XLA_NATIVE=1", "xla")] == ["2", "2", "1", "1", "0", "0", "0", "0"]
    assert ("  XLA_NATIVE=0 UNEQUAL: jaxlib c in t::c: output 0: 4 of 64 bytes "
            "[grid (1, 1, 1)]") in lines
    assert "  XLA_NATIVE=1 nondeterministic under Triton's launcher: atomic" in lines
    assert "  XLA_NATIVE=0 not compared (1): a Gluon tensor descriptor" in lines
    del runs["0"][2]
    lines, failed = driver.summary(runs, outcomes, None)  # XLA's difference is reported only
    assert not failed and "  XLA_NATIVE=1 UNEQUAL: xla b in t::b: d [grid (1, 1, 1)]" in lines


def test_the_summary_fails_on_an_unfinished_run_and_a_benchmark_problem():
    driver = _driver()
    runs = {"0": [_line("jaxlib", "equal")]}
    assert driver.summary(runs, {"0": (False, "timed out after 150 s")}, None)[1]
    row = {"kernel": "softmax", "bitwise_route": "xla", "bitwise_default": "equal",
           "bitwise_jaxlib": "equal", "bitwise_xla": "DIFFERS 3/4096 B"}
    lines, failed = driver.summary(runs, {"0": (True, "1 passed")},
                                   {"bitwise": [row], "problems": []})
    assert not failed
    assert "  softmax: xla; default equal, jaxlib equal, xla DIFFERS 3/4096 B" in lines
    lines, failed = driver.summary(runs, {"0": (True, "1 passed")},
                                   {"bitwise": [dict(row, bitwise_jaxlib="DIFFERS 1/8 B")],
                                    "problems": []})
    assert failed and "  jaxlib's route differs for softmax" in lines


def test_the_plugin_reports_a_cpu_lowering_as_not_instrumented(tmp_path, monkeypatch,
                                                                 fresh_lowerings):
    checking = differential.DifferentialPlugin(str(tmp_path / "report.jsonl"), "gw0")
    for owner, name, value in checking.patches():
        monkeypatch.setattr(owner, name, value)
    checking.test = "tests/test_x.py::test_cpu"
    x = on_cpu(jnp.ones(100, jnp.float32))
    np.testing.assert_array_equal(jax.jit(kernels.add)(x, x), 2 * x)
    checking.flush()
    [line] = [json.loads(text) for text in open(checking.part)]
    assert (line["kernel"], line["route"], line["verdict"]) == (
        "add_kernel", "interpreter", differential.NOT_INSTRUMENTED)


def test_an_instrumented_call_hands_its_inputs_and_outputs_to_the_check(tmp_path, monkeypatch,
                                                                      fresh_lowerings):
    """The GPU lowering's callback, emitted here after the CPU's lowering: the check receives
    the call's operands and results and compares them with the launcher's."""
    import types

    from jax_triton_rocm.backends import _vendors
    from jax_triton_rocm.routes import _primitive
    from tests.support import gpu_utils

    checking = differential.DifferentialPlugin(str(tmp_path / "report.jsonl"), "gw0")
    checking.launcher = InterpreterLauncher()
    backend = types.SimpleNamespace(
        platform="cpu", compile_options=(), option_names=frozenset())
    monkeypatch.setattr(gpu_utils, "gpu_platform", lambda: "cpu")
    monkeypatch.setattr(differential, "foreign_target", lambda b, ctx, spec: None)
    monkeypatch.setattr(differential, "planned_launches", lambda b, ctx, spec, route: (
        _plan.launches(spec, tuple(ctx.avals_in), tuple(ctx.avals_out),
                       _plan.interpreter_launch_site(_vendors.COMPILE_OPTIONS))))
    lower = _primitive.Interpreter.lower

    def instrumented(routes, ctx, operands, spec):
        results = lower(routes, ctx, operands, spec)
        return checking.instrument(backend, ctx, operands, results, spec, "jaxlib", "the test")

    monkeypatch.setattr(_primitive.Interpreter, "lower", instrumented)
    checking.test = "tests/test_x.py::test_instrumented"
    x = on_cpu(jnp.arange(100, dtype=jnp.float32))
    out = jax.jit(lambda x: jtr.triton_call(
        in_ptr=x, n=x.size, kernel=kernels.double_into_first_kernel, out_type=x, grid=(2,),
        BLOCK=64))(x)
    np.testing.assert_array_equal(out, 2 * x)
    checking.flush()
    [line] = [json.loads(text) for text in open(checking.part)]
    assert (line["test"], line["route"], line["verdict"], line["detail"]) == (
        "tests/test_x.py::test_instrumented", "jaxlib", du.EQUAL, "400 bytes written")
    [(_, arguments, _), _] = checking.launcher.launched
    assert np.array_equal(arguments[1], np.asarray(x))


def test_a_kernel_unstable_elsewhere_in_the_run_is_not_counted_unequal():
    driver = _driver()
    runs = {"0": [_line("jaxlib", "nondeterministic", "atomic"),
                  _line("jaxlib", "unequal", "atomic", detail="output 0: 1 of 4 bytes")]}
    lines, failed = driver.summary(runs, {"0": (True, "2 passed")}, None)
    assert not failed, lines
    table = {tuple(line.split()[:2]): line.split()[2:] for line in lines
             if line.startswith("XLA_NATIVE=") and len(line.split()) == 10}
    assert table[("XLA_NATIVE=0", "jaxlib")][2:5] == ["0", "0", "2"]


def test_a_call_whose_helper_was_rebound_after_lowering_is_not_compared(monkeypatch):
    from tests.support import callee_kernels

    x = on_cpu(jnp.arange(16, dtype=jnp.float32))
    call, inputs, outputs = call_of(lambda x: jtr.triton_call(
        x, kernel=callee_kernels.calls_helper_kernel, out_shape=x, grid=(1,), BLOCK=16), x)
    monkeypatch.setattr(callee_kernels, "helper", callee_kernels.other_helper)
    verdict, detail, _ = du.compare(call, inputs, outputs, InterpreterLauncher())
    assert verdict == du.NOT_COMPARED and "changed after the call was lowered" in detail
    monkeypatch.undo()
    assert du.compare(call, inputs, outputs, InterpreterLauncher())[0] == du.EQUAL


def test_a_callback_that_fails_is_reported_as_an_error_not_lost(tmp_path):
    checking = differential.DifferentialPlugin(str(tmp_path / "report.jsonl"), "gw0")
    checking.test = "tests/test_x.py::test_failing_callback"
    call = du.CallDescription(kernels.add_kernel, "add_kernel", "jaxlib", "the test",
                              ((), np.dtype("float32")), (), ())

    class Unreadable:
        def __array__(self, *args, **kwargs):
            raise RuntimeError("the buffer went away")

    assert checking.received(call, (Unreadable(),)) == ()
    checking.flush()
    with open(checking.part) as file:
        [line] = [json.loads(text) for text in file]
    assert (line["kernel"], line["verdict"]) == ("add_kernel", du.ERROR), line
    assert "the buffer went away" in line["detail"]
