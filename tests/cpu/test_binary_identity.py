"""Every binary gets its own module key in jaxlib, and the same one in every process.

jaxlib keeps the modules it has loaded keyed by (kernel name, shared memory, `ptx`, compute
capability), not by the binary. Variants of one kernel share its name (other constexprs, dtypes,
num_warps, autotune configs); each must still give jaxlib a key of its own, or it runs another
variant's code. These tests lower such variants for CUDA and for ROCm (both deliveries) and
compare the keys.
"""

import json

import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from tests.support import autotune_utils, kernels
from tests.support.lowering_utils import lower_for, spec

X32 = spec((4096,), jnp.float32)
X16 = spec((4096,), jnp.float16)

# One kernel (add_kernel), four ways: the same name, four binaries.
VARIANTS = {
    "block 256": (lambda x, y: kernels.add(x, y, block=256), X32),
    "block 512": (lambda x, y: kernels.add(x, y, block=512), X32),
    "float16": (lambda x, y: kernels.add(x, y, block=256), X16),
    "8 warps": (lambda x, y: kernels.add(x, y, block=256, num_warps=8), X32),
}

CASES = [("cuda", "embedded"), ("rocm", "embedded"), ("rocm", "path")]
CASE_IDS = ["cuda", "rocm-embedded", "rocm-path"]


def loader_keys(platform: str) -> dict[str, list]:
    """jaxlib's module key for every kernel that the variants and an autotuned call lower to."""
    keys = {}
    lowerings = {name: lower_for(fn, x, x, platform=platform)
                 for name, (fn, x) in VARIANTS.items()}
    lowerings["autotuned"] = lower_for(autotune_utils.tuned_add, X32, X32, platform=platform)
    for name, lowered in lowerings.items():
        for call in jtr.kernel_calls(lowered):
            message = call.message
            if message.HasField("autotuned_kernel_call"):
                launches = [(f"{name}: {c.description}", c.kernel_call)
                            for c in message.autotuned_kernel_call.configs]
            else:
                launches = [(name, message.kernel_call)]
            for label, launch in launches:
                kernel = launch.kernel
                keys[label] = [kernel.kernel_name, kernel.shared_mem_bytes, kernel.ptx,
                               kernel.compute_capability]
    return keys


@pytest.mark.parametrize("delivery", CASES, ids=CASE_IDS, indirect=True)
def test_same_named_variants_get_pairwise_distinct_module_keys(delivery):
    platform, _ = delivery
    keys = loader_keys(platform)
    assert len(keys) == len(VARIANTS) + len(autotune_utils.ADD_CONFIGS)
    names = {key[0] for label, key in keys.items() if not label.startswith("autotuned")}
    assert names == {"add_kernel"}, "the variants must share a name for this test to mean much"
    distinct = {tuple(key) for key in keys.values()}
    assert len(distinct) == len(keys), json.dumps(keys, indent=1)
