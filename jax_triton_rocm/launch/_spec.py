"""`KernelCallSpec`: what one Triton kernel call is, as one frozen value.

`checks.check_call` builds it from the arguments of `triton_call` or `triton_call_lowering`
(every value checked, defaults applied); `triton_kernel_p` carries it as its one static
parameter; `launch.plan` turns it, with the operands' types and a target, into the launches
that each route (jaxlib's call, XLA's call, the interpreter) emits.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax

from jax_triton_rocm.base import _values
from jax_triton_rocm.launch import _kernel

# A grid as users give it: an int, a tuple of 1-3 ints, or a callable of the metaparameters.
Grid = int | tuple[int, ...] | Callable[[dict[str, Any]], Any]


@dataclasses.dataclass(frozen=True)
class BatchedLaunch:
    """A call its kernel batches itself under `jax.vmap` (`batch_grid_axis`): grid axis `axis`
    has `size` programs, one per example, after `depth` nested vmaps (each array has `depth`
    leading batch dimensions)."""

    axis: int
    size: int
    depth: int


def _exact_layout(positional: tuple) -> tuple:
    """A layout's entries with their scalars as exact keys (`KernelCallSpec.exact_values`)."""
    return tuple((kind, _values.exact_key(value)) if kind in ("scalar", "tuple") else (kind, value)
                 for kind, value in positional)


@dataclasses.dataclass(frozen=True)
class KernelCallSpec:
    """One kernel call, checked. Hashable (JAX and the lowered-call memo key their caches on it);
    compared by value, the kernel and callables by identity, the positional arguments and
    metaparameters by exact value (`exact_values`: 2 and 2.0, True and 1, 0.0 and -0.0 differ).

    Attributes:
      kernel: the kernel as given (@triton.jit or @gluon.jit, maybe autotuned); compared by
        identity (`kernel_id`): hashing a Triton kernel parses its source, which is slow and,
        on CPython 3.11, not safe across threads.
      kernel_id: `id(kernel)`, which the spec keeps alive (derived: not an argument).
      unwrapped: `kernel` taken apart (derived from it: not compared).
      positional: ("array", operand index) or ("scalar", value) per positional argument
        (`triton_call`); or one entry per kernel parameter, placed: ("input", i), ("output", j),
        ("keyword", None), ("scalar", value), ("tuple", entries) (a Triton tuple, nested) or
        ("descriptor", (i, static descriptor)) (`triton_call_lowering`, and `triton_call` where
        operands come by keyword or in tuples, or outputs do not follow them);
        `launch._layout.lay_out_arguments` reads both.
      out_shapes: the outputs' shapes and dtypes.
      grid: three program counts, or a callable of the metaparameters returning 1-3 of them.
      name: the call's name for jaxlib and profilers (the kernel's name if none was given).
      num_warps, num_stages: None takes the target's default (`launch.plan` applies it).
      num_ctas: CTAs per cluster.
      cuda_arch: a CUDA architecture named by `compute_capability` ("sm_90"), or None.
      enable_fp_fusion, debug: compile flags.
      input_output_aliases: sorted (input index, output index) pairs sharing a buffer.
      zeroed_outputs: sorted output indices zeroed before the launch, or a callable of the
        metaparameters returning them.
      serialized_metadata: bytes carried in the kernel call for the caller.
      batch_grid_axis: the grid axis a kernel batches itself along under `jax.vmap`, or None.
      xla_native: take XLA's Triton call (True), jaxlib's (False), or the environment's choice.
      metaparams: constexpr values by parameter name, sorted.
      options: vendor compile options by name, sorted.
      batch: set by the `jax.vmap` rule on a call batched along `batch_grid_axis`.
      has_side_effect: the custom call is kept even when its results go unused.
      cost_estimate: ("flops", n), ("bytes_accessed", n)... for profilers, or None.
      backend_options: Triton compile options beyond the launch settings and vendor knobs
        (fields of a vendor's Triton options class), sorted; each backend takes its own.
      by_keyword: the operand parameters the call gave by keyword (`operands=` included),
        which Triton's launcher hands `early_config_prune` and `perf_model` in their
        `**kwargs`, not in `named_args` (`launch._configs`).
      exact_values: `positional` and `metaparams` with each value as `_values.exact_key` writes
        it (derived: what the spec compares in their place).
    """

    kernel: Any = dataclasses.field(compare=False)
    unwrapped: _kernel.Unwrapped = dataclasses.field(compare=False, repr=False)
    positional: tuple[tuple[str, Any], ...] = dataclasses.field(compare=False)
    out_shapes: tuple[jax.ShapeDtypeStruct, ...]
    grid: tuple[int, int, int] | Callable[[dict[str, Any]], Any]
    name: str
    num_warps: int | None
    num_stages: int | None
    num_ctas: int
    cuda_arch: str | None
    enable_fp_fusion: bool
    input_output_aliases: tuple[tuple[int, int], ...]
    zeroed_outputs: tuple[int, ...] | Callable[[dict[str, Any]], Any]
    debug: bool
    serialized_metadata: bytes
    batch_grid_axis: int | None
    xla_native: bool | None
    metaparams: tuple[tuple[str, Any], ...] = dataclasses.field(compare=False)
    options: tuple[tuple[str, Any], ...]
    batch: BatchedLaunch | None = None
    has_side_effect: bool = False
    cost_estimate: tuple[tuple[str, int], ...] | None = None
    backend_options: tuple[tuple[str, Any], ...] = ()
    by_keyword: tuple[str, ...] = ()
    kernel_id: int = dataclasses.field(init=False, repr=False)
    exact_values: tuple = dataclasses.field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kernel_id", id(self.kernel))
        object.__setattr__(self, "exact_values", (
            _exact_layout(self.positional),
            tuple((name, _values.exact_key(value)) for name, value in self.metaparams)))

    def relaid(self, positional: tuple, out_shapes: tuple, grid: Any) -> KernelCallSpec:
        """This spec with another layout, outputs and grid: what `dataclasses.replace` makes,
        in a tenth of its time (`checks._reuse` makes one per trace of a call seen before)."""
        return _values.replaced(self, positional=positional, out_shapes=out_shapes, grid=grid,
                                exact_values=(_exact_layout(positional), self.exact_values[1]))

    @property
    def kernel_name(self) -> str:
        """The name of the @jit function, for messages."""
        return _kernel.kernel_name(self.unwrapped.jit_fn)
