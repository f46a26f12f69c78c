"""The sharding rule of a `partitioned` function (einsum-like: `"b n, b n -> b n"`): parsed,
checked against arrays, and turned into mesh axes per dimension. A name found in an operand and an
output is free (it may be split); one found only in operands is contracted (gathered, or kept
split where the rule gives it a reduction). Plain data: `_partition` hands it to JAX."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

REDUCTIONS = ("sum", "max", "min")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclasses.dataclass(frozen=True)
class Rule:
    """A parsed rule: its text (for messages), one tuple of dimension names per operand and per
    output, and (name, "sum" | "max" | "min") for each contracted name kept split."""

    text: str
    operands: tuple[tuple[str, ...], ...]
    results: tuple[tuple[str, ...], ...]
    reductions: tuple[tuple[str, str], ...] = ()

    @property
    def contracted(self) -> frozenset[str]:
        outputs = {name for names in self.results for name in names}
        return frozenset(n for names in self.operands for n in names if n not in outputs)

    def may_split(self, name: str) -> bool:
        """Whether a dimension named `name` may stay split across devices for the call."""
        return name not in self.contracted or name in dict(self.reductions)

    def batched(self, mapped: Sequence[bool]) -> Rule:
        """The rule of the function under `jax.vmap`: a new leading name on every mapped operand
        and on every output."""
        taken = {n for names in self.operands + self.results for n in names}
        new = next(f"vmap{i}" for i in range(len(taken) + 1) if f"vmap{i}" not in taken)
        operands = tuple((new, *names) if m else names for names, m in zip(self.operands, mapped))
        results = tuple((new, *names) for names in self.results)
        text = " -> ".join(", ".join(" ".join(names) for names in specs)
                           for specs in (operands, results))
        return dataclasses.replace(self, text=text, operands=operands, results=results)


def _refuse(text: str, problem: str) -> ValueError:
    return ValueError(
        f"partitioned: rule {text!r}: {problem}. A rule names each dimension, names separated "
        f"by spaces, operands by commas, one '->' before the outputs: \"b n, b n -> b n\".")


def _specs(text: str, side: str, what: str) -> tuple[tuple[str, ...], ...]:
    if not side.strip():
        return ()
    specs = []
    for position, spec in enumerate(side.split(",")):
        names = spec.split()
        for name in names:
            if _NAME.match(name):
                continue
            if "..." in name:
                problem = "'...' is not supported: name every dimension"
            elif "(" in name or ")" in name:
                problem = "compound dimensions '(...)' are not supported: one name per dimension"
            else:
                problem = (f"{what} {position} has {name!r}, which is not a name (letters, "
                           f"digits, _)")
            raise _refuse(text, problem)
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise _refuse(text, f"{what} {position} names two of its dimensions "
                                f"{', '.join(repeated)}; each dimension needs its own name")
        specs.append(tuple(names))
    return tuple(specs)


def parse_rule(text: Any, reductions: Mapping[str, str] | None = None) -> Rule:
    """Parses `text`; `reductions` maps contracted names to "sum", "max" or "min".

    Raises:
      TypeError: `text` is not a string, or `reductions` not a mapping.
      ValueError: a malformed rule, or a reduction of a name that is not contracted or of an
        unknown kind; the message quotes the rule.
    """
    if not isinstance(text, str):
        raise TypeError(f"partitioned: the rule must be a string such as \"b n, b n -> b n\", "
                        f"not {type(text).__name__} {text!r}.")
    if reductions is not None and not isinstance(reductions, Mapping):
        raise TypeError(f"partitioned: reductions must map contracted names to one of "
                        f"{', '.join(REDUCTIONS)}, e.g. {{'k': 'sum'}}, not {reductions!r}.")
    if text.count("->") != 1:
        raise _refuse(text, f"it has {text.count('->')} '->' instead of one")
    left, right = text.split("->")
    operands, results = _specs(text, left, "operand"), _specs(text, right, "output")
    if not results:
        raise _refuse(text, "it names no output; a partitioned function returns at least one")
    inputs = {n for names in operands for n in names}
    unknown = [n for names in results for n in names if n not in inputs]
    if unknown:
        raise _refuse(text, f"output dimension(s) {', '.join(dict.fromkeys(unknown))} appear in "
                            f"no operand, so no operand says how to split them")
    rule = Rule(text=text, operands=operands, results=results)
    pairs = []
    for name, kind in (reductions or {}).items():
        if kind not in REDUCTIONS:
            raise _refuse(text, f"reductions[{name!r}] = {kind!r} is none of "
                                f"{', '.join(REDUCTIONS)}")
        if name not in rule.contracted:
            where = "is an output dimension (free)" if name in inputs else "is in no operand"
            contracted = ", ".join(sorted(rule.contracted)) or "none here"
            raise _refuse(text, f"reductions names {name!r}, which {where}; only dimensions "
                                f"found in operands alone ({contracted}) are reduced")
        pairs.append((name, kind))
    return dataclasses.replace(rule, reductions=tuple(pairs))


def check_operands(rule: Rule, shapes: Sequence[tuple[int, ...]]) -> dict[str, int]:
    """The size of every name, from the operands' shapes; TypeError where their number, and
    ValueError where a rank or a size, disagrees with `rule`."""
    if len(shapes) != len(rule.operands):
        raise TypeError(
            f"partitioned: rule {rule.text!r} has {len(rule.operands)} operand(s) but the "
            f"function was called with {len(shapes)} array(s); give one array per operand of "
            f"the rule (static values by keyword).")
    return _sizes(rule.text, rule.operands, shapes, "operand", {})


def check_results(rule: Rule, shapes: Sequence[tuple[int, ...]], sizes: dict[str, int]) -> None:
    """Raises ValueError where the function's outputs (their leaves, in order) disagree with
    `rule`: their number, a rank, or a size unlike the operands'."""
    if len(shapes) != len(rule.results):
        raise ValueError(
            f"partitioned: rule {rule.text!r} names {len(rule.results)} output(s) but the "
            f"function returned {len(shapes)} array(s) (shapes {list(shapes)}); give one output "
            f"spec per array it returns, in the order jax.tree.leaves lists them.")
    _sizes(rule.text, rule.results, shapes, "output", dict(sizes))


