"""XLA's Triton call, asked for by the environment (JAX_TRITON_ROCM_XLA_NATIVE=1 in every test
here): every call surface and layout, runtime scalars, aliases, Refs, zeroed outputs and
remembered autotune choices, with no hidden fill, memset or copy; and the trampolines that make
kernels fit each route (`plan._trampoline`), run in Triton's interpreter on the CPU in the very
form each route compiles.

Lowered for CUDA (and ROCm where asked) on a machine without a GPU. The same calls run on a GPU
in `test_gpu_xla_route`.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _compat, _env, _state, _values
from jax_triton_rocm.routes.cpu import _interpret
from jax_triton_rocm.plan import _plan, _trampoline
from jax_triton_rocm.routes import _arch, _choices
from jax_triton_rocm.routes.xla import _xla_native
from jax_triton_rocm.kernel import _spec
from tests.support import autotune_utils as au
from tests.support import kernels
from tests.support.lowering_utils import ir_text, kernel_signature, lower_for, native_calls, spec
from tests.support.every_route.xla_surfaces import (MULTIPLES_OF_16, SURFACES, block_grid, offset,
                                                    output_first, typed)
from tests.support.surface_kernels import out_first_kernel

N = 1000
F32 = jnp.float32
XLA = _compat.XLA_TRITON_CALL_NAME
ZERO_FILL = re.compile(r"stablehlo\.constant dense<(0|0\.000000e\+00)>")


@pytest.fixture(autouse=True)
def xla_route_asked(monkeypatch, fresh_lowerings):
    """XLA's route for every call that does not say, wherever it fits; no lowering served from
    another test's."""
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "1")


@pytest.mark.parametrize("surface", SURFACES)
def test_every_surface_takes_xlas_call_with_no_fill_or_copy(surface):
    fn, _, n_aliases = SURFACES[surface]
    x = spec((N,), F32)
    lowered = lower_for(fn, x, x, platform="cuda")
    [call] = native_calls(lowered)
    assert [c.target for c in jtr.kernel_calls(lowered)] == [XLA]
    text = lowered.as_text()
    triton_call = [line for line in text.splitlines() if XLA in line][0]
    # No buffer is made for the kernel: no zero fill (a zero constant broadcast to a buffer),
    # no copy, no memset.
    assert not ZERO_FILL.search(text), text
    assert "stablehlo.copy" not in text and "memset" not in text
    assert call["aliases"].count("output_operand_alias<") == n_aliases, triton_call


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("form", ["xla", "jaxlib"])
def test_the_trampolines_compute_what_the_kernel_computes(surface, form):
    """Each route's form of the call (the trampoline it compiles) run in Triton's interpreter,
    with the buffers in the order that route passes them."""
    fn, reference, _ = SURFACES[surface]
    x = jax.random.normal(jax.random.key(0), (N,), F32)
    y = jax.random.normal(jax.random.key(1), (N,), F32)
    with _run_as_route(form):
        got = jax.jit(fn)(x, y)
    np.testing.assert_allclose(got, reference(x, y), rtol=1e-6, atol=1e-6)


class _run_as_route:
    """While in force, the CPU route runs each call's kernel in the form `form`'s route compiles
    (`_trampoline.for_xla` or `for_jaxlib`), its buffers passed in that route's order."""

    def __init__(self, form):
        self.form = form

    def __enter__(self):
        self.original = _interpret.run_on_host
        _interpret.run_on_host = self.run
        jax.clear_caches()

    def __exit__(self, *exc):
        _interpret.run_on_host = self.original
        jax.clear_caches()

    def run(self, call, *inputs):
        from triton.backends.compiler import BaseBackend

        launch, jit_fn = call.launch, call.jit_fn
        in_avals = tuple(jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype) for a in inputs)
        aliases, extra = list(call.aliases), []
        if self.form == "jaxlib":
            form = _trampoline.for_jaxlib(_spec.unwrap(jit_fn), launch, len(inputs))
            zeroed = launch.zeroed
        else:
            zeroed_avals = tuple(call.out_avals[o] for o in launch.zeroed)
            form, scales = _trampoline.for_xla(_spec.unwrap(jit_fn), launch,
                                               in_avals + zeroed_avals, call.out_avals, BaseBackend)
            extra = [np.zeros(a.shape, a.dtype) for a in zeroed_avals]
            aliases += [(len(inputs) + k, o) for k, o in enumerate(launch.zeroed)]
            # The operands as `_xla_native.emit` makes them: an int of the divisible-by-16
            # class divided by its scale, which the trampoline multiplies back.
            extra += [np.array(s.value if k == 1 else s.value // k,
                               _xla_native._SCALAR_DTYPES[s.triton_type])
                      for s, k in zip([s.scalar for s in launch.bound.sources
                                       if s.kind == "scalar"], scales, strict=True)]
            zeroed = ()
        assert form.jit_fn is not jit_fn or self._fits(form, len(inputs) + len(extra))
        relaid = _values.replaced(launch, bound=form.bound, zeroed=tuple(zeroed))
        return self.original(_values.replaced(call, jit_fn=form.jit_fn, launch=relaid,
                                              positional=(), aliases=tuple(aliases)),
                             *inputs, *extra)

    def _fits(self, form, n_operands):
        """A kernel left as it is must already take its buffers in the route's order."""
        kinds = [s.kind for s in form.bound.sources if s.kind != "scalar"]
        return kinds == sorted(kinds, key=("input", "output").index)


