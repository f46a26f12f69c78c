"""What the ROCm plugin can load, found on a machine where it cannot be imported.

jaxlib's ROCm plugin imports only with a ROCm runtime (its `_triton` extension links
libamdhip64), so the package reads the extension file itself, as the plugin's distribution lists
it, for the names its proto and launcher carry; with no such file, it goes by the plugin's
release. Each form is made here as a stand-in distribution on the path of a fresh process.
"""

import json

import pytest

from tests.support.subprocess_utils import last_line, run_python

pytestmark = pytest.mark.process  # each test starts Python processes

PROBE = """
    import json
    from jax_triton_rocm.backends import _vendors
    features = _vendors.plugin_features("rocm")
    print(json.dumps([features.plugin, features.module_image, features.global_scratch,
                      features.detected_from]))
"""


def _stand_in_plugin(root, version, triton_binary):
    """A distribution `jax-rocm7-plugin` at `root`, with `_triton.so` holding `triton_binary`."""
    package = root / "jax_rocm7_plugin"
    package.mkdir()
    (package / "__init__.py").write_text("")
    files = ["jax_rocm7_plugin/__init__.py"]
    if triton_binary is not None:
        (package / "_triton.so").write_bytes(b"\x7fELF, but not loadable: " + triton_binary)
        files.append("jax_rocm7_plugin/_triton.so")
    info = root / f"jax_rocm7_plugin-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: jax-rocm7-plugin\nVersion: {version}\n")
    (info / "RECORD").write_text("".join(f"{f},,\n" for f in files))


def _detect(root):
    result = run_python(PROBE, env={"PYTHONPATH": str(root)})
    return json.loads(last_line(result))


@pytest.mark.parametrize("binary,module_image,global_scratch", [
    (b"jax_triton.ModuleImageProto ... global_scratch_size", True, True),
    (b"global_scratch_size", False, True),
    (b"nothing of either", False, False),
])
def test_an_unimportable_plugin_is_read_for_what_its_binary_knows(tmp_path, binary, module_image,
                                                                  global_scratch):
    # The release (0.11.2) would say yes to both: only the binary's contents can give these.
    _stand_in_plugin(tmp_path, "0.11.2", binary)
    plugin, image, scratch, source = _detect(tmp_path)
    assert (plugin, image, scratch) == ("jax_rocm7_plugin", module_image, global_scratch)
    assert source.endswith("_triton.so (read; it does not import here)")


@pytest.mark.parametrize("version,features", [("0.10.2", False), ("0.11.0", False),
                                              ("0.11.1", True), ("0.12.0.1", True)])
def test_a_plugin_without_its_binary_goes_by_its_release(tmp_path, version, features):
    """module_image and global scratch both arrived after jax-v0.11.0."""
    _stand_in_plugin(tmp_path, version, None)
    plugin, image, scratch, source = _detect(tmp_path)
    assert (plugin, image, scratch) == ("jax_rocm7_plugin", features, features)
    assert source == f"jax-rocm7-plugin release {version}"
