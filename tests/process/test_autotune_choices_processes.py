"""Remembered autotune choices (`_choices`) and the tuner that makes them (`autotune`), on the CPU.

A remembered choice applies only to lowerings for a GPU that is there; these tests stand in a
device kind for the CUDA lowering (`_arch.device_kind`) and lower for sm_90 under
`target_arch`. The tuner's timing runs need a GPU (test_gpu_autotune_real_data.py); here its loop
is driven with stand-ins for compiling and timing.

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_autotune_choices.py.
"""

import json

import pytest

from jax_triton_rocm.base import _compat, _env
from jax_triton_rocm.routes import _choices
from tests.support import autotune_utils as au
from tests.support.subprocess_utils import run_python

N = au.TUNED_N
DEVICE = au.STAND_IN_DEVICE

_SECOND_PROCESS = f"""
import json, sys
import jax_triton_rocm as jtr
from jax_triton_rocm.routes import _arch, _choices
from tests.support import autotune_utils as au
from tests.support.lowering_utils import capture_one
_arch.device_kind = lambda platform, context: {DEVICE!r}
with _choices.session() as current:
    lowered = capture_one(lambda x, y: au.tuned_add(x, y), au.f32({N}), au.f32({N}),
                          platform="cuda")
print(json.dumps({{"calls": len(lowered.calls), "grid": lowered.calls[0].grid[0],
                  "undecided": list(current.undecided),
                  "target": lowered.custom_call_name}}))
"""


@pytest.mark.process
def test_a_second_process_lowers_the_remembered_config_alone(choices_dir):
    undecided = au.undecided_choice()
    _choices.STORE.put(undecided.key, _choices.Choice(1, undecided.descriptions[1]))
    result = run_python(_SECOND_PROCESS, env={_env.ENV_AUTOTUNE_DIR: str(choices_dir)})
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"calls": 1, "grid": N // au.ADD_CONFIGS[1].kwargs["BLOCK"], "undecided": [],
                    "target": _compat.FFI_CALL_NAME}
