"""Remembered autotune choices (`_choices`) and the tuner that makes them (`autotune`), on the CPU.

A remembered choice applies only to lowerings for a GPU that is there; these tests stand in a
device kind for the CUDA lowering (`_arch.device_kind`) and lower for sm_90 under
`target_arch`. The tuner's timing runs need a GPU (test_gpu_autotune_real_data.py); here its loop
is driven with stand-ins for compiling and timing.
"""

import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.api import _tuning
from jax_triton_rocm.base import _compat, _env
from jax_triton_rocm.routes import _arch, _choices
from tests.support import autotune_utils as au
from tests.support import kernels
from tests.support.gpu_utils import gpu_platform
from tests.support.lowering_utils import capture_one

N = au.TUNED_N
DEVICE = au.STAND_IN_DEVICE  # the device kind `choices_dir` stands in


def _block(lowered):
    """The BLOCK a single-kernel call was compiled with, read from its grid."""
    assert len(lowered.calls) == 1
    return -(-N // lowered.calls[0].grid[0])


def test_an_undecided_call_is_left_to_jaxlib_on_the_legacy_target(choices_dir):
    lowered = au.lower_tuned_add()
    assert lowered.custom_call_name == _compat.LEGACY_CALL_NAME
    assert len(lowered.calls) == len(au.ADD_CONFIGS)
    assert lowered.undecided.descriptions == tuple(str(c) for c in au.ADD_CONFIGS)


def test_a_remembered_choice_lowers_to_that_config_alone_on_the_ffi_target(choices_dir):
    undecided = au.undecided_choice()
    _choices.STORE.put(undecided.key, _choices.Choice(1, undecided.descriptions[1]))
    lowered = au.lower_tuned_add()
    assert lowered.custom_call_name == _compat.FFI_CALL_NAME
    assert lowered.undecided is None
    assert _block(lowered) == au.ADD_CONFIGS[1].kwargs["BLOCK"]


def test_a_forced_config_lowers_alone_and_is_not_reported_undecided(choices_dir):
    key = au.undecided_choice().key
    with _choices.session({key: 2}) as current:
        lowered = au.lower_tuned_add()
    assert _block(lowered) == au.ADD_CONFIGS[2].kwargs["BLOCK"]
    assert current.undecided == {}


def test_a_choice_made_for_one_shape_does_not_apply_to_another(choices_dir):
    undecided = au.undecided_choice()
    _choices.STORE.put(undecided.key, _choices.Choice(1, undecided.descriptions[1]))
    assert au.lower_tuned_add(N * 2).undecided is not None


def test_the_key_covers_the_device_kind(choices_dir, monkeypatch):
    key = au.undecided_choice().key
    monkeypatch.setattr(_arch, "device_kind", lambda platform, context: "Another GPU")
    jtr.clear_caches()
    assert au.undecided_choice().key != key


def test_a_lowering_without_a_device_is_never_decided(monkeypatch, tmp_path):
    """Lowered for a GPU platform this machine has no device of: a cross-compile."""
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))
    platform = "cuda" if gpu_platform() == "rocm" else "rocm"
    with _choices.session() as current:
        lowered = capture_one(lambda x, y: au.tuned_add(x, y), au.f32(N), au.f32(N),
                              platform=platform)
    assert lowered.undecided is None and len(lowered.calls) == len(au.ADD_CONFIGS)
    assert current.undecided == {}


def test_a_choice_no_longer_matching_the_configs_is_ignored(choices_dir):
    undecided = au.undecided_choice()
    _choices.STORE.put(undecided.key, _choices.Choice(1, "BLOCK: 999, num_warps: 1"))
    assert au.lower_tuned_add().undecided is not None


def test_a_choice_is_written_to_the_folder_and_read_back_after_clear_caches(choices_dir):
    undecided = au.undecided_choice()
    _choices.STORE.put(undecided.key, _choices.Choice(2, undecided.descriptions[2], (1.0, 2.0)))
    path = choices_dir / undecided.key[:2] / f"{undecided.key}.json"
    assert json.loads(path.read_text())["index"] == 2
    jtr.clear_caches()
    assert _block(au.lower_tuned_add()) == au.ADD_CONFIGS[2].kwargs["BLOCK"]


