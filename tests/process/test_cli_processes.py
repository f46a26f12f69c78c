"""`python -m jax_triton_rocm`: --version, info, and one clear line for a bad argument."""

import json
import re

import jax
import pytest

import jax_triton_rocm as jtr
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.base import _compat
from tests.support import docs_files
from tests.support.subprocess_utils import WITHOUT_GPU_PLUGINS, advertised_entry_point, run_cli


@pytest.mark.process
def test_version_prints_the_package_version():
    result = run_cli("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"jax_triton_rocm {jtr.__version__}")


@pytest.fixture(scope="module")
def info_json(tmp_path_factory):
    result = run_cli("info", "--json", env={"JAX_TRITON_ROCM_PREWARM": "0",
                                            "JAX_TRITON_ROCM_TARGET_ARCHS": "cuda=sm_90",
                                            "TRITON_CACHE_DIR": "/tmp/jtr-info-cache"},
                     prelude=advertised_entry_point(tmp_path_factory.mktemp("entry_point")))
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.mark.process
def test_info_json_reports_the_installed_versions(info_json):
    import triton

    assert (info_json["jax_triton_rocm"], info_json["jax"], info_json["triton"]["version"]) == (
        jtr.__version__, jax.__version__, triton.__version__)
    assert set(info_json["triton"]["backends"]) >= {"nvidia", "amd"}
    if _vendors.installed_plugin("cuda") == "jax_cuda13_plugin":
        assert "jax-cuda13-plugin" in info_json["jaxlib_gpu_plugins"]


@pytest.mark.process
def test_info_json_reports_platforms_devices_and_delivery(info_json):
    assert info_json["registered_platforms"] == ["cuda", "rocm"]
    assert info_json["devices"]["cpu"]["devices"]
    for platform in ("cuda", "rocm"):
        features = _vendors.plugin_features(platform) or _vendors.assumed_features(platform)
        entry = info_json["platforms"][platform]
        assert entry["custom_call_target"] == _compat.FFI_CALL_NAME
        assert entry["module_image_read"] == features.module_image
    expected = "embedded" if info_json["platforms"]["rocm"]["module_image_read"] else "path"
    assert info_json["platforms"]["rocm"]["binary_delivery"].startswith(expected)


@pytest.mark.process
def test_info_json_reports_the_environment_and_flags_unknown_package_variables(info_json):
    environment = info_json["environment"]
    assert environment["package"]["JAX_TRITON_ROCM_PREWARM"] == "0"
    assert environment["package"]["JAX_TRITON_ROCM_HSACO_DELIVERY"] is None
    assert environment["unknown_package_variables"] == {"JAX_TRITON_ROCM_TARGET_ARCHS": "cuda=sm_90"}
    assert info_json["triton"]["cache_dir"] == "/tmp/jtr-info-cache"


@pytest.mark.process
def test_info_text_names_each_section(tmp_path):
    result = run_cli("info", env={"JAX_TRITON_ROCM_TARGET_ARCH": "rocm=gfx950"},
                     prelude=advertised_entry_point(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    for expected in ("Triton cache dir:", "Lowering rules registered for: cuda, rocm",
                     "Lowering for rocm:", "module_image read:", "binary delivery:",
                     "named architecture: gfx950 (from JAX_TRITON_ROCM_TARGET_ARCH)",
                     "JAX_TRITON_ROCM_TARGET_ARCH='rocm=gfx950'"):
        assert expected in result.stdout, result.stdout


@pytest.mark.process
@pytest.mark.parametrize("arch,message", [
    ("gfx9999", "--arch gfx9999: gfx9999 is not an architecture the installed Triton"),
    ("sm_999", "--arch sm_999: sm_999 is not an architecture the installed Triton"),
    ("foo", "--arch 'foo' is neither a CUDA architecture"),
])
def test_a_bad_arch_is_one_line_on_stderr_and_exit_status_2(arch, message):
    result = run_cli("--arch", arch)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr[-3000:]
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.process
def test_an_unknown_option_is_one_line_on_stderr():
    result = run_cli("--bogus")
    assert result.returncode == 2
    assert result.stderr.strip() == ("python -m jax_triton_rocm: error: unrecognized arguments: "
                                     "--bogus (see python -m jax_triton_rocm --help)")


@pytest.mark.process
def test_a_dotted_cuda_arch_is_printed_canonically():
    result = run_cli("--arch", "9.0", "--cross")
    assert result.returncode == 0, result.stderr[-3000:]
    launches = [line for line in result.stdout.splitlines() if "->" in line]
    assert len(launches) == 2 and all(line.split()[0] == "sm_90" for line in launches), launches


@pytest.mark.process
def test_the_demo_without_plugins_opens_as_the_usual_cpu_run_and_says_what_a_gpu_needs():
    result = run_cli(prelude=WITHOUT_GPU_PLUGINS)
    assert result.returncode == 0, result.stderr[-3000:]
    first, second = result.stdout.splitlines()[:2]
    assert first == ("Running on the CPU, as on any machine without a GPU: the kernels in "
                     "Triton's interpreter, then cross-compiled for GPUs.")
    assert second == ("  No jaxlib GPU plugin is installed (none is needed without a GPU), so JAX "
                      "runs on the CPU. On a machine with a GPU, install JAX with its plugin: pip "
                      "install -U 'jax[cuda13]' on NVIDIA, pip install -U 'jax[rocm7-local]' (see "
                      "JAX's ROCm install guide) on AMD.")


@pytest.mark.process
def test_the_readme_explains_each_custom_call_the_demo_prints_on_the_cpu():
    result = run_cli(prelude=WITHOUT_GPU_PLUGINS)
    assert result.returncode == 0, result.stderr[-3000:]
    printed = set(re.findall(r" -> (\S+): ", result.stdout))
    readme = docs_files.read("README.md").split("## Two commands", 1)[1].split("\n## ", 1)[0]
    explained = set(re.findall(r"`([^`\s]+)` is ", readme))
    assert printed and printed <= explained, (printed, explained)


@pytest.mark.process
@pytest.mark.skipif(not _vendors.installed_plugin("cuda"), reason="needs a CUDA plugin installed")
def test_the_demo_with_a_plugin_but_no_device_says_so():
    if _vendors.installed_plugin("cuda") and jax.devices()[0].platform == "gpu":
        pytest.skip("a CUDA device is present: the demo runs on it")
    result = run_cli()
    assert result.returncode == 0, result.stderr[-3000:]
    plugin = _vendors.installed_plugin("cuda")
    assert result.stdout.startswith("Running on the CPU, as JAX started no GPU device here: ")
    assert f"\n  {plugin} is installed, but JAX started no cuda device" in result.stdout
