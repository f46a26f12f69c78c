"""Where a lowering's kernels will run, beside what they compile for (`_target`): whether the
lowering is for `jax.export`, the kind of GPU it runs on (remembered autotune choices are per
kind), and devices whose architecture differs from a call's own compile target.
"""

from __future__ import annotations

from typing import Any

from jax_triton_rocm.backends._backend import Backend, Target
from jax_triton_rocm.launch._spec import KernelCallSpec
from jax_triton_rocm.lowering import _target


def for_export(ctx: Any) -> bool:
    """Whether the lowering is for `jax.export` (its result may run on other machines, with
    other jaxlibs); JAX says so in the lowering parameters (jax 0.10.2-0.12)."""
    parameters = getattr(ctx.module_context, "lowering_parameters", None)
    return bool(getattr(parameters, "for_export", False))


def foreign_devices(backend: Backend, ctx: Any, spec: KernelCallSpec,
                    target: Target) -> Target | None:
    """The architecture of the devices a call's kernel will load on, where it differs from the
    one the call compiles for (`target`); None where they agree or are not known.

    Only a call that names its own compile target (`compute_capability`) can differ: the
    devices are then those named (`target_arch`), else, outside `jax.export` (whose result
    runs elsewhere), the computation's (`lowering_target`).

    Raises:
      ValueError: the computation's devices have different architectures.
    """
    if backend.call_target(spec) is None:
        return None
    devices = _target.named_arch(backend.platform)
    if devices is None and not for_export(ctx):
        try:
            devices = _target.lowering_target(backend.platform, ctx.module_context)
        except RuntimeError:  # no device here: a cross-compile for the call's own target
            return None
    return devices if devices is not None and devices.arch != target.arch else None


def device_kind(platform: str, module_context: Any) -> str | None:
    """The kind of GPU this lowering runs on (e.g. "NVIDIA H200"), or None.

    None when the computation's devices are of more than one kind, or when there is no device of
    `platform` to run on (cross-compiling for a named architecture).
    """
    devices = [d for d in _target._context_devices(module_context)
               if getattr(d, "platform", platform) == platform]
    if not devices:
        devices = list(_target._local_devices(platform, module_context))
    kinds = {getattr(d, "device_kind", None) for d in devices}
    return kinds.pop() if len(kinds) == 1 else None
