"""Every binary gets its own module key in jaxlib, and the same one in every process.

jaxlib keeps the modules it has loaded keyed by (kernel name, shared memory, `ptx`, compute
capability), not by the binary. Variants of one kernel share its name (other constexprs, dtypes,
num_warps, autotune configs); each must still give jaxlib a key of its own, or it runs another
variant's code. These tests lower such variants for CUDA and for ROCm (both deliveries) and
compare the keys.
"""

import json

import pytest

from tests.support import autotune_utils
from tests.support.binary_utils import CASE_IDS, CASES, VARIANTS, loader_keys

@pytest.mark.parametrize("delivery", CASES, ids=CASE_IDS, indirect=True)
def test_same_named_variants_get_pairwise_distinct_module_keys(delivery):
    platform, _ = delivery
    keys = loader_keys(platform)
    assert len(keys) == len(VARIANTS) + len(autotune_utils.ADD_CONFIGS)
    names = {key[0] for label, key in keys.items() if not label.startswith("autotuned")}
    assert names == {"add_kernel"}, "the variants must share a name for this test to mean much"
    distinct = {tuple(key) for key in keys.values()}
    assert len(distinct) == len(keys), json.dumps(keys, indent=1)
