"""Remembered autotune choices: which config of an autotuned call won on real data (made by
`jax_triton_rocm.autotune`), keyed by all that decides it; the lowering emits that config
alone, else the autotuned call jaxlib times at its first run (docs/autotuning.md). Kept in this
process (a forked child keeps them) and on disk, one JSON file per key; a file is untrusted:
read as `_files.read_entry_file` reads an entry and checked field by field. A tuning session
lets `_tuning` force configs and see which calls a lowering left undecided.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import hashlib
import json
import logging
import math
import os
from collections.abc import Iterator, Sequence
from typing import Any

from jax_triton_rocm.base import _env, _files, _state, _values


logger = logging.getLogger("jax_triton_rocm")

FOLDER_NAME = "jax_triton_rocm_autotune"
_FORMAT = 1
_MAX_BYTES = 1 << 20
_swept: set[str] = set()


@dataclasses.dataclass(frozen=True)
class Choice:
    """The winning config of one autotuned call: its index, Triton's text for it (checked against
    the call at use), and each config's time (for `info`)."""

    index: int
    description: str
    times_ms: tuple[float, ...] = ()


@dataclasses.dataclass(frozen=True)
class Undecided:
    """An autotuned call that a lowering emitted without a choice."""

    key: str
    descriptions: tuple[str, ...]
    kernel: str


def tune_key(*, platform: str, arch: str, device_kind: str, versions: Sequence[str],
             avals: Sequence[Any], aliases: Sequence[tuple[int, int]],
             configs: Sequence[tuple[str, bytes, tuple, tuple]]) -> str:
    """A SHA-256 over what decides which config is fastest."""
    parts = [f"format={_FORMAT}", f"platform={platform}", f"arch={arch}",
             f"device={device_kind}", f"versions={list(versions)}",
             "avals=" + ";".join(f"{tuple(a.shape)}:{a.dtype}" for a in avals),
             f"aliases={sorted(aliases)}"]
    for description, binary, grid, params in configs:
        parts.append(f"config={description}|{hashlib.sha256(binary).hexdigest()}|{grid}|"
                     f"{params}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def choices_dir() -> str | None:
    """The folder for remembered choices, or None to keep them in the process only."""
    configured = _env.autotune_dir()
    if configured is not None:
        return configured or None
    import triton

    cache = triton.knobs.cache
    base = cache.dir or cache.get_triton_dir("cache")
    return os.path.join(base, FOLDER_NAME)


class ChoiceStore:
    """Choices by key, in this process and on disk. `generation` changes with every choice added
    or clear, so memos of lowered calls can tell that a lowering may now come out differently."""

    def __init__(self) -> None:
        self._choices: dict[str, Choice] = {}
        self.generation = 0

    def get(self, key: str) -> Choice | None:
        with _state.LOCKS.guard:
            choice = self._choices.get(key)
        if choice is not None or (location := _location(key)) is None:
            return choice
        _, group, name = location
        try:
            record = _files.parse_json(_files.read_entry_file(group, name, _MAX_BYTES))
            if record is None:
                return None
            choice = Choice(*_checked(record))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as err:
            path = os.path.join(group, name)
            if _state.first_warning(("autotune choice", path)):
                logger.warning("jax_triton_rocm: ignoring the autotune choice %s (%s); the call "
                               "is autotuned again.", path, str(err) or type(err).__name__)
            return None
        with _state.LOCKS.guard:
            self._choices[key] = choice
        return choice

    def put(self, key: str, choice: Choice) -> None:
        with _state.LOCKS.guard:
            self._choices[key] = choice
            self.generation += 1
        if (location := _location(key)) is None:
            return
        store, group, name = location
        data = json.dumps({"format": _FORMAT, "index": choice.index,
                           "description": choice.description,
                           "times_ms": list(choice.times_ms)}).encode("utf-8")
        try:
            _files.write_file((store, os.path.basename(group)), name, data)
        except (OSError, ValueError) as err:
            if _state.first_warning(("autotune store", store)):
                logger.warning("jax_triton_rocm: could not save autotune choices in %s (%s): %s; "
                               "they are kept in this process only. Set %s to a folder of your "
                               "own that you can write.", store, _setting(), err,
                               _env.ENV_AUTOTUNE_DIR)

    def clear(self) -> None:
        """Forgets the choices held in this process (the files stay)."""
        with _state.LOCKS.guard:
            self._choices.clear()
            self.generation += 1


def _location(key: str) -> tuple[str, str, str] | None:
    """(store folder, group folder, file name) of the choice for `key`; None without a store.
    A killed writer's temporary files are swept once stale."""
    folder = choices_dir()
    if folder is None:
        return None
    if folder not in _swept:
        _swept.add(folder)
        _files.warn_if_others_can_write(folder, _setting, _env.ENV_AUTOTUNE_DIR)
        # Never through a link; a folder that vanished or cannot be read is left as it is.
        with contextlib.suppress(OSError, ValueError):
            for entry in os.scandir(folder):
                if entry.is_dir(follow_symlinks=False):
                    _files.remove_stale_temporaries(os.path.join(folder, entry.name))
    return folder, os.path.join(folder, key[:2]), f"{key}.json"


def _setting() -> str:
    """Which setting chose the store's folder, as warnings name it."""
    configured = _env.autotune_dir()
    if configured is not None:
        return f"{_env.ENV_AUTOTUNE_DIR}={configured!r}"
    return f"{_env.ENV_AUTOTUNE_DIR} unset: its default in Triton's cache folder"


def _checked(record: Any) -> tuple[int, str, tuple[float, ...]]:
    """(index, description, times in ms) of a choice's `record`, else a ValueError."""
    if not isinstance(record, dict) or not _values.is_int(record.get("format")):
        raise ValueError("no format number")
    if record["format"] != _FORMAT:
        raise ValueError(f"format {record['format']}, not {_FORMAT}")
    index, times = record.get("index"), record.get("times_ms", [])
    if not _values.is_int(index) or index < 0:
        raise ValueError(f"index {index!r} is not an int >= 0")
    if not isinstance(record.get("description"), str):
        raise ValueError("no description")
    if not isinstance(times, list) or not all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t)
            for t in times):
        raise ValueError(f"times_ms {times!r} are not all finite numbers")
    return index, record["description"], tuple(float(t) for t in times)


