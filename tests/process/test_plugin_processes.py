"""Activation: JAX's plugin discovery, initialize() and register().

This file holds the tests that start Python processes of their own (mark `process`); the others are
in tests/cpu/test_plugin.py.
"""


import pytest

from tests.support.subprocess_utils import advertised_entry_point, last_line, run_python


@pytest.mark.process
def test_jax_discovery_registers_both_gpu_rules_without_importing_triton(tmp_path):
    result = run_python(advertised_entry_point(tmp_path), """
        import sys, jax
        jax.devices()  # starts the backends, which runs plugin discovery
        heavy = [m for m in ("triton", "google.protobuf", "jax.extend") if m in sys.modules]
        import jax_triton_rocm as jtr
        print(jtr.registered_platforms(), heavy)
    """)
    assert last_line(result) == "('cuda', 'rocm') []", result.stderr[-2000:]


@pytest.mark.process
def test_initialize_without_a_gpu_plugin_registers_both_rules_and_says_so_at_debug():
    result = run_python("""
        import logging, io
        stream = io.StringIO()
        handler = logging.StreamHandler(stream)
        logger = logging.getLogger("jax_triton_rocm")
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        import jax_triton_rocm
        from jax_triton_rocm import _plugin
        from jax_triton_rocm.backends import _vendors
        _vendors.PLUGIN_PACKAGES.update(cuda=("no_such_plugin_a",), rocm=("no_such_plugin_b",))
        _plugin.initialize()
        records = stream.getvalue()
        print(jax_triton_rocm.registered_platforms(),
              "jaxlib GPU plugins installed: none" in records)
    """)
    assert last_line(result) == "('cuda', 'rocm') True", result.stderr[-2000:]