def test_twenty_values_of_a_runtime_scalar_compile_at_most_two_kernels():
    compiles = _state.COMPILED_KERNELS.stats["compiles"]
    irs = set()
    for n in range(1000, 1020):
        x = spec((n,), F32)
        [call] = native_calls(lower_for(kernels.add, x, x, platform="cuda"))
        irs.add(call["ir"])
    # n % 16 == 0 (1008) or not: Triton's two specialisation classes of an int.
    assert len(irs) == 2
    assert _state.COMPILED_KERNELS.stats["compiles"] - compiles <= 2


def _scalar_constants(lowered) -> list[str]:
    """The 0-d constants of the lowered module, as `value : type` text."""
    return re.findall(r"stablehlo\.constant dense<([^>]+)> : tensor<(\w+)>", lowered.as_text())


def _copy(x, n):
    return jtr.triton_call(x, n, kernel=kernels.copy_kernel, out_shape=x, grid=(4,), BLOCK=256)


def _loaded_scale(ir_bytes: bytes) -> int | None:
    """What the trampoline multiplies its loaded int operand by (None: nothing)."""
    text = ir_text(ir_bytes)
    loaded = re.search(r"(%\w+) = tt\.load %arg1 : !tt\.ptr<i32>", text)
    assert loaded, text
    product = re.search(rf"arith\.muli {loaded.group(1)}, %c(\d+)_i32", text)
    return int(product.group(1)) if product else None


# n -> (the factor the trampoline multiplies the loaded value by, the operand's value)
SCALES = {1000: (None, 1000), 1008: (16, 63), 1056: (32, 33), 4160: (64, 65), 1024: (128, 8),
          -4096: (128, -32), 0: (128, 0)}


@pytest.mark.parametrize("n", SCALES)
def test_an_int_divisible_by_16_travels_divided_by_its_power_of_two_scale(n):
    """The product states the divisibility in the arithmetic, where no pass drops it (a
    `tl.multiple_of` hint is an attribute); up to 128, the largest power of two that divides
    the value."""
    x = spec((1024,), F32)
    lowered = lower_for(lambda x: _copy(x, n), x, platform="cuda")
    [call] = native_calls(lowered)
    scale, operand = SCALES[n]
    assert _loaded_scale(call["ir"]) == scale
    assert (str(operand), "i32") in _scalar_constants(lowered)
    assert "tt.divisibility = dense" not in ir_text(call["ir"])


def test_one_is_compiled_in_as_by_tritons_launcher():
    [one] = native_calls(lower_for(lambda x: _copy(x, 1), spec((1024,), F32), platform="cuda"))
    assert one["operands"] == ["tensor<1024xf32>"]


def test_a_value_gets_its_own_class_whatever_was_lowered_before(fresh_caches):
    """A plan kept for one class is not reused for a value of another: the kernel a value gets
    does not depend on what the process lowered before."""
    def add_n(x, n):
        return jtr.triton_call(x, x, n, kernel=kernels.add_kernel, out_shape=x, grid=(4,),
                               BLOCK=256)

    x = spec((1024,), F32)
    irs = {}
    for n in (1040, 1024, 1056, 1024, 1040):
        [call] = native_calls(lower_for(lambda x, n=n: add_n(x, n), x, platform="cuda"))
        irs.setdefault(n, set()).add(call["ir"])
    assert {n: len(found) for n, found in irs.items()} == {1040: 1, 1024: 1, 1056: 1}
    assert len(set().union(*irs.values())) == 3
    jtr.clear_caches()
    [fresh] = native_calls(lower_for(lambda x: add_n(x, 1024), x, platform="cuda"))
    assert irs[1024] == {fresh["ir"]}