def _sizes(text: str, specs, shapes, what: str, sizes: dict[str, int]) -> dict[str, int]:
    seen = {name: "the operands" for name in sizes}
    for position, (names, shape) in enumerate(zip(specs, shapes)):
        if len(names) != len(shape):
            raise ValueError(
                f"partitioned: rule {text!r}: {what} {position} has shape {tuple(shape)} (rank "
                f"{len(shape)}) but its spec {' '.join(names)!r} names {len(names)} "
                f"dimension(s); write one name per dimension.")
        for axis, (name, size) in enumerate(zip(names, shape)):
            if name in sizes and sizes[name] != size:
                raise ValueError(
                    f"partitioned: rule {text!r}: dimension {name!r} has size {sizes[name]} in "
                    f"{seen[name]} but {size} in {what} {position} (axis {axis}, shape "
                    f"{tuple(shape)}); one name stands for one size.")
            sizes.setdefault(name, size)
            seen.setdefault(name, f"{what} {position}")
    return sizes


def assign_axes(rule: Rule, sources: Sequence[tuple[Sequence[tuple[str, ...]], Sequence[Any]]],
                sizes: Mapping[str, int], mesh_shape: Mapping[str, int]) -> dict[str, tuple]:
    """Which mesh axes split each name: taken from the first spec of `sources` (pairs: the
    rule's specs, one PartitionSpec or None per array) that splits it, where the rule lets it
    be split, its size divides evenly and no other name took those axes."""
    axes_of: dict[str, tuple] = {}
    used: set[str] = set()
    for specs, partitions in sources:
        for names, partition in zip(specs, partitions):
            entries = tuple(partition or ()) + (None,) * len(names)
            for name, entry in zip(names, entries):
                # The entry's mesh axes: None and PartitionSpec.UNCONSTRAINED have none.
                entry = (entry,) if isinstance(entry, str) else entry
                entry = entry if isinstance(entry, (tuple, list)) else ()
                axes = tuple(a for a in entry if isinstance(a, str))
                if (name in axes_of or not axes or not rule.may_split(name)
                        or used.intersection(axes)
                        or sizes[name] % math.prod(mesh_shape[a] for a in axes)):
                    continue
                axes_of[name] = axes
                used.update(axes)
    return axes_of


def partition_spec(names: Sequence[str], axes_of: Mapping[str, tuple]) -> tuple:
    """The PartitionSpec entries of an array with dimensions `names`."""
    axes = [axes_of.get(name, ()) for name in names]
    return tuple(None if not a else a[0] if len(a) == 1 else a for a in axes)