STORE = ChoiceStore()
_state.on_clear(STORE.clear)


@dataclasses.dataclass
class Session:
    """What `_tuning` asks of the lowerings it runs: configs to force, calls left undecided."""

    forced: dict[str, int] = dataclasses.field(default_factory=dict)
    undecided: dict[str, Undecided] = dataclasses.field(default_factory=dict)


_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "jax_triton_rocm_tuning", default=None)


@contextlib.contextmanager
def session(forced: dict[str, int] | None = None) -> Iterator[Session]:
    """Lowerings in the body use `forced` configs and report the calls they left undecided."""
    current = Session(dict(forced or {}))
    token = _SESSION.set(current)
    try:
        yield current
    finally:
        _SESSION.reset(token)


def decided() -> tuple:
    """What decides a lowering's autotuned calls now, for the lowered-call memo's key."""
    current = _SESSION.get()
    forced = tuple(sorted(current.forced.items())) if current is not None else ()
    return (STORE.generation, forced), _env.as_set(_env.ENV_AUTOTUNE_TARGET)


def pick(key: str, descriptions: Sequence[str]) -> int | None:
    """The config to emit alone for the autotuned call `key`, forced or remembered; None leaves
    the call to jaxlib's autotuner."""
    current = _SESSION.get()
    if current is not None and key in current.forced:
        return current.forced[key]
    choice = STORE.get(key)
    if choice is None:
        return None
    if not (0 <= choice.index < len(descriptions)
            and descriptions[choice.index] == choice.description):
        logger.debug("jax_triton_rocm: the remembered choice %s no longer matches the call's "
                     "configs; autotuning it again.", choice.description)
        return None
    return choice.index


def report_undecided(undecided: Undecided | None) -> None:
    current = _SESSION.get()
    if current is not None and undecided is not None and undecided.key not in current.forced:
        current.undecided.setdefault(undecided.key, undecided)
