"""What a kernel writes is read from the IR Triton compiled for the call, on every route: a store
or atomic into a plain input array is refused, naming the parameter and the line, with or
without outputs beside it, whatever constexpr, `tl.where` or helper chose the pointer; an
output written only with atomics that nothing zeroes is refused; an output the kernel never
writes warns; what the IR cannot tell (a pointer picked at run time, one made from an int)
refuses nothing."""

import functools
import linecache
import uuid
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

import jax_triton_rocm as jtr
import jax_triton_rocm.compat as jt
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.compile import _writes
from jax_triton_rocm.checks import _kinds, _misplaced
from jax_triton_rocm.kernel import _layout
from tests.support.gluon_kernels import vector_layout
from tests.support.lowering_utils import lower_for

N = 256
X = jax.ShapeDtypeStruct((N,), jnp.float32)
PLATFORMS = ["cpu", "cuda", "rocm"]


@triton.jit
def flag_scratch_kernel(x_ptr, n, out_ptr, FLAG: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o, mask=o < n)
    tl.store(out_ptr + o, x * 2, mask=o < n)
    if FLAG:
        tl.store(x_ptr + o, 0, mask=o < n)


@triton.jit
def picked_kernel(a_ptr, b_ptr, n, A_IS_OUT: tl.constexpr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    src = tl.where(A_IS_OUT, b_ptr + o, a_ptr + o)
    dst = tl.where(A_IS_OUT, a_ptr + o, b_ptr + o)
    tl.store(dst, tl.load(src, mask=o < n) * 2, mask=o < n)


def flag_scratch(x, flag):
    return jtr.triton_call(x, N, kernel=flag_scratch_kernel, out_type=X, grid=(1,), FLAG=flag,
                           BLOCK=N)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_store_into_a_plain_input_beside_an_output_is_refused_on_every_platform(platform):
    # Round 7 (a): the store sits behind a constexpr flag, in a jit that uses x afterwards.
    with pytest.raises(TypeError, match=(
            r"Kernel flag_scratch_kernel stores to parameter 'x_ptr' \(test_ir_writes.py:\d+: "
            r"tl.store\(x_ptr \+ o, 0.*compiled with FLAG=True.*\), which argument 0 "
            r"\(float32\[256\]\), a plain array, fills, beside the call's outputs.*read-only.*"
            r"jax.new_ref\(x\).*input_output_aliases=\{0: 1\}")):
        lower_for(lambda x: (flag_scratch(x, True), x * 2), X, platform=platform)


def test_the_same_kernel_without_its_store_into_the_input_runs():
    x = jnp.arange(N, dtype=jnp.float32)
    out, doubled = jax.jit(lambda x: (flag_scratch(x, False), x * 2))(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(doubled))


@pytest.mark.parametrize("platform", PLATFORMS)
def test_an_output_on_the_parameter_a_constexpr_where_does_not_pick_is_refused(platform):
    # Round 7 (b): tl.where on a constexpr picks a_ptr, which argument 0 fills.
    with pytest.raises(TypeError, match=(
            r"Kernel picked_kernel would read memory nobody wrote: argument 0 \(float32\[256\]\), "
            r"an input, fills parameter 'a_ptr', which the kernel stores to \(test_ir_writes.py:"
            r"\d+: tl.store\(dst.*compiled with A_IS_OUT=True, BLOCK=256\)\), and output 0 lands "
            r"on parameter 'b_ptr', which it only loads from .*triton_call\(\.\.\., b_ptr=x, "
            r"out_type=")):
        lower_for(lambda x: jtr.triton_call(x, kernel=picked_kernel, out_type=X, grid=(1,),
                                            n=N, A_IS_OUT=True, BLOCK=N), X, platform=platform)


def test_the_pick_the_call_means_computes_the_result():
    x = jnp.arange(N, dtype=jnp.float32)
    for out in (jtr.triton_call(x, kernel=picked_kernel, out_type=X, grid=(1,), n=N,
                                A_IS_OUT=False, BLOCK=N),
                jtr.triton_call(kernel=picked_kernel, b_ptr=x, out_type=X, grid=(1,), n=N,
                                A_IS_OUT=True, BLOCK=N)):
        np.testing.assert_array_equal(np.asarray(out), np.asarray(x) * 2)


@triton.jit
def histogram_kernel(x_ptr, counts_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.atomic_add(counts_ptr + (tl.load(x_ptr + o).to(tl.int32) % 4), 1)


def histogram(x, **kwargs):
    return jtr.triton_call(x, kernel=histogram_kernel, out_type=jax.ShapeDtypeStruct(
        (4,), jnp.int32), grid=(1,), BLOCK=N, **kwargs)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_an_output_written_only_by_atomics_and_never_zeroed_is_refused(platform):
    with pytest.raises(TypeError, match=(
            r"Kernel histogram_kernel writes output 0 \(parameter 'counts_ptr'\) only with "
            r"atomics \(test_ir_writes.py:\d+: tl.atomic_add\(counts_ptr.*neither zeroed nor "
            r"aliased.*zeroed_outputs=\(0,\)")):
        lower_for(histogram, X, platform=platform)


def test_the_same_output_zeroed_counts_right():
    x = jnp.arange(N, dtype=jnp.float32)
    np.testing.assert_array_equal(np.asarray(histogram(x, zeroed_outputs=(0,))),
                                  [N // 4] * 4)


@triton.jit
def optional_state_kernel(x_ptr, out_ptr, state_ptr, STORE_STATE: tl.constexpr,
                          BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + o)
    tl.store(out_ptr + o, x + 1)
    if STORE_STATE:
        tl.store(state_ptr + o, x)


def optional_state(x, store_state):
    return jtr.triton_call(x, kernel=optional_state_kernel, out_type=(X, X), grid=(1,),
                           STORE_STATE=store_state, BLOCK=N)


@pytest.mark.parametrize("platform", PLATFORMS)
def test_an_output_the_kernel_never_writes_warns_naming_it_and_the_constexprs(platform):
    with pytest.warns(_misplaced.UnwrittenOutputWarning, match=(
            r"kernel optional_state_kernel never writes output 1 \(parameter 'state_ptr'\) "
            r"\(compiled with STORE_STATE=False, BLOCK=256\)")):
        lower_for(lambda x: optional_state(x, False), X, platform=platform)


def test_the_output_written_behind_its_flag_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", _misplaced.UnwrittenOutputWarning)
        out, state = optional_state(jnp.arange(N, dtype=jnp.float32), True)
    np.testing.assert_array_equal(np.asarray(state), np.arange(N))


@triton.jit
def runtime_pick_kernel(x_ptr, flip, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    dst = tl.where(flip > 0, x_ptr, out_ptr)
    tl.store(dst + o, tl.load(x_ptr + o))


@triton.jit
def int_pointer_kernel(x_ptr, address, out_ptr, BLOCK: tl.constexpr):
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.load(x_ptr + o))
    if address != 0:
        tl.store(address.to(tl.pointer_type(tl.float32)) + o, tl.load(x_ptr + o))


@pytest.mark.parametrize("platform", ["cuda", "rocm"])
def test_a_pointer_picked_at_run_time_refuses_nothing(platform):
    with warnings.catch_warnings():
        warnings.simplefilter("error", _misplaced.UnwrittenOutputWarning)
        lower_for(lambda x: jtr.triton_call(x, 0, kernel=runtime_pick_kernel, out_type=X,
                                            grid=(1,), BLOCK=N), X, platform=platform)


def test_a_pointer_picked_at_run_time_computes_what_the_kernel_says():
    x = jnp.arange(N, dtype=jnp.float32)
    out = jtr.triton_call(x, 0, kernel=runtime_pick_kernel, out_type=X, grid=(1,), BLOCK=N)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x))


def test_the_drop_in_and_the_lowering_api_refuse_the_store_into_an_input_too():
    from tests.support import library_kernels

    with pytest.raises(TypeError, match=r"stores to parameter 'x_ptr'.*a plain array, fills"):
        lower_for(lambda x: jt.triton_call(x, N, kernel=flag_scratch_kernel, out_shape=X,
                                           grid=(1,), FLAG=True, BLOCK=N), X, platform="cuda")


    def lowering(ctx, x):
        return jtr.triton_call_lowering(ctx, flag_scratch_kernel, x, grid=(1,),
                                        constexprs={"n": N, "FLAG": True, "BLOCK": N})

    scratch_p = library_kernels.define("test_ir_writes_scratch", lambda x: x, lowering,
                                       multiple_results=False)
    with pytest.raises(TypeError, match=(
            r"triton_call_lowering: kernel flag_scratch_kernel stores to parameter 'x_ptr'.*"
            r"operand 0 \(float32\[256\]\), a plain array.*input_output_aliases=\{0: \.\.\.\}")):
        lower_for(scratch_p.bind, X, platform="cuda")


@gluon.jit
def gluon_scratch_kernel(x_ptr, out_ptr, BLOCK: gl.constexpr, WARP_SIZE: gl.constexpr,
                         NUM_WARPS: gl.constexpr):
    layout: gl.constexpr = vector_layout(BLOCK, WARP_SIZE, NUM_WARPS)
    o = gl.arange(0, BLOCK, layout=layout)
    x = gl.load(x_ptr + o)
    gl.store(out_ptr + o, x)
    gl.store(x_ptr + o, x * 0)


@pytest.mark.parametrize("platform, warp_size", [("cuda", 32), ("rocm", 64)])
def test_a_gluon_kernels_store_into_an_input_is_refused(platform, warp_size):
    with pytest.raises(TypeError, match=r"gluon_scratch_kernel stores to parameter 'x_ptr' "
                                        r"\(test_ir_writes.py:\d+: gl.store\(x_ptr"):
        lower_for(lambda x: jtr.triton_call(
            x, kernel=gluon_scratch_kernel, out_type=X, grid=(1,), num_warps=4, BLOCK=N,
            WARP_SIZE=warp_size, NUM_WARPS=4), X, platform=platform)


def ir_accesses(kernel, scalars=(), **constexprs):
    """{kind: parameter names} of `kernel`'s TTIR; `scalars` are i64, others float pointers."""
    names = list(kernel.arg_names)
    bound = _layout.BoundKernel(
        signature={n: "constexpr" if n in constexprs else "i64" if n in scalars else "*fp32"
                   for n in names},
        constexprs={(i,): constexprs[n] for i, n in enumerate(names) if n in constexprs},
        attrs={}, sources=(), specializations=())
    ttir, error = _kinds.front_end(kernel, bound, _vendors.FRONT_END_PROBES, ttir=True)
    assert error is None
    found = _writes.read(ttir)
    runtime = [n for n in names if n not in constexprs]
    return {kind: {runtime[arg] for arg in getattr(found, kind)}
            for kind in ("stores", "atomics", "loads", "unsure")} | {"stray": found.stray}


@triton.jit
def _stores(ptr, value, BLOCK: tl.constexpr):
    tl.store(ptr + tl.arange(0, BLOCK), value)


@triton.jit
def _passes_on(ptr):
    return ptr


@triton.jit
def through_callee_kernel(out_ptr, in_ptr, BLOCK: tl.constexpr):
    _stores(_passes_on(out_ptr), tl.load(in_ptr + tl.arange(0, BLOCK)), BLOCK)


@triton.jit
def loop_carried_kernel(out_ptr, in_ptr, BLOCK: tl.constexpr):
    p, q = in_ptr, out_ptr
    for i in range(4):
        tl.store(q + i * BLOCK + tl.arange(0, BLOCK), tl.load(p + i * BLOCK + tl.arange(0, BLOCK)))
        p += 1


@triton.jit
def descriptor_kernel(out_ptr, in_ptr, BLOCK: tl.constexpr):
    source = tl.make_tensor_descriptor(in_ptr, shape=[BLOCK], strides=[1], block_shape=[BLOCK])
    target = tl.make_tensor_descriptor(out_ptr, shape=[BLOCK], strides=[1], block_shape=[BLOCK])
    target.store([0], source.load([0]))


@pytest.mark.parametrize("kernel", [through_callee_kernel, loop_carried_kernel,
                                    descriptor_kernel],
                         ids=["helpers", "loop-carried pointers", "tensor descriptors"])
def test_stores_and_loads_are_told_apart_through_what_a_pointer_passes(kernel):
    found = ir_accesses(kernel, BLOCK=16)
    assert found["stores"] == {"out_ptr"} and found["loads"] == {"in_ptr"}
    assert not found["unsure"] and found["stray"] is None


@triton.jit
def zero_trip_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    q = in_ptr
    for i in range(n):
        q = out_ptr
    tl.store(q + tl.arange(0, BLOCK), tl.full((BLOCK,), 1.0, tl.float32))


@triton.jit
def for_round_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    q = in_ptr
    for i in range(n):
        tl.store(q + tl.arange(0, BLOCK), tl.full((BLOCK,), 1.0, tl.float32))
        q = out_ptr


@triton.jit
def while_round_kernel(out_ptr, in_ptr, n, BLOCK: tl.constexpr):
    q, i = in_ptr, 0
    while i < n:
        tl.store(q + tl.arange(0, BLOCK), tl.full((BLOCK,), 1.0, tl.float32))
        q, i = out_ptr, i + 1


@pytest.mark.parametrize("kernel", [zero_trip_kernel, for_round_kernel, while_round_kernel],
                         ids=["after a for", "in a for's next round", "in a while's next round"])
def test_a_pointer_a_loop_carries_may_be_the_one_it_started_with(kernel):
    found = ir_accesses(kernel, scalars=("n",), BLOCK=16)
    assert found["unsure"] == {"out_ptr", "in_ptr"} and not found["stores"]
    assert found["stray"] is None


def test_a_pointer_picked_at_run_time_is_unsure_and_one_made_from_an_int_is_stray():
    picked = ir_accesses(runtime_pick_kernel, scalars=("flip",), BLOCK=16)
    assert picked["unsure"] == {"x_ptr", "out_ptr"} and not picked["stores"]
    made = ir_accesses(int_pointer_kernel, scalars=("address",), BLOCK=16)
    assert made["stores"] == {"out_ptr"} and "int_pointer" not in made
    assert made["stray"].startswith("test_ir_writes.py:")


@triton.jit(noinline=True)
def _store_three(ptr, value):
    tl.store(ptr + 3, value)


@triton.jit
def out_of_line_kernel(in_ptr, out_ptr, BLOCK: tl.constexpr):
    _store_three(out_ptr, tl.load(in_ptr))


def test_a_helper_kept_out_of_line_writes_what_its_caller_passes():
    found = ir_accesses(out_of_line_kernel, BLOCK=16)
    assert found["stores"] == {"out_ptr"} and found["loads"] == {"in_ptr"}
    assert not found["unsure"]


def test_atomics_are_told_from_stores():
    found = ir_accesses(histogram_kernel, BLOCK=16)
    assert found["atomics"] == {"counts_ptr"} and not found["stores"]
    assert found["loads"] == {"x_ptr"}


def test_locations_that_nest_each_other_are_resolved_once(monkeypatch):
    # A TTIR from Triton's cache is anyone's text: 200 stores, each at a location that names the
    # next one twice, 13 deep, would take 200 * 2**14 steps read naively.
    shared = "\n".join(f"#loc{k} = loc(callsite(#loc{k + 1} at #loc{k + 1}))" for k in range(13))
    stores = "".join(f"    tt.store %p, %c : !tt.ptr<f32> loc(#loc{100 + j})\n"
                     for j in range(200))
    own = "\n".join(f"#loc{100 + j} = loc(callsite(#loc0 at #loc0))" for j in range(200))
    ir = ("module {\n  tt.func public @k(%p: !tt.ptr<f32> loc(#loc13)) {\n"
          "    %c = arith.constant 0.0 : f32 loc(#loc13)\n" + stores + "    tt.return\n  }\n}\n"
          + shared + "\n" + own + '\n#loc13 = loc("k.py":3:5)\n')
    resolved, resolve = [], _writes._Module._resolved
    monkeypatch.setattr(_writes._Module, "_resolved",
                        lambda self, *args: resolved.append(args[0]) or resolve(self, *args))
    found = _writes.read(ir)
    assert set(found.stores) == {0} and found.stores[0].startswith("k.py:3")
    assert len(resolved) == len(set(resolved)) == 214  # each location once


MOVED_KERNEL = """import triton
import triton.language as tl


@triton.jit
def moved_scratch_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # {tag}: this source, and so its cache entry, belongs to one test's run
    o = tl.arange(0, BLOCK)
    tl.store(out_ptr + o, tl.load(x_ptr + o))
    tl.store(x_ptr + o, 0.0)
"""


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("xla_native", [False, True])
def test_a_kernel_compiled_in_a_folder_since_moved_is_told_with_its_line(tmp_path, platform,
                                                                          xla_native):
    # A checkout or venv moved or replaced: Triton's cache (and the package's) hands the second
    # load of the same source the IR compiled in the first folder, which names files now gone.
    import importlib.util

    def refused():
        spec = importlib.util.spec_from_file_location("moved_kernels", folder / "moved_kernels.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        call = functools.partial(jtr.triton_call, kernel=module.moved_scratch_kernel, out_type=X,
                                 grid=(1,), BLOCK=N, xla_native=xla_native)
        with pytest.raises(TypeError, match="stores to parameter 'x_ptr'") as caught:
            lower_for(call, X, platform=platform)
        return str(caught.value)

    folder = tmp_path / "first"
    folder.mkdir()
    (folder / "moved_kernels.py").write_text(MOVED_KERNEL.format(tag=uuid.uuid4()))
    assert "(moved_kernels.py:10: tl.store(x_ptr + o, 0.0)" in refused()
    folder = folder.rename(tmp_path / "second")
    linecache.checkcache()  # forgets the first folder's lines, as a new process has none
    assert "(moved_kernels.py:10: tl.store(x_ptr + o, 0.0)" in refused()


def test_a_line_compiled_in_a_folder_that_is_gone_is_read_from_the_kernel_where_it_is_now():
    # Triton's cache keys a kernel by its source and first line, not its folder: a TTIR cached
    # from another checkout or venv names a file that may be gone since.
    names = list(flag_scratch_kernel.arg_names)
    bound = _layout.BoundKernel(
        signature={n: "constexpr" if n.isupper() else "i32" if n == "n" else "*fp32"
                   for n in names},
        constexprs={(3,): True, (4,): 256}, attrs={}, sources=(), specializations=())
    ttir, error = _kinds.front_end(flag_scratch_kernel, bound, _vendors.FRONT_END_PROBES,
                                   ttir=True)
    assert error is None and __file__ in ttir
    moved = ttir.replace(__file__, "/a/folder/gone/test_ir_writes.py")
    line = _writes.read(ttir).stores[0]
    assert line.startswith("test_ir_writes.py:")
    assert line.endswith(": tl.store(x_ptr + o, 0, mask=o < n)")
    assert _writes.read(moved, flag_scratch_kernel).stores[0] == line
    assert _writes.read(moved).stores[0] == line.split(": ")[0]  # no text without the kernel
    other = ttir.replace(__file__, "/a/folder/gone/another_file.py")  # not the kernel's file
    assert _writes.read(other, flag_scratch_kernel).stores[0] == "another_file.py:" + line.split(":")[1]


def test_a_line_is_read_only_from_a_source_python_holds_or_loaded(tmp_path):
    # The IR may come from a cache anyone could write: a file only it names is not read.
    def shown(file):
        ir = ("module {\n  tt.func public @k(%p: !tt.ptr<f32> loc(#loc0)) {\n"
              "    %c = arith.constant 0.0 : f32 loc(#loc0)\n"
              "    tt.store %p, %c : !tt.ptr<f32> loc(#loc0)\n    tt.return\n  }\n}\n"
              f'#loc0 = loc("{file}":1:1)\n')
        return _writes.read(ir).stores[0]

    stranger = tmp_path / "stranger.py"
    stranger.write_text("secret = 1\n")
    assert shown(stranger) == "stranger.py:1"
    linecache.clearcache()  # the test module's lines, read again as a module Python loaded
    assert shown(__file__).startswith('test_ir_writes.py:1: """What a kernel writes')


def test_xlas_route_reads_its_trampolines_writes_as_the_calls_buffers():
    # XLA's trampoline numbers its buffers otherwise (a zeroed output is an operand there).
    with pytest.raises(TypeError, match=r"flag_scratch_kernel stores to parameter 'x_ptr'"):
        lower_for(lambda x: jtr.triton_call(x, N, kernel=flag_scratch_kernel, out_type=X,
                                            grid=(1,), FLAG=True, BLOCK=N, xla_native=True),
                  X, platform="cuda")
    with pytest.raises(TypeError, match=r"writes output 0 \(parameter 'counts_ptr'\) only with "
                                        r"atomics"):
        lower_for(lambda x: histogram(x, xla_native=True), X, platform="cuda")
    text = lower_for(lambda x: histogram(x, xla_native=True, zeroed_outputs=(0,)), X,
                     platform="cuda").as_text()
    assert "__gpu$xla.gpu.triton" in text  # zeroed: its atomics add into zeros, on XLA's call
