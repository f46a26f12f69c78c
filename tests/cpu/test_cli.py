"""`python -m jax_triton_rocm`: --version, info, and one clear line for a bad argument.

This file holds the tests that need no GPU and start no Python process; the others are in
tests/process/test_cli_processes.py.
"""

import os
import re

from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _env
from tests.support import docs_files
from tests.support.subprocess_utils import ROOT


def test_the_readme_names_the_architectures_the_demo_compiles_for_by_default():
    import jax_triton_rocm.__main__ as cli

    readme = docs_files.read("README.md").split("## Two commands", 1)[1].split("\n## ", 1)[0]
    named = re.search(r"then compiles them for (.*?) and prints", " ".join(readme.split()))
    assert named and set(re.findall(r"\b(?:sm_\d+|gfx\w+)", named.group(1))) == set(
        cli.DEFAULT_ARCHS), named


def test_info_lists_exactly_the_variables_the_package_reads():
    named = set()
    package = os.path.join(ROOT, "jax_triton_rocm")
    for folder, _, files in os.walk(package):  # the readers in base/_env.py, names everywhere
        for name in files:
            if name.endswith(".py"):
                with open(os.path.join(folder, name)) as source:
                    named |= set(re.findall(r"JAX_TRITON_ROCM_[A-Z_]*[A-Z]", source.read()))
    assert named == set(_env.PACKAGE_ENV_VARS)


def test_the_readme_table_documents_every_package_variable():
    _, match = docs_files.claim_location("environment-variables")
    table = set(re.findall(r"^\| `(JAX_TRITON_ROCM_\w+)` \|", match.group(1), re.M))
    assert table == set(_env.PACKAGE_ENV_VARS)


def test_the_demo_on_a_jaxlib_without_module_image_says_what_each_call_carries(monkeypatch,
                                                                                fresh_caches,
                                                                                capsys):
    """On jax 0.10.2 (no `module_image`) the calls carry PTX or an HSACO file's path: the demo says
    so in words, not as `binary at <6328 chars>` or a temporary file's path."""
    import jax_triton_rocm.__main__ as cli

    def old_plugin(platform):
        return _vendors.PluginFeatures(platform, None, False, False, "jax 0.10.2 stands for it")

    monkeypatch.setattr(_vendors, "plugin_features", old_plugin)
    monkeypatch.setattr(_vendors, "assumed_features", old_plugin)
    assert cli.show_cross_compiled([("cuda", "sm_90"), ("rocm", "gfx942")]) == 0
    launches = [line for line in capsys.readouterr().out.splitlines() if " -> " in line]
    assert len(launches) == 4, launches
    for line in launches:
        carried = line.split("; ")[-1]
        assert "binary at" not in line and "chars>" not in line and "/tmp" not in line, line
        if line.split()[0] == "sm_90":
            assert re.fullmatch(r"PTX of \d+ bytes, which jaxlib's ptxas builds at load "
                                r"\(\d+\.\d+ s\)", carried), line
        else:
            assert carried.startswith("HSACO in a file of this process, read (and deleted) by "
                                      "jaxlib's ROCm plugin"), line
