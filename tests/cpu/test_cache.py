"""The shared kernel-key cache: hits, misses, edited kernels, same names, threads."""

import threading

import jax.numpy as jnp
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _state
from jax_triton_rocm.compile import _compile
from tests.support import kernels
from tests.support.lowering_utils import captured_lowerings, lower_add, lower_one, run_at_once, spec

X = spec((2048,), jnp.float32)


pytestmark = pytest.mark.usefixtures("fresh_caches")


def test_second_lowering_of_a_kernel_compiles_nothing_and_emits_the_same_call():
    first = lower_add(kernels.add_kernel, BLOCK=256)
    again = lower_add(kernels.add_kernel, BLOCK=256)
    assert _state.COMPILED_KERNELS.stats["compiles"] == 1
    assert again.opaque == first.opaque


def test_the_same_kernel_in_another_call_is_a_kernel_cache_hit():
    lower_add(kernels.add_kernel, BLOCK=256)
    _state.PLANS.clear()  # else the first call's plan serves the second (test_relowering.py)
    # The first lowering counts a hit too where it waited for its trace's early compile.
    hits = _state.COMPILED_KERNELS.stats["hits"]
    lower_one(lambda x, y: jtr.triton_call(x, y, x.size, kernel=kernels.add_kernel, out_shape=x,
                                           grid=(4,), BLOCK=256), X, X, platform="cuda")
    assert _state.COMPILED_KERNELS.stats["compiles"] == 1
    assert _state.COMPILED_KERNELS.stats["hits"] == hits + 1


def test_another_constexpr_is_a_miss():
    lower_add(kernels.add_kernel, BLOCK=256)
    lower_add(kernels.add_kernel, BLOCK=512)
    assert _state.COMPILED_KERNELS.stats["compiles"] == 2


def test_another_arch_is_a_miss():
    lower_add(kernels.add_kernel, platform="cuda", arch="sm_90", BLOCK=256)
    lower_add(kernels.add_kernel, platform="cuda", arch="sm_80", BLOCK=256)
    lower_add(kernels.add_kernel, platform="rocm", arch="gfx942", BLOCK=256)
    assert _state.COMPILED_KERNELS.stats["compiles"] == 3


def test_an_edited_kernel_never_gets_the_old_binary():
    with captured_lowerings() as lowered:
        lower_add(kernels.elementwise_kernel("x + y"), BLOCK=256)
        lower_add(kernels.elementwise_kernel("x - y"), BLOCK=256)
    plus, minus = (call.kernels[0] for call in lowered)
    assert _state.COMPILED_KERNELS.stats["compiles"] == 2
    assert "add.f32" in plus.asm and "sub.f32" in minus.asm


def test_two_kernels_with_the_same_name_do_not_collide():
    first, second = kernels.elementwise_kernel("x * y"), kernels.elementwise_kernel("x * y + 1.0")
    assert first.__name__ == second.__name__
    a = lower_add(first, BLOCK=256).calls[0].kernel.ptx
    b = lower_add(second, BLOCK=256).calls[0].kernel.ptx
    assert a != b


def test_editing_a_called_triton_function_changes_the_key():
    def make(helper_body):
        return kernels.kernel_from_source(f'''
@triton.jit
def helper(x):
    return {helper_body}

@triton.jit
def k(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, helper(tl.load(x_ptr + offsets)))
''')

    lower_add(make("x * 2.0"), BLOCK=256)
    lower_add(make("x * 3.0"), BLOCK=256)
    assert _state.COMPILED_KERNELS.stats["compiles"] == 2


def test_kernel_key_covers_compile_options():
    from jax_triton_rocm.kernel._layout import BoundKernel

    bound = BoundKernel({"x": "*fp32"}, {}, {}, (), ())
    target = triton.backends.compiler.GPUTarget("cuda", 90, 32)
    base = {"num_warps": 4, "num_stages": 3}
    job = {"arch": "sm_90", "binary_key": "cubin", "asm_key": "ptx", "symbol": "add_kernel"}
    keys = {_compile.make_job(kernels.add_kernel, target, bound, options, gluon=False, **job).key
            for options in (base, {**base, "num_warps": 8}, {**base, "num_stages": 2},
                            {**base, "enable_fp_fusion": False})}
    keys.add(_compile.make_job(kernels.add_kernel, target, bound, base, gluon=True, **job).key)
    assert len(keys) == 5