def test_a_damaged_choice_file_is_ignored_with_a_warning_naming_it(choices_dir, caplog):
    undecided = au.undecided_choice()
    _choices.STORE.put(undecided.key, _choices.Choice(2, undecided.descriptions[2]))
    path = choices_dir / undecided.key[:2] / f"{undecided.key}.json"
    path.write_text("{not json")
    jtr.clear_caches()
    with caplog.at_level("WARNING", logger="jax_triton_rocm"):
        assert au.lower_tuned_add().undecided is not None
    assert str(path) in caplog.text


def test_an_empty_folder_setting_keeps_choices_in_the_process(choices_dir, monkeypatch):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, "")
    undecided = au.undecided_choice()
    _choices.STORE.put(undecided.key, _choices.Choice(0, undecided.descriptions[0]))
    assert list(choices_dir.iterdir()) == []
    assert au.lower_tuned_add().undecided is None


def test_an_unwritable_folder_keeps_the_choice_in_the_process_with_a_warning(
        choices_dir, monkeypatch, caplog):
    blocker = choices_dir / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(blocker / "choices"))
    undecided = au.undecided_choice()
    with caplog.at_level("WARNING", logger="jax_triton_rocm"):
        _choices.STORE.put(undecided.key, _choices.Choice(0, undecided.descriptions[0]))
    assert _env.ENV_AUTOTUNE_DIR in caplog.text
    assert au.lower_tuned_add().undecided is None