@pytest.mark.parametrize("k", MULTIPLES_OF_16.values(), ids=MULTIPLES_OF_16)
def test_an_int_multiple_of_16_reaches_the_kernel_of_xlas_form(k):
    """The trampoline XLA compiles, run in Triton's interpreter with the operand the route
    emits: the value divided by its scale, multiplied back by the trampoline."""
    x = jax.random.normal(jax.random.key(4), (512,), F32)
    [call] = native_calls(lower_for(lambda x: offset(x, k), spec((512,), F32), platform="cuda"))
    assert re.search(r"arith\.muli %\w+, %c(16|64|128)_i(32|64)", ir_text(call["ir"]))
    with _run_as_route("xla"):
        got = jax.jit(lambda x: offset(x, k))(x)
    np.testing.assert_allclose(got, np.asarray(x) + np.float32(k), rtol=1e-6)


def test_scalars_of_every_type_reach_xlas_call_as_their_triton_types():
    [call] = native_calls(lower_for(typed, spec((1024,), F32), platform="cuda"))
    assert call["operands"][1:] == ["tensor<f32>", "tensor<f64>", "tensor<i64>",
                                    "tensor<ui64>", "tensor<ui32>", "tensor<i1>"]
    assert kernel_signature(call["ir"], "typed_scalars_kernel") == [
        "!tt.ptr<f32>", "!tt.ptr<f32>", "!tt.ptr<f64>", "!tt.ptr<i64>", "!tt.ptr<i64>",
        "!tt.ptr<i32>", "!tt.ptr<i1>", "!tt.ptr<f32>"]


def test_a_new_length_on_xlas_route_compiles_and_lays_out_nothing(monkeypatch):
    from jax_triton_rocm.compile import _compile

    x = spec((8192,), F32)
    [first] = native_calls(lower_for(kernels.add, x, x, platform="cuda"))
    jobs, layouts = [], []
    monkeypatch.setattr(_compile, "make_job", lambda *a, **k: jobs.append(a))
    monkeypatch.setattr(_plan, "launches", lambda *a, **k: layouts.append(a))
    x = spec((8320,), F32)  # 128 * 65: the class of 8192
    lowered = lower_for(kernels.add, x, x, platform="cuda")
    [again] = native_calls(lowered)
    assert jobs == [] and layouts == []
    assert again["ir"] == first["ir"] and (first["grid_x"], again["grid_x"]) == (32, 33)
    assert "dense<65> : tensor<i32>" in lowered.as_text()  # 8320 / 128, multiplied back


