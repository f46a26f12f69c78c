"""Every binary gets its own module key in jaxlib, and the same one in every process.

jaxlib keeps the modules it has loaded keyed by (kernel name, shared memory, `ptx`, compute
capability), not by the binary. Variants of one kernel share its name (other constexprs, dtypes,
num_warps, autotune configs); each must still give jaxlib a key of its own, or it runs another
variant's code. These tests lower such variants for CUDA and for ROCm (both deliveries) and
compare the keys.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_binary_identity.py.
"""

import json

import pytest

from jax_triton_rocm.base import _env
from tests.support.binary_utils import CASE_IDS, CASES, loader_keys
from tests.support.subprocess_utils import last_line, run_python


@pytest.mark.process
@pytest.mark.parametrize("delivery", CASES[:2], ids=CASE_IDS[:2], indirect=True)
def test_module_keys_are_the_same_in_another_process(delivery):
    platform, mode = delivery
    here = loader_keys(platform)
    result = run_python(f"""
        import json
        from tests.support.binary_utils import loader_keys
        print(json.dumps(loader_keys({platform!r})))
    """, env={_env.ENV_HSACO_DELIVERY: mode})
    assert json.loads(last_line(result)) == here, result.stderr[-3000:]
