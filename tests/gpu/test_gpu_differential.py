"""The differential check on a GPU (tests/support/differential.py): a call on each route is
instrumented and compared with the same kernel launched by Triton's launcher from PyTorch;
jaxlib's route, which launches the binary Triton built, is bitwise equal."""

import json

import jax
import jax.numpy as jnp
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.base import _env
from tests.support import differential, kernels
from tests.support import differential_utils as du

pytestmark = pytest.mark.gpu


@pytest.fixture
def plugin(tmp_path, monkeypatch, fresh_lowerings):
    torch = pytest.importorskip("torch", reason="the check launches from PyTorch")
    if not torch.cuda.is_available():
        pytest.skip(f"PyTorch {torch.__version__} sees no GPU")
    checking = differential.DifferentialPlugin(str(tmp_path / "report.jsonl"), "test")
    for owner, name, value in checking.patches():
        monkeypatch.setattr(owner, name, value)
    return checking


def _lines(checking):
    checking.flush()
    with open(checking.part) as file:
        return [json.loads(line) for line in file]


@pytest.mark.parametrize("flag,route", [("0", "jaxlib"), ("1", "xla")])
def test_a_call_on_each_route_is_compared_with_tritons_launcher(plugin, monkeypatch, flag,
                                                                 route):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, flag)
    x = jnp.arange(1000, dtype=jnp.float32)
    jax.block_until_ready(jax.jit(kernels.sized_add)(x, x))
    [line] = _lines(plugin)
    assert (line["kernel"], line["route"]) == ("sized_add_kernel", route), line
    assert line["verdict"] in (du.EQUAL, du.UNEQUAL, du.NONDETERMINISTIC), line
    if route == "jaxlib":
        assert line["verdict"] == du.EQUAL, line


def test_an_output_placed_before_its_input_on_jaxlibs_route_is_bitwise_equal(plugin,
                                                                             monkeypatch):
    monkeypatch.setenv(_env.ENV_XLA_NATIVE, "0")
    x = jax.random.normal(jax.random.key(0), (1000,), jnp.float32)
    jax.block_until_ready(jax.jit(lambda x: jtr.triton_call(
        in_ptr=x, n=x.size, kernel=kernels.double_into_first_kernel, out_type=x, grid=(4,),
        BLOCK=256))(x))
    [line] = _lines(plugin)
    assert line["verdict"] == du.EQUAL, line