@triton.jit
def many_pointers_kernel(a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, n, out_ptr,
                         BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    total = tl.load(a0 + offsets, mask=mask)
    total += (tl.load(a1 + offsets, mask=mask) + tl.load(a2 + offsets, mask=mask)
              + tl.load(a3 + offsets, mask=mask) + tl.load(a4 + offsets, mask=mask)
              + tl.load(a5 + offsets, mask=mask) + tl.load(a6 + offsets, mask=mask)
              + tl.load(a7 + offsets, mask=mask) + tl.load(a8 + offsets, mask=mask)
              + tl.load(a9 + offsets, mask=mask) + tl.load(a10 + offsets, mask=mask)
              + tl.load(a11 + offsets, mask=mask))
    tl.store(out_ptr + offsets, total, mask=mask)


def many_pointers(*xs):
    return jtr.triton_call(*xs, xs[0].size, kernel=many_pointers_kernel, out_shape=xs[0],
                           grid=block_grid(xs[0].size), BLOCK=256)


def test_many_parameters_and_a_large_binary_take_xlas_call():
    x = spec((N,), F32)
    [call] = native_calls(lower_for(many_pointers, *[x] * 12, platform="cuda"))
    assert len(call["operands"]) == 13
    a, b = spec((512, 256), jnp.float16), spec((256, 512), jnp.float16)
    lowered = lower_for(lambda a, b: kernels.matmul(a, b), a, b, platform="cuda")
    assert [c.target for c in jtr.kernel_calls(lowered)] == [XLA]


def test_both_routes_keep_their_lowered_calls_under_one_key(fresh_caches):
    """Each route's lowered call is kept once under the routes' shared key: lowering again on
    either route adds nothing, and the two routes' calls of one kernel do not meet."""
    x = au.f32(4096)
    for _ in range(2):
        for native in (True, False):
            lower_for(lambda a, b: kernels.add(a, b, xla_native=native), x, x, platform="cuda")
    kept = _state.KERNEL_RECORDS.record(kernels.add_kernel)[_state.LOWERED_CALLS]
    routes = sorted(key[0] for key in kept)
    assert routes == ["jaxlib", "xla"], routes


def test_a_remembered_autotune_choice_takes_xlas_call(monkeypatch, tmp_path, fresh_caches):
    monkeypatch.setenv(_env.ENV_AUTOTUNE_DIR, str(tmp_path))
    monkeypatch.setattr(_arch, "device_kind", lambda platform, context: "Stand-in GPU")
    x = au.f32(4096)
    lowered = lower_for(au.tuned_add, x, x, platform="cuda")
    [tuned] = jtr.kernel_calls(lowered)
    assert tuned.target == _compat.LEGACY_CALL_NAME  # nothing remembered: jaxlib times them
    with _choices.session() as current:
        lower_for(au.tuned_add, x, x, platform="cuda")
    [undecided] = current.undecided.values()
    _choices.STORE.put(undecided.key, _choices.Choice(1, undecided.descriptions[1]))
    [call] = native_calls(lower_for(au.tuned_add, x, x, platform="cuda"))
    assert call["grid_x"] == 4096 // au.ADD_CONFIGS[1].kwargs["BLOCK"]


@pytest.mark.parametrize("arch", ["gfx942", "gfx950"])
def test_rocm_lowers_xlas_route_with_the_trampoline_when_asked(arch):
    x = spec((N,), F32)
    [call] = native_calls(lower_for(lambda a, b: jtr.triton_call(
        a, y_ptr=b, n=a.size, kernel=out_first_kernel, out_type=a, grid=block_grid(a.size),
        BLOCK=256, xla_native=True), x, x, platform="rocm", arch=arch))
    assert kernel_signature(call["ir"], "out_first_kernel") == [
        "!tt.ptr<f32>", "!tt.ptr<f32>", "!tt.ptr<i32>", "!tt.ptr<f32>"]
    assert call["num_warps"] == 4


def test_the_trampoline_is_named_like_the_kernel_and_inlined():
    x = spec((N,), F32)
    [call] = native_calls(lower_for(output_first, x, x, platform="cuda"))
    assert call["name"] == "out_first_kernel"
    text = ir_text(call["ir"])
    assert "tt.call" not in text and text.count("tt.func") == 1


def test_only_a_kernel_out_of_xlas_buffer_order_gets_a_trampoline(monkeypatch, fresh_caches):
    made = []
    original = _trampoline._trampoline
    monkeypatch.setattr(_trampoline, "_trampoline",
                        lambda kernel, *rest: made.append(kernel.name) or original(kernel, *rest))
    x = spec((N,), F32)
    native_calls(lower_for(kernels.sized_add, x, x, platform="cuda"))  # x, y, out: as it is
    assert made == []
    native_calls(lower_for(output_first, x, x, platform="cuda"))
    assert made == ["out_first_kernel"]


def test_jaxlibs_route_takes_an_output_before_an_input_without_a_fill():
    x = spec((N,), F32)
    for platform in ("cuda", "rocm"):
        lowered = lower_for(lambda a, b: jtr.triton_call(
            a, y_ptr=b, n=a.size, kernel=out_first_kernel, out_type=a, grid=block_grid(a.size),
            BLOCK=256, xla_native=False), x, x, platform=platform)
        [call] = jtr.kernel_calls(lowered)
        assert call.target == _compat.FFI_CALL_NAME
        text = lowered.as_text()
        assert not ZERO_FILL.search(text) and "output_operand_alias" not in text
        kernel_call = call.message.kernel_call
        assert kernel_call.kernel.kernel_name == "out_first_kernel"
        assert [p.WhichOneof("value") for p in kernel_call.parameters] == [
            "array", "array", "array", "i32"]


def test_a_host_descriptor_keeps_jaxlibs_call_and_says_why():
    from tests.support.surface_kernels import desc_block_kernel

    def copy(base, **kwargs):
        desc = jtr.TensorDescriptor(base, base.shape, (base.shape[1], 1), (16, base.shape[1]))
        return jtr.triton_call(desc, kernel=desc_block_kernel, grid=1, M=16, N=base.shape[1],
                               out_type=jax.ShapeDtypeStruct((16, base.shape[1]), base.dtype),
                               **kwargs)

    base = spec((40, 64), F32)  # sm_80: a descriptor of plain parameters, on every jaxlib
    [call] = jtr.kernel_calls(lower_for(copy, base, platform="cuda", arch="sm_80"))
    assert call.target == _compat.FFI_CALL_NAME
    with pytest.raises(ValueError, match="host-side TensorDescriptor.*pointers only"):
        lower_for(lambda b: copy(b, xla_native=True), base, platform="cuda", arch="sm_80")


def test_a_parameter_with_the_trampolines_prefix_is_refused_naming_the_kernel():
    kernel = kernels.kernel_from_source(
        "@triton.jit\ndef k(x_ptr, _jtr_n, out_ptr, BLOCK: tl.constexpr):\n"
        "    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < _jtr_n))\n")
    x = jax.ShapeDtypeStruct((1024,), jnp.float32)
    with pytest.raises(NotImplementedError, match=r"Kernel k has a parameter named '_jtr_n'; "
                                                  r"names starting with '_jtr_' are reserved"):
        lower_for(lambda a: jtr.triton_call(a, a.size, kernel=kernel, out_shape=a, grid=(4,),
                                            BLOCK=256, xla_native=True), x, platform="cuda")
