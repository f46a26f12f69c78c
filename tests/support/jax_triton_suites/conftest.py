"""jax-triton's own test suites, vendored unchanged (Apache-2.0, their license headers kept):
v0.3.1's `tests/triton_call_test.py` in v0_3_1/, v0.4.0's
`tests/{triton_call,gluon,cluster}_test.py` in v0_4_0/. Each folder's conftest.py resolves
`import jax_triton` to the package's drop-in for that version (`install_as_jax_triton`) and
marks the tests whose failure docs/limitations.md explains. One process serves one jax-triton
version, so a folder is collected only when named on the command line:
`python tools/jax_triton_suites.py` runs each in its own process, and `python -m pytest tests`
leaves them out.
"""

import pathlib

import pytest

HERE = pathlib.Path(__file__).parent


def pytest_ignore_collect(collection_path, config):
    if collection_path.parent != HERE or not collection_path.is_dir():
        return None
    named = [pathlib.Path(arg.split("::")[0]).resolve() for arg in config.args]
    return not any(path == collection_path or collection_path in path.parents for path in named)


def mark_expected(items, differs: dict[str, str], needs_gpu: dict[str, str]) -> None:
    """Marks each test whose name starts with a key of `differs` as failing for that reason
    (strict: a test that starts passing fails the run, so the list stays true), and each of
    `needs_gpu` as skipped for its reason where JAX has no GPU."""
    import jax

    on_gpu = jax.devices()[0].platform == "gpu"
    for item in items:
        name = item.name
        for prefix, reason in differs.items():
            if name.startswith(prefix):
                item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
        for prefix, reason in needs_gpu.items():
            if name.startswith(prefix) and not on_gpu:
                item.add_marker(pytest.mark.skip(reason=f"needs a GPU: {reason}"))
