"""The custom-call targets the package emits, and what `jax.export` needs to accept them.

`jax.export` refuses a custom call whose target has no compatibility guarantee unless
`disabled_checks` names that target, one `DisabledSafetyCheck.custom_call(name)` per target (the
check takes one name; a tuple would become the text of one name and allow nothing). Which call
takes which target: jaxlib's typed-FFI `triton_kernel_call_ffi` or legacy `triton_kernel_call`
as `base._compat.plain_call_name` and `autotuned_call_name` say, XLA's `__gpu$xla.gpu.triton`
for calls sent there (`xla_native`).
"""

from __future__ import annotations

from typing import Any

from jax_triton_rocm.base._compat import FFI_CALL_NAME, LEGACY_CALL_NAME, XLA_TRITON_CALL_NAME


def disabled_checks() -> list[Any]:
    """The `jax.export.DisabledSafetyCheck`s that let `jax.export` serialise any call the
    package emits: `export.export(f, disabled_checks=jtr.disabled_checks())`.

    Returns:
      One `DisabledSafetyCheck.custom_call(target)` per target in
      `CUSTOM_CALL_TARGET_NAME.targets`; add your own checks to the list as needed.
    """
    from jax import export

    return [export.DisabledSafetyCheck.custom_call(target)
            for target in CustomCallTargetName.targets]


class CustomCallTargetName(str):
    """The typed-FFI target's name as a `str`, with every target the package may emit."""

    targets: tuple[str, ...] = (FFI_CALL_NAME, LEGACY_CALL_NAME, XLA_TRITON_CALL_NAME)
    disabled_checks = staticmethod(disabled_checks)


CUSTOM_CALL_TARGET_NAME = CustomCallTargetName(FFI_CALL_NAME)
"""jax-triton 0.4's name for the custom-call target of plain calls: the string
"triton_kernel_call_ffi" (jaxlib's typed-FFI Triton call), so that
`jax.export.DisabledSafetyCheck.custom_call(CUSTOM_CALL_TARGET_NAME)` works unchanged. Its
`targets` are every target the package may emit (the legacy `triton_kernel_call` of autotuned
calls and XLA's `__gpu$xla.gpu.triton` too); `disabled_checks()` allows them all."""