def test_the_default_folder_is_inside_tritons_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(_env.ENV_AUTOTUNE_DIR, raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    assert _choices.choices_dir() == os.path.join(str(tmp_path), _choices.FOLDER_NAME)


# The tuner's loop, with compiling and timing stood in for.

class _Equation:
    """A stand-in for an equation with two undecided autotuned calls, "a" and "b"."""

    descriptions = ("slow", "fast", "medium")
    times = {"slow": 3.0, "fast": 1.0, "medium": 2.0}

    def __init__(self):
        self.compiled_with = []

    def compiled(self, eqn, invals, forced):
        self.compiled_with.append(dict(forced))
        undecided = {key: _choices.Undecided(key, self.descriptions, key)
                     for key in ("a", "b") if key not in forced}
        return (lambda *args: [("ran", tuple(sorted(forced.items())))]), undecided

    def time(self, compiled, invals):
        forced = dict(compiled()[0][1])
        under_test = "b" if "b" in forced else "a"
        return self.times[self.descriptions[forced[under_test]]]


def test_the_tuner_times_every_config_of_each_call_and_remembers_the_fastest(
        choices_dir, monkeypatch):
    equation = _Equation()
    monkeypatch.setattr(_tuning, "_compiled", equation.compiled)
    monkeypatch.setattr(_tuning, "_time", equation.time)
    outs = _tuning._tune_and_run(None, [])
    assert outs == [("ran", (("a", 1), ("b", 1)))]
    assert equation.compiled_with[1:4] == [{"a": 0}, {"a": 1}, {"a": 2}]
    assert equation.compiled_with[5:8] == [{"a": 1, "b": 0}, {"a": 1, "b": 1}, {"a": 1, "b": 2}]
    for key in ("a", "b"):
        choice = _choices.STORE.get(key)
        assert (choice.index, choice.description, choice.times_ms) == (1, "fast",
                                                                       (3e3, 1e3, 2e3))


def test_autotune_returns_what_the_function_returns(choices_dir):
    """On the CPU the kernels run in Triton's interpreter: nothing is left undecided."""

    @jax.custom_vjp
    def sine(x):
        return jnp.sin(x)

    sine.defvjp(lambda x: (jnp.sin(x), x), lambda x, g: (g * jnp.cos(x),))

    def program(x, y, *, scale):
        z = jax.jit(lambda a, b: au.tuned_add(sine(a), b))(x, y)
        return {"z": z * scale, "w": jax.lax.map(jnp.sin, x[:4])}

    x, y = jnp.arange(1000, dtype=jnp.float32), jnp.ones(1000, jnp.float32)
    got = jtr.autotune(program, x, y, scale=3.0)
    want = program(x, y, scale=3.0)
    assert jax.tree.structure(got) == jax.tree.structure(want)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert jnp.allclose(a, b)


def test_the_tuner_enters_calls_and_runs_triton_calls_as_candidates():
    def program(x, y):
        return jax.jit(lambda a, b: au.tuned_add(a, b) + kernels.add(a, b))(x, y) * 2

    jaxpr = jax.make_jaxpr(program)(au.f32(8), au.f32(8)).jaxpr
    outer = jaxpr.eqns[0]
    assert _tuning._call_body(outer) is not None
    inner = _tuning._call_body(outer)[0].eqns
    assert [_tuning._may_call_triton(e) for e in inner] == [True, True, False]
    assert not _tuning._may_call_triton(jaxpr.eqns[1])
    assert _tuning._may_call_triton(outer)


def test_a_library_primitive_with_its_own_gpu_lowering_is_a_candidate():
    from tests.support import real_data_kernels

    moe = real_data_kernels.moe_example()
    mask, probs = moe.top_k_routing(jax.random.key(0), 16, 4, 2)
    x = jnp.ones((16, 8), jnp.float32)
    jaxpr = jax.make_jaxpr(lambda m, x, p: moe.permute(x, moe.make_row_id_map(m), p, 32))(
        mask, x, probs).jaxpr
    names = {e.primitive.name: _tuning._may_call_triton(e) for e in jaxpr.eqns}
    assert names["moe_row_id_map_pass_1"] and names["custom_vjp_call"]
    assert not names.get("convert_element_type", False)


def _stored_choice(choices_dir, index=1):
    """The path of a choice file for the tuned add, and its record, the file written."""
    undecided = au.undecided_choice()
    _choices.STORE.put(undecided.key, _choices.Choice(index, undecided.descriptions[index]))
    path = choices_dir / undecided.key[:2] / f"{undecided.key}.json"
    return path, json.loads(path.read_text())


@pytest.mark.parametrize("change,problem", [
    ({"format": 999}, "format 999"),
    ({"format": "1"}, "no format number"),
    ({"index": "1"}, "index '1'"),
    ({"index": True}, "index True"),
    ({"index": 1.0}, "index 1.0"),
    ({"index": -1}, "index -1"),
    ({"times_ms": [1.0, float("nan"), 2.0]}, "times_ms"),
    ({"times_ms": [float("inf")]}, "times_ms"),
    ({"description": None}, "no description"),
], ids=lambda v: str(v) if isinstance(v, dict) else None)
def test_a_choice_of_another_format_or_with_wrong_fields_is_ignored_with_one_warning(
        choices_dir, caplog, change, problem):
    path, record = _stored_choice(choices_dir)
    path.write_text(json.dumps({**record, **change}))
    jtr.clear_caches()
    with caplog.at_level("WARNING", logger="jax_triton_rocm"):
        assert au.lower_tuned_add().undecided is not None
        jax.clear_caches()
        jtr.clear_caches()
        assert au.lower_tuned_add().undecided is not None
    warnings = [r.getMessage() for r in caplog.records if str(path) in r.getMessage()]
    assert len(warnings) == 1 and problem in warnings[0], warnings


def test_a_deeply_nested_choice_file_is_ignored_with_a_warning(choices_dir, caplog):
    path, _ = _stored_choice(choices_dir)
    path.write_text("[" * 100_000 + "]" * 100_000)
    jtr.clear_caches()
    with caplog.at_level("WARNING", logger="jax_triton_rocm"):
        assert au.lower_tuned_add().undecided is not None
    assert f"{path} (JSON nested too deeply to parse)" in caplog.text


NOBODY = 65534  # another user's id, to own folders as root

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's folder needs "
                                "root (os.chown)")


def _plant(store, key, how):
    """Prepares the folder `store` as another user could have, `how`; returns the folder a
    write must not reach."""
    group = store / key[:2]
    elsewhere = store.parent / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    if how == "store folder is a link":
        store.symlink_to(elsewhere)
        return elsewhere
    store.mkdir()
    if how == "group folder is a link":
        group.symlink_to(elsewhere)
        return elsewhere
    folder = group if how == "group folder is another user's" else store
    folder.mkdir(exist_ok=True)
    os.chown(folder, NOBODY, NOBODY)
    return folder


@needs_root
@pytest.mark.parametrize("how", ["group folder is a link", "store folder is a link",
                                 "group folder is another user's",
                                 "store folder is another user's"])