def test_eight_threads_lowering_one_kernel_compile_it_once():
    run_at_once([lambda: lower_add(kernels.add_kernel, BLOCK=1024)] * 8)
    assert _state.COMPILED_KERNELS.stats["compiles"] == 1


def test_clear_caches_empties_the_cache():
    lower_add(kernels.add_kernel, BLOCK=256)
    assert len(_state.COMPILED_KERNELS) == 1
    jtr.clear_caches()
    assert len(_state.COMPILED_KERNELS) == 0
    lower_add(kernels.add_kernel, BLOCK=256)
    assert _state.COMPILED_KERNELS.stats["compiles"] == 1


def test_lock_registry_hands_out_one_lock_per_key_and_fresh_ones_after_fork():
    registry = _state.LockRegistry()
    assert registry.lock_for("a") is registry.lock_for("a")
    assert registry.lock_for("a") is not registry.lock_for("b")
    held = registry.lock_for("a")
    held.acquire()
    registry.reset_after_fork()
    assert registry.lock_for("a") is not held
    assert registry.lock_for("a").acquire(blocking=False)


def test_tritons_python_front_end_runs_one_thread_at_a_time(monkeypatch, tmp_path):
    from triton.compiler import ASTSource

    state = {"active": 0, "most": 0}
    lock = threading.Lock()
    make_ir = ASTSource.make_ir

    def watched(self, *args, **kwargs):
        with lock:
            state["active"] += 1
            state["most"] = max(state["most"], state["active"])
        try:
            import time

            time.sleep(0.05)
            return make_ir(self, *args, **kwargs)
        finally:
            with lock:
                state["active"] -= 1

    monkeypatch.setattr(ASTSource, "make_ir", watched)
    monkeypatch.setenv("JAX_TRITON_ROCM_COMPILE_THREADS", "4")
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))  # Triton's cache would skip make_ir
    from tests.support import autotune_utils

    # One autotuned call: its configs compile in parallel threads of one lowering.
    lower_one(autotune_utils.tuned_add, X, X, platform="cuda")
    assert _state.COMPILED_KERNELS.stats["compiles"] == len(autotune_utils.ADD_CONFIGS) > 1
    assert state["most"] == 1


@triton.jit
def _fill_kernel(value, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.zeros((BLOCK,), tl.float32) + value)


def _lower_fill(block):
    return lower_one(lambda: jtr.triton_call(1.5, kernel=_fill_kernel, out_shape=X, grid=(8,),
                                             BLOCK=block), platform="cuda")


def test_a_str_constexpr_is_not_served_the_binary_of_the_value_it_spells(tmp_path, monkeypatch):
    # Triton's on-disk key writes constexprs with str(): "256" and 256 alike.
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    _lower_fill(256)
    jtr.clear_caches()  # the next lowering finds the kernel in Triton's cache only
    with pytest.raises(triton.CompilationError, match=r"the constexprs BLOCK='256'"):
        _lower_fill("256")


def test_constexprs_without_a_str_keep_tritons_own_on_disk_key(monkeypatch):
    from triton.compiler import ASTSource

    from jax_triton_rocm.compile import _folders
    from jax_triton_rocm.kernel._layout import BoundKernel

    signature = {"value": "fp32", "out_ptr": "*fp32", "BLOCK": "constexpr"}
    tritons_own = ASTSource(_fill_kernel, signature, constexprs={(2,): 256}).hash()

    class Compiled(Exception):
        pass

    def on_disk_key(block):  # the key `compile_job` has Triton file the compile under
        def compile_in_usable_cache(triton, compile_fn):
            raise Compiled(compile_fn.args[1].hash())  # (triton, source, ...)

        monkeypatch.setattr(_folders, "compile_in_usable_cache", compile_in_usable_cache)
        target = triton.backends.compiler.GPUTarget("cuda", 90, 32)
        bound = BoundKernel(signature, {(2,): block}, {}, (), ())
        job = _compile.make_job(_fill_kernel, target, bound, {}, arch="sm_90", gluon=False,
                                binary_key="cubin", asm_key="ptx", symbol="_fill_kernel")
        with pytest.raises(Compiled) as compiled:
            _compile.compile_job(job)
        return compiled.value.args[0]

    # A kernel of no callees and no globals: only the constexprs' types can widen the key.
    assert on_disk_key(256) == tritons_own
    assert on_disk_key("256") != tritons_own
