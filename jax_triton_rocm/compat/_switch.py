"""`install_as_jax_triton`: puts a drop-in into `sys.modules` as `jax_triton`, which Python's
import reads before it searches: before anything imports `jax_triton`, one version a process.
"""

import importlib
import sys
import types

DROP_INS = {"0.3": "jax_triton_rocm.compat.v0_3", "0.4": "jax_triton_rocm.compat"}
SUBMODULES = {"0.3": ("triton_lib", "utils", "version"), "0.4": ("triton_lib", "version")}


def install_as_jax_triton(version: str) -> types.ModuleType:
    """Makes `import jax_triton` (and `jax_triton.triton_lib`, ...) give the drop-in for
    jax-triton `version`: "0.3" (`jax_triton_rocm.compat.v0_3`, jax-triton 0.3.1's API) or
    "0.4" (`jax_triton_rocm.compat`, 0.4.1's). Call it before importing `jax_triton` or any
    library that imports it; calling it again with the same version does nothing.

    Returns:
      The drop-in module, which `import jax_triton` now gives.

    Raises:
      ValueError: `version` is neither "0.3" nor "0.4".
      RuntimeError: `jax_triton` is already imported: the real jax-triton, or the other
        drop-in (one process serves one version).
    """
    if version not in DROP_INS:
        raise ValueError(
            f"install_as_jax_triton: version={version!r} names no drop-in; give \"0.3\" (for "
            f"code written for jax-triton 0.3) or \"0.4\" (for 0.4).")
    present = {name: module for name, module in sys.modules.items()
               if name == "jax_triton" or name.startswith("jax_triton.")}
    drop_in = importlib.import_module(DROP_INS[version])
    if present.get("jax_triton") is drop_in:
        return drop_in
    if present:
        top = present.get("jax_triton")
        if top is not None and top.__name__ in DROP_INS.values():
            served = next(v for v, name in DROP_INS.items() if name == top.__name__)
            raise RuntimeError(
                f"install_as_jax_triton({version!r}): jax_triton already gives the drop-in for "
                f"jax-triton {served} ({top.__name__}), and one process serves one version. "
                f"Run the code written for {version} in a process of its own.")
        first = top or next(iter(present.values()))
        raise RuntimeError(
            f"install_as_jax_triton({version!r}): jax_triton is already imported (jax-triton "
            f"{getattr(top, '__version__', 'of unknown version')}, from "
            f"{getattr(first, '__file__', None) or repr(first)}), so `import jax_triton` keeps "
            f"giving it. Call install_as_jax_triton before anything imports jax_triton: first "
            f"thing in your program, or in a conftest.py for tests.")
    for submodule in SUBMODULES[version]:
        sys.modules[f"jax_triton.{submodule}"] = getattr(drop_in, submodule)
    sys.modules["jax_triton"] = drop_in
    return drop_in