def test_a_store_another_user_could_have_planted_is_not_written(choices_dir, monkeypatch,
                                                                caplog, how):
    store = choices_dir / "store"
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(store))
    undecided = au.undecided_choice()
    untouched = _plant(store, undecided.key, how)
    with caplog.at_level("WARNING", logger="jax_triton_rocm"):
        _choices.STORE.put(undecided.key, _choices.Choice(2, undecided.descriptions[2]))
        _choices.STORE.put(undecided.key, _choices.Choice(2, undecided.descriptions[2]))
    assert [p for p in untouched.rglob("*") if p.is_file()] == []
    warnings = [r.getMessage() for r in caplog.records if "could not save" in r.getMessage()]
    assert len(warnings) == 1 and "kept in this process" in warnings[0], warnings
    assert ("a symbolic link" if "link" in how else f"owned by user id {NOBODY}") in warnings[0]
    assert _block(au.lower_tuned_add()) == au.ADD_CONFIGS[2].kwargs["BLOCK"]  # the choice is kept


def test_a_choice_behind_a_group_folder_that_is_a_link_is_not_read(choices_dir, caplog):
    path, _ = _stored_choice(choices_dir)
    moved = choices_dir / "moved"
    path.parent.rename(moved)
    path.parent.symlink_to(moved)
    jtr.clear_caches()
    with caplog.at_level("WARNING", logger="jax_triton_rocm"):
        assert au.lower_tuned_add().undecided is not None
    assert "is a symbolic link, not a folder" in caplog.text


def _lower_in_a_thread():
    """Lowers in another thread, so that a read that blocks shows as a thread still running."""
    import threading

    outcome = []
    thread = threading.Thread(target=lambda: outcome.append(au.lower_tuned_add()), daemon=True)
    thread.start()
    thread.join(20)
    return thread, outcome


@pytest.mark.parametrize("kind,what", [("fifo", "a FIFO"), ("symlink to a fifo", "a symbolic link"),
                                       ("folder", "a folder")])
def test_what_is_not_a_regular_file_is_never_opened(choices_dir, caplog, kind, what):
    path, _ = _stored_choice(choices_dir)
    path.unlink()
    fifo = choices_dir / "fifo"
    if kind == "folder":
        path.mkdir()
    else:
        os.mkfifo(fifo if kind != "fifo" else path)
        if kind != "fifo":
            path.symlink_to(fifo)
    jtr.clear_caches()
    with caplog.at_level("WARNING", logger="jax_triton_rocm"):
        thread, outcome = _lower_in_a_thread()
        blocked = thread.is_alive()
        if blocked:  # a read waits on the FIFO: open its other end to free it
            os.close(os.open(fifo if kind != "fifo" else path, os.O_WRONLY | os.O_NONBLOCK))
            thread.join(10)
    assert not blocked and outcome and outcome[0].undecided is not None
    assert f"{path} ({what}, not a regular file)" in caplog.text


def test_a_dead_writers_temporary_files_are_swept_once_a_minute_old(choices_dir, monkeypatch):
    path, _ = _stored_choice(choices_dir)
    old, young = path.parent / "old-writer.json.tmp", path.parent / "live-writer.json.tmp"
    for leftover in (old, young):
        leftover.write_text("{")
    os.utime(old, (os.path.getmtime(old) - 61,) * 2)
    monkeypatch.setattr(_choices, "_swept", set())  # as in a new process
    jtr.clear_caches()
    au.lower_tuned_add()
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, young.name])


@triton.jit
def scaled_kernel(x_ptr, alpha, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, alpha * tl.load(x_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def declared_scaled_kernel(x_ptr, alpha: tl.float32, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, alpha * tl.load(x_ptr + offsets, mask=mask), mask=mask)


def _scaled(kernel):
    def program(x, alpha):
        return jtr.triton_call(x, alpha, x.size, kernel=kernel, out_shape=x,
                               grid=(triton.cdiv(x.size, 256),), BLOCK=256)

    return program


@pytest.mark.parametrize("alpha", [2.5, np.float32(2.5)], ids=["float", "np.float32"])
def test_autotune_binds_a_scalar_argument_as_the_scalar_it_is(choices_dir, alpha):
    x = jax.device_put(jnp.arange(1000, dtype=jnp.float32), jax.devices("cpu")[0])
    assert jnp.allclose(jtr.autotune(_scaled(scaled_kernel), x, alpha), 2.5 * x)


def test_autotune_refuses_a_0d_array_for_a_declared_scalar_naming_the_parameter(choices_dir):
    x = jax.device_put(jnp.arange(1000, dtype=jnp.float32), jax.devices("cpu")[0])
    with pytest.raises(TypeError, match=r"argument 1 \(alpha\) is annotated tl.float32.*"
                                        r"static_argnums"):
        jtr.autotune(_scaled(declared_scaled_kernel), x, jnp.float32(2.5))
