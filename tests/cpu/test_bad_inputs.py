"""Every bad input a user can give, in one table: each must fail with a clear error.

A clear error is of the expected type and its message names the argument (or environment
variable), shows the value and says what is allowed. Each row is lowered for a platform without
its GPU, so errors raised at the call and errors raised at lowering are both covered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import triton
import triton.language as tl

import jax_triton_rocm as jtr
from tests.support import kernels
from tests.support.lowering_utils import lower_for, spec

X = spec((1024,), jnp.float32)


@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    run: Callable[[Any], Any]  # takes pytest's monkeypatch
    error: type[BaseException] | tuple[type[BaseException], ...]
    match: str


def lowered(platform: str = "cuda", arch: str | None = None, args=(X, X, 1024), **call):
    """A row that lowers `triton_call(add_kernel, *args, **call)` for `platform`."""
    call.setdefault("grid", (4,))
    call.setdefault("out_shape", X)
    call.setdefault("kernel", kernels.add_kernel)
    if "BLOCK" not in call and call["kernel"] is kernels.add_kernel:
        call["BLOCK"] = 256

    def run(monkeypatch):
        del monkeypatch
        arrays = [a for a in args if isinstance(a, jax.ShapeDtypeStruct)]
        rest = [a for a in args if not isinstance(a, jax.ShapeDtypeStruct)]

        def fn(*xs):
            return jtr.triton_call(*xs, *rest, **call)

        return lower_for(fn, *arrays, platform=platform, arch=arch)

    return run


def with_env(name: str, value: str, action: Callable[[], Any]):
    def run(monkeypatch):
        monkeypatch.setenv(name, value)
        return action()

    return run


def _prewarm_enabled():
    from jax_triton_rocm.base import _env

    return _env.prewarm()


def _delivery_mode():
    from jax_triton_rocm.backends import _vendors
    from jax_triton_rocm.backends.hip import _hip

    return _hip.delivery_mode(_vendors.assumed_features("rocm"))


def _autotune_target():
    from jax_triton_rocm.base import _compat

    return _compat.autotuned_call_name()


def _plain_call_target():
    from jax_triton_rocm.base import _compat, _env

    return _compat.plain_call_name(_env.lowering_settings(()), exporting=False)


def _thread_count():
    from jax_triton_rocm.compile import _compile

    return _compile.thread_count()


def _cache_size(name):
    from jax_triton_rocm.base import _env

    return _env.cache_size(name)


def _env_target_arch():
    # JAX reads the variable into its config when it starts; this parses it as lowering does.
    import os

    from jax_triton_rocm.base import _env
    from jax_triton_rocm.routes import _arch

    return _arch._parse_env(os.environ[_env.ENV_TARGET_ARCH])


def _entered(**archs):
    def run(monkeypatch):
        del monkeypatch
        with jtr.target_arch(**archs):
            pass

    return run


@triton.autotune(configs=[triton.Config({"BLOCK": 256, "waves_per_eu": "lots"})], key=["n"])
@triton.jit
def autotuned_add_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def fill_kernel(value, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.zeros((BLOCK,), tl.float32) + value)


# Kernels with a parameter named like an argument of triton_call itself.
grid_kernel = kernels.scaled_by_parameter("grid")
name_kernel = kernels.scaled_by_parameter("name")


def filled(**call):
    """A row that lowers `triton_call(1.5, kernel=fill_kernel, **call)` for sm_90."""
    return lowered(args=(1.5,), kernel=fill_kernel, **call)


def copied(dtype, platform: str = "cuda", arch: str | None = None):
    """A row that lowers a copy of a `dtype` array for `platform`."""
    array = spec((1024,), dtype)
    return lowered(platform, arch, args=(array,), kernel=kernels.unmasked_copy_kernel,
                   out_shape=array, BLOCK=256)


def tuned(*configs, **autotune):
    """add_kernel under `@triton.autotune(configs)`, lowered with a grid that reads BLOCK."""
    kernel = triton.autotune(list(configs), key=["n"], **autotune)(kernels.add_kernel)
    return dict(kernel=kernel, grid=lambda meta: (1024 // meta["BLOCK"],))


def heuristic(**rules):
    """add_kernel with BLOCK=256 set by a heuristic, then `@triton.heuristics(rules)`."""
    kernel = triton.heuristics({"BLOCK": lambda args: 256})(triton.heuristics(rules)(
        kernels.add_kernel))
    return dict(kernel=kernel, grid=(4,))


B256 = triton.Config({"BLOCK": 256})
F8_E5M2 = jnp.float8_e5m2
SHARDED = jax.sharding.NamedSharding(jax.sharding.Mesh(np.array(jax.devices("cpu")[:1]), ("i",)),
                                     jax.sharding.PartitionSpec("i"))
COMPLEX = spec((1024,), jnp.complex64)
CASES = [
    # Issue 11's cases.
    Case("grid y above CUDA's 65535", lowered(grid=(1, 65536)), ValueError,
         r"grid=\(1, 65536, 1\): dimension 1 .*sm_90 launches at most 65535"),
    Case("grid z above CUDA's 65535", lowered(grid=(1, 1, 70000)), ValueError,
         r"grid=\(1, 1, 70000\).*dimension 2.*65535"),
    Case("grid x above 2**31-1", lowered(grid=(2**31,)), ValueError,
         r"grid=\(2147483648,\).*2147483647"),
    Case("grid of 2**32 on ROCm", lowered("rocm", grid=(2**32,)), ValueError,
         r"grid=\(4294967296,\).*2147483647"),
    Case("name not a str", lowered(name=5), TypeError, r"name=5 must be a str"),
    Case("enable_fp_fusion not a bool", lowered(enable_fp_fusion="no"), TypeError,
         r"enable_fp_fusion='no' must be a bool"),
    Case("debug not a bool", lowered(debug="yes"), TypeError, r"debug='yes' must be a bool"),
    Case("has_side_effect not a bool", lowered(has_side_effect="no"), TypeError,
         r"^has_side_effect='no' must be a bool \(True or False\), got str\."),
    Case("maxnreg not an int", lowered(maxnreg="many"), TypeError,
         r"maxnreg='many' must be .*int"),
    Case("maxnreg negative", lowered(maxnreg=-5), ValueError, r"maxnreg=-5 must be .*255"),
    Case("waves_per_eu not an int", lowered("rocm", waves_per_eu="lots"), TypeError,
         r"waves_per_eu='lots' must be .*int"),
    Case("waves_per_eu negative", lowered("rocm", waves_per_eu=-3), ValueError,
         r"waves_per_eu=-3 must be .*0"),
    Case("kpack out of range", lowered("rocm", kpack=7), ValueError, r"kpack=7 must be one of"),
    Case("matrix_instr_nonkdim out of range", lowered("rocm", matrix_instr_nonkdim=7),
         ValueError, r"matrix_instr_nonkdim=7 must be one of"),
    Case("waves_per_eu from an autotune config",
         lowered("rocm", kernel=autotuned_add_kernel), TypeError,
         r"waves_per_eu='lots' .*config.*must be .*int"),
    Case("JAX_TRITON_ROCM_PREWARM not a flag",
         with_env("JAX_TRITON_ROCM_PREWARM", "maybe", _prewarm_enabled), ValueError,
         r"JAX_TRITON_ROCM_PREWARM='maybe'.*1.*0"),
    Case("input_output_aliases not a mapping", lowered(input_output_aliases=3), TypeError,
         r"input_output_aliases=3 must be a dict"),
    Case("zeroed_outputs not a sequence", lowered(zeroed_outputs=0), TypeError,
         r"zeroed_outputs=0 must be"),
    Case("zeroed_outputs callable returning a bad index",
         lowered(zeroed_outputs=lambda meta: (5,)), ValueError,
         r"zeroed_outputs\(meta\).*5 is not an output index"),
    Case("zeroed_outputs callable returning junk",
         lowered(zeroed_outputs=lambda meta: ("junk",)), ValueError,
         r"zeroed_outputs\(meta\).*'junk' is not an output index"),
    Case("grid callable without a parameter", lowered(grid=lambda: (4,)), TypeError,
         r"grid=<function .*> must take one argument"),
    Case("0-d array where the kernel wants a scalar",
         lowered(args=(X, X, spec((), jnp.int32))), Exception,
         r"(?s)argument 2 \(n\) is given a 0-d array.*Python or NumPy scalar"),
    Case("unknown AMD architecture", _entered(rocm="gfx9999"), ValueError,
         r"rocm='gfx9999'.*not an architecture .*Triton.*gfx942"),
    Case("unknown CUDA architecture", _entered(cuda="sm_999"), ValueError,
         r"cuda='sm_999'.*not an architecture .*Triton.*sm_90"),
    Case("JAX_TRITON_ROCM_TARGET_ARCH with an unknown architecture",
         with_env("JAX_TRITON_ROCM_TARGET_ARCH", "rocm=gfx9999", _env_target_arch), ValueError,
         r"JAX_TRITON_ROCM_TARGET_ARCH.*gfx9999.*gfx942"),
    # Cases the suite had before (tests/cpu/test_errors.py and others).
    Case("JAX_TRITON_ROCM_TARGET_ARCH malformed",
         with_env("JAX_TRITON_ROCM_TARGET_ARCH", "gfx942", _env_target_arch), ValueError,
         r"JAX_TRITON_ROCM_TARGET_ARCH='gfx942'.*rocm=ARCH"),
    Case("JAX_TRITON_ROCM_HSACO_DELIVERY unknown",
         with_env("JAX_TRITON_ROCM_HSACO_DELIVERY", "carrier-pigeon", _delivery_mode),
         ValueError, r"JAX_TRITON_ROCM_HSACO_DELIVERY='carrier-pigeon'.*embedded, path"),
    Case("JAX_TRITON_ROCM_AUTOTUNE_TARGET unknown",
         with_env("JAX_TRITON_ROCM_AUTOTUNE_TARGET", "fast", _autotune_target), ValueError,
         r"JAX_TRITON_ROCM_AUTOTUNE_TARGET='fast'.*ffi, legacy"),
    Case("JAX_TRITON_ROCM_CALL_TARGET unknown",
         with_env("JAX_TRITON_ROCM_CALL_TARGET", "graph", _plain_call_target), ValueError,
         r"JAX_TRITON_ROCM_CALL_TARGET='graph'.*auto, ffi, legacy"),
    Case("JAX_TRITON_ROCM_COMPILE_THREADS negative",
         with_env("JAX_TRITON_ROCM_COMPILE_THREADS", "-2", _thread_count), ValueError,
         r"JAX_TRITON_ROCM_COMPILE_THREADS='-2' must be a non-negative integer"),
    Case("JAX_TRITON_ROCM_KERNEL_CACHE_SIZE not a number",
         with_env("JAX_TRITON_ROCM_KERNEL_CACHE_SIZE", "lots",
                  lambda: _cache_size("JAX_TRITON_ROCM_KERNEL_CACHE_SIZE")), ValueError,
         r"JAX_TRITON_ROCM_KERNEL_CACHE_SIZE='lots' must be a positive integer"),
    Case("JAX_TRITON_ROCM_CALL_CACHE_SIZE zero",
         with_env("JAX_TRITON_ROCM_CALL_CACHE_SIZE", "0",
                  lambda: _cache_size("JAX_TRITON_ROCM_CALL_CACHE_SIZE")), ValueError,
         r"JAX_TRITON_ROCM_CALL_CACHE_SIZE='0' must be a positive integer"),
    Case("JAX_TRITON_ROCM_COMPILE_THREADS not a number",
         with_env("JAX_TRITON_ROCM_COMPILE_THREADS", "many", _thread_count), ValueError,
         r"JAX_TRITON_ROCM_COMPILE_THREADS='many' must be a non-negative integer"),
    Case("input dtype Triton cannot take", lowered(args=(X, COMPLEX, 1024)), TypeError,
         r"argument 1 has dtype complex64.*Supported dtypes"),
    Case("output dtype Triton cannot take", lowered(out_shape=COMPLEX), TypeError,
         r"output 0 has dtype complex64"),
    Case("too many operands", lowered(args=(X, X, 1024, X, X)), TypeError,
         r"Too many operands for kernel add_kernel"),
    Case("too few operands", lowered(args=(X,)), TypeError,
         r"add_kernel: 3 non-constexpr parameter\(s\) get no argument \(y_ptr, n, out_ptr\)"),
    Case("empty out_shape", lowered(out_shape=()), ValueError, r"out_shape=\(\) is empty"),
    Case("unknown keyword", lowered(BLOK=256), TypeError,
         r"Unknown keyword argument\(s\) 'BLOK'.*BLOCK"),
    Case("unhashable metaparameter", lowered(BLOCK=[256]), TypeError,
         r"BLOCK=\[256\] must be hashable"),
    Case("grid empty", lowered(grid=()), ValueError, r"grid=\(\) is empty"),
    Case("grid zero, output unwritten", lowered(grid=(0,)), ValueError,
         r"grid \(0, 1, 1\) has a 0, so no program runs .* nothing writes output 0 "
         r"\(float32\[1024\]\)\. List the output in zeroed_outputs"),
    Case("grid negative", lowered(grid=(4, -1)), ValueError,
         r"grid=\(4, -1\): a size is negative \(-1\)"),
    Case("grid four dimensions", lowered(grid=(1, 1, 1, 1)), ValueError, r"has 4 dimensions"),
    Case("grid float", lowered(grid=(2.5,)), TypeError, r"grid=\(2.5,\).*must be a Python int"),
    Case("grid string", lowered(grid="abc"), TypeError, r"grid='abc' must be an int, a tuple"),
    Case("callable grid returning a negative size", lowered(grid=lambda meta: (-2,)), ValueError,
         r"grid\(meta\)=\(-2,\): a size is negative \(-2\)"),
    Case("scalar above 2**64", lowered(args=(X, X, 2**64)), OverflowError,
         r"argument 2 = 18446744073709551616 is out of range"),
    Case("NumPy float16 scalar", lowered(args=(X, X, np.float16(1.0))), TypeError,
         r"argument 2 is a NumPy float16 scalar"),
    Case("kernel not a Triton function", lowered(kernel=lambda *a: None), TypeError,
         r"kernel must be a Triton kernel"),
    Case("num_warps not a power of two", lowered(num_warps=3), ValueError,
         r"num_warps=3 must be a power of two"),
    Case("num_stages zero", lowered(num_stages=0), ValueError,
         r"num_stages=0 must be a positive int"),
    Case("aliased buffers of different shapes",
         lowered(out_shape=spec((8,), jnp.float32), input_output_aliases={0: 0}), ValueError,
         r"input 0 .* and output 0 .* same shape and dtype"),
    Case("alias index out of range", lowered(input_output_aliases={5: 0}), ValueError,
         r"input index 5 is not one of the 2 array arguments"),
    Case("zeroed output index out of range", lowered(zeroed_outputs=(3,)), ValueError,
         r"zeroed_outputs=\(3,\): 3 is not an output index"),
    Case("jax-triton's custom_call_target_name",
         lowered(custom_call_target_name="triton_kernel_call"), TypeError,
         r"custom_call_target_name='triton_kernel_call'.*picks the custom-call target"),
    Case("compute_capability malformed", lowered(compute_capability="hopper"), ValueError,
         r"compute_capability='hopper' is not a CUDA architecture"),
    Case("serialized_metadata not bytes", lowered(serialized_metadata="x"), TypeError,
         r"serialized_metadata must be bytes"),
    Case("batch_grid_axis out of range", lowered(batch_grid_axis=3), ValueError,
         r"batch_grid_axis=3"),
    Case("num_ctas above 1 before sm_90", lowered(arch="sm_80", num_ctas=2), ValueError,
         r"num_ctas=2 needs thread-block clusters"),
    # Issue 21's cases: launches the target refuses.
    Case("ROCm grid x times the block's threads above 2**32-1", lowered("rocm", grid=(2**24,)),
         ValueError, r"grid=\(16777216, 1, 1\): dimension 0 has 16777216 programs of 256 threads"
                     r" .*4294967296 threads in all, and gfx942 launches at most 4294967295"),
    Case("ROCm grid x of 2**26 with 1024-thread blocks",
         lowered("rocm", grid=(2**26,), num_warps=16), ValueError,
         r"grid=\(67108864, 1, 1\): dimension 0 has 67108864 programs of 1024 threads"),
    Case("num_ctas=3 on sm_90", lowered(num_ctas=3), ValueError,
         r"num_ctas=3 on sm_90 .*must be a power of two up to 8"),
    Case("num_ctas=16 on sm_90 (a non-portable cluster)", lowered(num_ctas=16), ValueError,
         r"num_ctas=16 on sm_90 .*must be a power of two up to 8"),
    Case("num_ctas=2 on gfx942", lowered("rocm", num_ctas=2), ValueError,
         r"num_ctas=2: jaxlib launches ROCm kernels without thread-block clusters.*gfx942"),
    Case("fp8 arithmetic on sm_90", lowered(args=(spec((1024,), F8_E5M2),) * 2 + (1024,),
                                            out_shape=spec((1024,), F8_E5M2)),
         RuntimeError, r"passes rejected kernel add_kernel for sm_90 .*out_ptr \(fp8e5\), x_ptr "
                       r"\(fp8e5\), y_ptr \(fp8e5\) are a likely cause: Triton does no arithmetic"),
    Case("an fp8 dtype sm_90 does not take", copied(jnp.float8_e4m3fnuz), TypeError,
         r"parameter x_ptr is float8_e4m3fnuz \(Triton's fp8e4b8\), which Triton does not "
         r"compile for sm_90; the fp8 dtypes it takes there are .*float8_e4m3fn \(fp8e4nv\)"),
    Case("float8_e4m3fn before sm_89", copied(jnp.float8_e4m3fn, arch="sm_80"), TypeError,
         r"parameter x_ptr is float8_e4m3fn \(Triton's fp8e4nv\), which Triton does not "
         r"compile for sm_80"),
    # Issue 21's cases: arguments of triton_call.
    Case("out_shape=None", lowered(out_shape=None), ValueError, r"out_shape=None is empty"),
    Case("out_shape with a sharding",
         lowered(out_shape=jax.ShapeDtypeStruct((1024,), jnp.float32, sharding=SHARDED)),
         ValueError, r"out_shape leaf 0 asks for sharding=.*cannot honour.*"
                     r"jax.lax.with_sharding_constraint"),
    Case("compute_capability=90.0", lowered(compute_capability=90.0), ValueError,
         r"compute_capability=90.0 is not a CUDA architecture"),
    Case("compute_capability Triton cannot compile for", lowered(compute_capability="sm_999"),
         ValueError, r"compute_capability='sm_999' \(sm_999\) is not an architecture the "
                     r"installed Triton"),
    Case("misspelt input_output_alias=", lowered(input_output_alias={0: 0}), TypeError,
         r"'input_output_alias' .*\(did you mean input_output_aliases\?\)"),
    Case("misspelt num_warp=", lowered(num_warp=8), TypeError,
         r"'num_warp' .*\(did you mean num_warps\?\)"),
    Case("a parameter named like triton_call's grid",
         lowered(args=(X,), kernel=grid_kernel), TypeError,
         r"grid_kernel's parameter 'grid' has the name of an argument of triton_call itself.*"
         r"constexprs=\{'grid': ...\}"),
    Case("name= meant for a parameter called name", lowered(args=(X,), kernel=name_kernel, name=2),
         TypeError, r"name_kernel's parameter 'name' has the name of an argument of triton_call"),
    Case("a None scalar", lowered(args=(X, X, None)), Exception,
         r"kernel add_kernel was compiled for sm_90 with the constexprs n=None, BLOCK=256"),
    Case("BLOCK=512.0 (a float)", filled(BLOCK=512.0), Exception,
         r"(?s)arange.*the constexprs BLOCK=512.0\. Where the kernel cannot use one"),
    Case("BLOCK=300 (not a power of two)", lowered(BLOCK=300), Exception,
         r"(?s)power of 2.*the constexprs BLOCK=300\b"),
    Case("BLOCK='512' (a str)", filled(BLOCK="512"), Exception, r"the constexprs BLOCK='512'"),
    Case("BLOCK=None", lowered(BLOCK=None), Exception, r"the constexprs BLOCK=None"),
    Case("BLOCK=2**21", lowered(BLOCK=2**21), Exception,
         r"(?s)exceeds triton maximum tensor numel.*the constexprs BLOCK=2097152"),
    Case("grid callable reading a missing key",
         lowered(grid=lambda meta: (1024 // meta["BLOCKSIZE"],)), ValueError,
         r"grid\(meta\) \(.*<lambda> at test_bad_inputs.py:\d+\) read 'BLOCKSIZE', which is "
         r"not among the values it is given: BLOCK=256, n=1024, num_ctas=1, "
         r"out_ptr=float32\[1024\], x_ptr=float32\[1024\]"),
    Case("grid callable dividing by zero", lowered(grid=lambda meta: (1024 // 0,)), ValueError,
         r"grid\(meta\) \(.*\) raised ZeroDivisionError: integer division or modulo by zero"),
    Case("zeroed_outputs callable raising", lowered(zeroed_outputs=lambda meta: meta["Z"]),
         ValueError, r"zeroed_outputs\(meta\) \(.*\) read 'Z'.*Fix the zeroed_outputs function"),
    Case("target_arch for no GPU platform", _entered(metal="m1"), TypeError,
         r"target_arch\(\) got metal='m1': 'metal' is no GPU platform"),
    Case("target_arch with a misspelt platform", _entered(cdua="sm_90"), TypeError,
         r"'cdua' is no GPU platform .*\(did you mean cuda\?\)"),
    Case("JAX_TRITON_ROCM_TARGET_ARCH naming a platform twice",
         with_env("JAX_TRITON_ROCM_TARGET_ARCH", "cuda=sm_90,cuda=sm_80", _env_target_arch),
         ValueError, r"'cuda=sm_90,cuda=sm_80' names platform cuda more than once"),
    # Issue 21's cases: autotune configs and heuristics.
    Case("Config(num_warps=0)", lowered(**tuned(triton.Config({"BLOCK": 128}, num_warps=0))),
         ValueError, r"num_warps=0 in autotune config \(BLOCK: 128.*\) of kernel add_kernel must "
                     r"be a positive int"),
    Case("Config(num_warps=0) beside a good config on gfx942",
         lowered("rocm", **tuned(triton.Config({"BLOCK": 128}, num_warps=0), B256)), ValueError,
         r"num_warps=0 in autotune config"),
    Case("Config(num_warps=3)", lowered(**tuned(triton.Config({"BLOCK": 128}, num_warps=3))),
         ValueError, r"num_warps=3 in autotune config .* must be a power of two"),
    Case("Config(num_stages=0)", lowered(**tuned(triton.Config({"BLOCK": 128}, num_stages=0))),
         ValueError, r"num_stages=0 in autotune config"),
    Case("Config(num_ctas=0)", lowered(**tuned(triton.Config({"BLOCK": 128}, num_ctas=0))),
         ValueError, r"num_ctas=0 in autotune config"),
    Case("heuristic setting num_warps=0", lowered(**heuristic(num_warps=lambda args: 0)),
         ValueError, r"num_warps=0 set by @triton.heuristics on kernel add_kernel"),
    Case("heuristic reading a missing key",
         lowered(**heuristic(num_warps=lambda args: args["WARPS"])), ValueError,
         r"heuristic for 'num_warps' \(@triton.heuristics\) of kernel add_kernel \(.*\) read "
         r"'WARPS', which is not among the values it is given: BLOCK=256, n=1024"),
    Case("heuristic giving a value the grid cannot use",
         lowered(kernel=triton.heuristics({"BLOCK": lambda args: "big"})(kernels.add_kernel),
                 grid=lambda meta: (1024 // meta["BLOCK"],)), ValueError,
         r"grid\(meta\) \(.*\) raised TypeError: .*BLOCK='big'"),
    Case("early_config_prune returning None",
         lowered(**tuned(B256, prune_configs_by={"early_config_prune": lambda c, n, **k: None})),
         ValueError, r"early_config_prune of kernel add_kernel \(.*\) returned None, not a list "
                     r"of configs. It must return the triton.Config objects it keeps"),
    Case("early_config_prune returning dicts",
         lowered(**tuned(B256, prune_configs_by={
             "early_config_prune": lambda c, n, **k: [{"BLOCK": 128}]})), ValueError,
         r"returned \{'BLOCK': 128\}, a dict, among its configs"),
    Case("early_config_prune raising",
         lowered(**tuned(B256, prune_configs_by={"early_config_prune": lambda c, n, **k: 1 // 0})),
         ValueError, r"early_config_prune of kernel add_kernel \(.*\) raised ZeroDivisionError"),
    # Issue 29's unclear errors.
    Case("JAX_TRITON_ROCM_KERNEL_CACHE_SIZE='²' (a digit, but no ASCII one)",
         with_env("JAX_TRITON_ROCM_KERNEL_CACHE_SIZE", "\u00b2",
                  lambda: _cache_size("JAX_TRITON_ROCM_KERNEL_CACHE_SIZE")), ValueError,
         r"JAX_TRITON_ROCM_KERNEL_CACHE_SIZE='\u00b2' must be a positive integer"),
    Case("an autotune config that is a dict", lowered(**tuned({"BLOCK": 256})), TypeError,
         r"configs\[0\] is a dict \(\{'BLOCK': 256\}\), not a triton.Config\. Give each config "
         r"as one, e.g. triton.Config\(\{'BLOCK': 256\}, num_warps=4\)"),
    Case("an out_shape with a negative dimension",
         lowered(out_shape=spec((-1,), jnp.float32)), ValueError,
         r"out_shape leaf 0 has shape \(-1,\), with a negative dimension"),
    Case("a lambda as a constexpr", lowered(BLOCK=lambda meta: 256), TypeError,
         r"BLOCK=<function .*> is a Python function, and a kernel's constexpr is a value"),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_bad_input_gives_a_clear_error(case, monkeypatch):
    with pytest.raises(case.error, match=case.match):
        case.run(monkeypatch)


def test_table_has_one_row_per_case():
    assert len({case.name for case in CASES}) == len(CASES)
