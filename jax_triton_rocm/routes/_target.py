"""Which GPU architecture a lowering compiles for.

In order: `target_arch(...)` in force on the thread (`api._target`); the environment variable
`JAX_TRITON_ROCM_TARGET_ARCH` (read when JAX starts); the devices the computation is lowered for
(every one of them, not device 0: they must agree); the local devices of the platform's backend.
With none of these (a machine without that GPU), lowering raises an error that says how to name
one.

The named architectures live in a JAX config state that JAX includes in its trace and jit cache
keys, so a function traced under one `target_arch` is never served a lowering made for another.
JAX reads the variable into that state once, when this module is imported (by `import
jax_triton_rocm`, or by JAX's plugin discovery when its backends start); a later change to it
would be ignored, so reading the architecture then raises an error saying so.

Where a lowering's kernels will run, beside what they compile for (above): whether the
lowering is for `jax.export`, the kind of GPU it runs on (remembered autotune choices are per
kind), and devices whose architecture differs from a call's own compile target.

Remembered autotune choices: which config of an autotuned call won on real data.

A choice is keyed by everything that decides it (`tune_key`): the binary of every config (a
digest), their descriptions, grids and parameters, the operand and result types, the aliases,
the GPU's kind and architecture, and the jaxlib and Triton versions. With a choice remembered,
the lowering emits that config alone, as a plain kernel call: no trial runs, the plain-kernel
launch cost, capturable in CUDA graphs. Without one it emits the autotuned call, which jaxlib
times at the first execution, on the real operands (`_compat.autotuned_call_target`).

Choices are made by `jax_triton_rocm.autotune` (`_tuning`), which times each config on the
call's real operands, and kept in this process and on disk, one small JSON file per key, in
`JAX_TRITON_ROCM_AUTOTUNE_DIR` (default: a `jax_triton_rocm_autotune` folder inside Triton's
cache folder; the empty string keeps them in the process only). Files are written atomically
(a temporary file, then a rename), so processes sharing the folder never read half a file; the
temporary files of writers that died mid-write are swept, once a minute old, by the first
process that reads or writes the folder. A file that does not parse, has another format, an
index or time of the wrong kind, or no longer matches its call's configs, is ignored (with one
warning per file); anything at a choice's path that is not a regular file directly inside its
group folder (a link, a FIFO, a device) is never opened, and a read never blocks. A store or
group folder that is a link or another user's is not written (one warning; the choice is kept in
the process), and a store folder others can write is named in one warning (`_files`).

A tuning session (`session`) lets `_tuning` force a config for a key while it times them, and
observe which autotuned calls a lowering left undecided. It lives in a context variable of the
thread that lowers. Threads and forks: the in-process table is behind the registry's lock; a
forked child keeps it (choices stay valid across a fork).
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from jax._src import config

from jax_triton_rocm import backends
from jax_triton_rocm.backends import _vendors
from jax_triton_rocm.backends._backend import Backend
from jax_triton_rocm.backends._vendors import normalize_arch
from jax_triton_rocm.base import _compat, _files, _state, _values
from jax_triton_rocm.compile import _compile
from jax_triton_rocm.plan._plan import Target
from jax_triton_rocm.routes.jaxlib import _choice_files
from jax_triton_rocm.spec._spec import KernelCallSpec

if TYPE_CHECKING:
    from jax._src.interpreters.mlir import LoweringRuleContext, ModuleContext


def for_export(ctx: LoweringRuleContext) -> bool:
    """Whether the lowering is for `jax.export` (its result may run on other machines, with
    other jaxlibs); JAX says so in the lowering parameters (jax 0.10.2-0.12)."""
    parameters = getattr(ctx.module_context, "lowering_parameters", None)
    return bool(getattr(parameters, "for_export", False))


def foreign_devices(backend: Backend, ctx: LoweringRuleContext, spec: KernelCallSpec,
                    target: Target) -> Target | None:
    """The architecture of the devices a call's kernel will load on, where it differs from the
    one the call compiles for (`target`); None where they agree or are not known.

    Only a call that names its own compile target (`compute_capability`) can differ: the
    devices are then those named (`target_arch`), else, outside `jax.export` (whose result
    runs elsewhere), the computation's (`lowering_target`).

    Raises:
      ValueError: the computation's devices have different architectures.
    """
    if not backend.arch_keyword or target.source != backend.arch_keyword:
        return None  # the target is not the call's own (`resolve_target`)
    devices = named_arch(backend.platform)
    if devices is None and not for_export(ctx):
        try:
            devices = lowering_target(backend.platform, ctx.module_context)
        except RuntimeError:  # no device here: a cross-compile for the call's own target
            return None
    return devices if devices is not None and devices.arch != target.arch else None


def device_kind(platform: str, module_context: ModuleContext) -> str | None:
    """The kind of GPU this lowering runs on (e.g. "NVIDIA H200"), or None.

    None when the computation's devices are of more than one kind, or when there is no device of
    `platform` to run on (cross-compiling for a named architecture).
    """
    devices = [d for d in _context_devices(module_context)
               if getattr(d, "platform", platform) == platform]
    if not devices:
        devices = list(_local_devices(platform, module_context))
    kinds = {getattr(d, "device_kind", None) for d in devices}
    return kinds.pop() if len(kinds) == 1 else None


ENV_TARGET_ARCH = _values.ENV_TARGET_ARCH

# Holds a tuple of (platform, arch) pairs under `target_arch`, else the environment's string.
# JAX includes it in its trace and jit cache keys, so a computation traced under one
# `target_arch` never reuses a lowering made under another; JAX reads its default from the
# environment variable of the same name.
_ARCH_STATE = config.string_or_object_state(
    ENV_TARGET_ARCH.lower(), None,
    "GPU architectures jax_triton_rocm compiles Triton kernels for, e.g. 'cuda=sm_90,rocm=gfx942'"
    " (default: those of the devices).",
    include_in_jit_key=True, include_in_trace_context=True)
# The variable as JAX read it into `_ARCH_STATE`, just above.
_ENV_AS_READ = os.environ.get(ENV_TARGET_ARCH)


@functools.lru_cache(maxsize=None)  # one entry per architecture named in the process
def arch_problem(platform: str, arch: str) -> str | None:
    """Why the installed Triton cannot compile for canonical `arch`, or None.

    Triton keeps no list of its targets; the lists that bound them are used instead: for AMD the
    processor names LLVM's AMDGPU backend (linked into Triton) knows, for NVIDIA the `--gpu-name`
    values of the ptxas Triton runs. Where Triton, its backend or the list cannot be read, the
    check is skipped and Triton's own compile decides.
    """
    try:
        backend = backends.backend(platform)
        if backend.knows_arch(arch):
            return None
        known = backend.known_archs()
    except Exception:  # noqa: BLE001  (no list to check against: Triton's compile will tell)
        return None
    if not known:
        return None
    return (f"is not an architecture the installed Triton ({_compat.triton_info().version}) can "
            f"compile for; it knows {', '.join(known)}")


def check_arch(platform: str, arch: str, *, given: Any, what: str) -> str:
    """`arch` (canonical) if the installed Triton can compile for it.

    Raises:
      ValueError: naming `what`, the value as given and the architectures Triton knows.
    """
    problem = arch_problem(platform, arch)
    if problem:
        raise ValueError(f"{what}={given!r} ({arch}) {problem}.")
    return arch


def _parse_env(raw: str) -> dict[str, str]:
    archs = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        platform, sep, arch = item.partition("=")
        platform = platform.strip().lower()
        if not sep or platform not in ("cuda", "rocm"):
            raise ValueError(
                f"{ENV_TARGET_ARCH}={raw!r}: each item must be 'cuda=ARCH' or 'rocm=ARCH', "
                f"e.g. {ENV_TARGET_ARCH}='cuda=sm_90,rocm=gfx942'.")
        if platform in archs:
            raise ValueError(
                f"{ENV_TARGET_ARCH}={raw!r} names platform {platform} more than once; one "
                f"lowering compiles for one architecture per platform. Name each platform once, "
                f"e.g. {ENV_TARGET_ARCH}='cuda=sm_90,rocm=gfx942'.")
        archs[platform] = check_arch(
            platform, normalize_arch(platform, arch, what=ENV_TARGET_ARCH), given=raw,
            what=ENV_TARGET_ARCH)
    return archs


def _env_archs() -> dict[str, str]:
    """The architectures `JAX_TRITON_ROCM_TARGET_ARCH` names now (its reader for
    `_values.check_variables`)."""
    raw = os.environ.get(ENV_TARGET_ARCH, "")
    return _parse_env(raw) if raw.strip() else {}


_values.VARIABLE_READERS[ENV_TARGET_ARCH] = _env_archs


@contextlib.contextmanager
def named_in_force(archs: dict[str, str]) -> Iterator[dict[str, str]]:
    """Makes `archs` (canonical, by platform) the named architectures, over those named before;
    yields them all. The way out of a variable set too late: it does not check the variable."""
    value = _ARCH_STATE.value
    named = _parse_env(value) if isinstance(value, str) else dict(value or ())
    merged = {**named, **archs}
    with _ARCH_STATE(tuple(sorted(merged.items()))):
        yield merged


def _env_changed_error(now: str | None) -> RuntimeError:
    """The error for `JAX_TRITON_ROCM_TARGET_ARCH` set, changed or unset after it was read."""
    then = "unset" if _ENV_AS_READ is None else f"{_ENV_AS_READ!r}"
    done = "unset" if now is None else f"set to {now!r}"
    try:
        example = ", ".join(f"{p}={a!r}" for p, a in _parse_env(now or "").items())
    except ValueError:
        example = ""
    example = example or f"cuda={_vendors.vendor('cuda').example_arch!r}"
    return RuntimeError(
        f"{ENV_TARGET_ARCH} was {done} too late: jax_triton_rocm read it when it was imported "
        f"({then} then), and a change after that has no effect in this process. Set it before "
        f"Python starts (in the shell) or before `import jax_triton_rocm` (and before JAX starts "
        f"its backends, which imports it), or name the architecture in code: `with "
        f"jax_triton_rocm.target_arch({example}):` around the lowering.")


def named_arch(platform: str) -> Target | None:
    """The architecture named for `platform` by `target_arch`, else by the environment, if any.

    Raises:
      ValueError: `JAX_TRITON_ROCM_TARGET_ARCH` is malformed or names an unknown architecture.
      RuntimeError: the variable was set, changed or unset after it was read (too late).
    """
    value = _ARCH_STATE.value
    if not isinstance(value, tuple):  # no target_arch() in force
        now = os.environ.get(ENV_TARGET_ARCH)
        if now != _ENV_AS_READ:
            raise _env_changed_error(now)
    archs = _parse_env(value) if isinstance(value, str) else dict(value or ())
    if platform not in archs:
        return None
    source = ENV_TARGET_ARCH if isinstance(value, str) else "target_arch()"
    return Target(platform, archs[platform], source)


def _device_arch(platform: str, device: Any) -> str:
    """The architecture a device reports in `compute_capability`.

    XLA's GPU client sets it to "major.minor" on CUDA ("9.0") and to the gfx name without target
    features on ROCm ("gfx942"; feature suffixes such as ":sramecc+:xnack-" are accepted too).
    Devices described without a live GPU report a placeholder ("<unknown compute-capability>").
    """
    capability = getattr(device, "compute_capability", None)
    example = "cuda='sm_90'" if platform == "cuda" else "rocm='gfx942'"
    try:
        if capability is None:
            raise ValueError(f"device {device} does not report compute_capability")
        return normalize_arch(platform, capability, what=f"{device}.compute_capability")
    except ValueError as err:
        raise ValueError(
            f"Device {device} reports compute_capability={capability!r}, which names no "
            f"{platform} architecture, so the lowering cannot tell what to compile for. Name it: "
            f"`with jax_triton_rocm.target_arch({example}):` or "
            f"{ENV_TARGET_ARCH}='{example.replace(chr(39), '')}'.") from err


def _context_devices(module_context: ModuleContext) -> list[Any]:
    """The devices a lowering's module is built for, as far as the context tells."""
    axis_context = getattr(module_context, "axis_context", None)
    devices = getattr(axis_context, "device_assignment", None)
    if devices:
        return list(devices)
    mesh = getattr(axis_context, "mesh", None)
    if mesh is not None and hasattr(mesh, "devices"):
        return list(mesh.devices.flat)
    return []


def resolve_target(backend: Backend, ctx: LoweringRuleContext,
                   spec: KernelCallSpec) -> tuple[Target, _vendors.PluginFeatures]:
    """The target a call compiles for (a vendor keyword of the call, a named architecture or
    the devices), and what the jaxlib plugin that will load the kernel reads.

    Raises:
      RuntimeError: no plugin for the platform and no architecture named (says how to name one).
    """
    platform = backend.platform
    # Named by the call through its vendor's keyword (`Backend.arch_field`: compute_capability=)?
    arch = getattr(spec, backend.arch_field) if backend.arch_field else None
    own = None if arch is None else Target(platform, arch, backend.arch_keyword)
    if own is not None:  # then Triton must know it too
        check_arch(platform, own.arch, given=spec.cuda_arch, what=own.source.rstrip("="))
    named = own or named_arch(platform)
    features = _vendors.plugin_features(platform)
    if features is None and named is None:
        vendor = _vendors.vendor(platform)
        example = vendor.example_arch
        raise RuntimeError(
            f"Lowering triton_call for platform '{platform}' needs JAX's {platform.upper()} "
            f"plugin, which is not installed: {vendor.install_hint}. To only "
            f"cross-compile (no GPU here), name the architecture: `with "
            f"jax_triton_rocm.target_arch({platform}='{example}'):` around the lowering, or "
            f"{ENV_TARGET_ARCH}='{platform}={example}'.")
    features = features or _vendors.assumed_features(platform)
    return named or lowering_target(platform, ctx.module_context), features


def lowering_target(platform: str, module_context: ModuleContext) -> Target:
    """The target for a lowering of `platform` in `module_context`.

    Raises:
      ValueError: the devices disagree on the architecture.
      RuntimeError: no architecture can be found (no device, nothing named); says how to name one.
    """
    named = named_arch(platform)
    if named is not None:
        return named
    devices = [d for d in _context_devices(module_context)
               if getattr(d, "platform", platform) == platform]
    source = "the computation's devices"
    if not devices:
        devices = _local_devices(platform, module_context)
        source = f"the local {platform} devices"
    archs = {_device_arch(platform, d) for d in devices}
    if len(archs) == 1:
        return Target(platform, archs.pop(), source)
    if len(archs) > 1:
        raise ValueError(
            f"The {platform} devices of this computation have different architectures "
            f"({', '.join(sorted(archs))}); one Triton binary cannot serve them all. Lower for "
            f"one kind of device at a time (jax.jit(..., device=...) or a mesh of like devices).")
    example = f"{platform}='{_vendors.vendor(platform).example_arch}'"
    raise RuntimeError(
        f"No {platform} device to take the GPU architecture from. To lower for {platform} "
        f"without one, name the architecture: `with jax_triton_rocm.target_arch({example}):` "
        f"around the lowering, or set {ENV_TARGET_ARCH}='{example.replace(chr(39), '')}'.")


def _local_devices(platform: str, module_context: ModuleContext) -> Iterable[Any]:
    backend = None
    get_backend = getattr(module_context, "get_backend", None)
    if get_backend is not None:
        try:
            backend = get_backend(optional=True)
        except Exception:  # no such backend on this machine
            backend = None
    if backend is None:
        import jax

        try:
            return jax.local_devices(backend=platform)
        except RuntimeError:
            return []
    return backend.local_devices()


logger = logging.getLogger("jax_triton_rocm")

ENV_AUTOTUNE_DIR = _values.ENV_AUTOTUNE_DIR
FOLDER_NAME = "jax_triton_rocm_autotune"
_FORMAT = 1
# A writer's temporary file older than this is a dead writer's; a choice file is far smaller.
_STALE_SECONDS = 60
_MAX_BYTES = 1 << 20
_swept: set[str] = set()
_warned: set[str] = set()


@dataclasses.dataclass(frozen=True)
class Choice:
    """The winning config of one autotuned call.

    Attributes:
      index: its position among the call's configs.
      description: Triton's text for the config (checked against the call at use).
      times_ms: each config's measured time, in config order (for `info` and debugging).
    """

    index: int
    description: str
    times_ms: tuple[float, ...] = ()


@dataclasses.dataclass(frozen=True)
class Undecided:
    """An autotuned call that a lowering emitted without a choice: its key and configs."""

    key: str
    descriptions: tuple[str, ...]
    kernel: str


def tune_key(*, platform: str, arch: str, device_kind: str, versions: Sequence[str],
             avals: Sequence[Any], aliases: Sequence[tuple[int, int]],
             configs: Sequence[tuple[str, bytes, tuple, tuple]]) -> str:
    """A SHA-256 over what decides which config is fastest.

    `configs` holds, per config: its description, its binary, its grid and its launch
    parameters (scalar values, zeroed bytes).
    """
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
    configured = os.environ.get(ENV_AUTOTUNE_DIR)
    if configured is not None:
        return configured or None
    import triton

    cache = triton.knobs.cache
    base = cache.dir or cache.get_triton_dir("cache")
    return os.path.join(base, FOLDER_NAME)


class ChoiceStore:
    """Choices by key: in this process, and on disk (`choices_dir`).

    `generation` changes whenever a choice is added or the table cleared, so memos of lowered
    calls can tell that a lowering may now come out differently. Bounded by the number of
    distinct autotuned calls the process tunes.
    """

    def __init__(self, locks: _state.LockRegistry) -> None:
        self._locks = locks
        self._choices: dict[str, Choice] = {}
        self.generation = 0

    def get(self, key: str) -> Choice | None:
        """The choice for `key`, from this process or from disk; None if there is none."""
        with self._locks.guard:
            choice = self._choices.get(key)
        if choice is None:
            choice = _read(key)
            if choice is not None:
                with self._locks.guard:
                    self._choices[key] = choice
        return choice

    def put(self, key: str, choice: Choice) -> None:
        """Remembers `choice` for `key` in this process and, where a folder is set, on disk."""
        with self._locks.guard:
            self._choices[key] = choice
            self.generation += 1
        _write(key, choice)

    def clear(self) -> None:
        """Forgets the choices held in this process (the files stay)."""
        with self._locks.guard:
            self._choices.clear()
            self.generation += 1


def _location(key: str) -> tuple[str, str, str] | None:
    """(store folder, group folder, file name) of the choice for `key`; None without a store."""
    folder = choices_dir()
    if folder is None:
        return None
    if folder not in _swept:
        _swept.add(folder)
        _files.warn_if_others_can_write(folder, _setting(), ENV_AUTOTUNE_DIR)
        _choice_files.sweep(folder, _STALE_SECONDS)
    return folder, os.path.join(folder, key[:2]), f"{key}.json"


def _setting() -> str:
    """Which setting chose the store's folder, as warnings name it."""
    if ENV_AUTOTUNE_DIR in os.environ:
        return f"{ENV_AUTOTUNE_DIR}={os.environ[ENV_AUTOTUNE_DIR]!r}"
    return f"{ENV_AUTOTUNE_DIR} unset: its default in Triton's cache folder"


def _warn_once(path: str, problem: str) -> None:
    if path not in _warned:
        _warned.add(path)
        logger.warning("jax_triton_rocm: ignoring the autotune choice %s (%s); the call is "
                       "autotuned again.", path, problem)


def _read(key: str) -> Choice | None:
    location = _location(key)
    if location is None:
        return None
    _, group, name = location
    try:
        record = _choice_files.read_json(group, name, _MAX_BYTES)
        return None if record is None else Choice(*_choice_files.checked(record, _FORMAT))
    except (OSError, ValueError, RecursionError) as err:
        _warn_once(os.path.join(group, name), str(err) or type(err).__name__)
        return None


def _write(key: str, choice: Choice) -> None:
    location = _location(key)
    if location is None:
        return
    store, group, name = location
    record = {"format": _FORMAT, "index": choice.index, "description": choice.description,
              "times_ms": list(choice.times_ms)}
    try:
        _choice_files.write_json(store, os.path.basename(group), name, record)
    except (OSError, ValueError) as err:
        if store in _warned:
            return
        _warned.add(store)
        logger.warning("jax_triton_rocm: could not save autotune choices in %s (%s): %s; they "
                       "are kept in this process only. Set %s to a folder of your own that "
                       "you can write.", store, _setting(), err, ENV_AUTOTUNE_DIR)


STORE = ChoiceStore(_state.LOCKS)
_state.on_clear(STORE.clear)


class Session:
    """What `_tuning` asks of the lowerings it runs: configs to force, calls left undecided."""

    def __init__(self) -> None:
        self.forced: dict[str, int] = {}
        self.undecided: dict[str, Undecided] = {}


_SESSION: contextvars.ContextVar[Session | None] = contextvars.ContextVar(
    "jax_triton_rocm_tuning", default=None)


@contextlib.contextmanager
def session(forced: dict[str, int] | None = None) -> Iterator[Session]:
    """Lowerings in the body use `forced` configs and report the calls they left undecided."""
    current = Session()
    current.forced = dict(forced or {})
    token = _SESSION.set(current)
    try:
        yield current
    finally:
        _SESSION.reset(token)


def lowered_call(route: str, ctx: LoweringRuleContext, spec: KernelCallSpec, decides: tuple,
                 make: Callable[[], Any], graph: tuple | None = None) -> Any:
    """`make()`, the call `route` lowers `spec` to, kept in `_state.LOWERED_CALLS` under the one
    key every route uses: the route, the avals, the spec (the kernel by identity, kept alive by
    the spec in the key, so that its id is not reused while the entry lives; scalars and
    metaparameters by exact value), what the kernel's call graph resolves to now
    (`_compile.graph_key`: a redefined helper or a changed global is a new key), the remembered
    and forced autotune choices (`STORE`'s generation, the tuning session's forced configs),
    and what else decides the route's result (`decides`: its target, ...). `graph` is the
    graph's key where the route has it already. A key that cannot be hashed skips the memo."""
    if graph is None:
        graph = _compile.call_graph_key(spec)
    current = _SESSION.get()
    forced = tuple(sorted(current.forced.items())) if current is not None else ()
    key = (route, tuple(ctx.avals_in), tuple(ctx.avals_out), spec, graph,
           (STORE.generation, forced), decides)
    return _state.LOWERED_CALLS.memo(key, make)


def pick(key: str, descriptions: Sequence[str]) -> int | None:
    """The config to emit alone for the autotuned call `key`: forced by a tuning session, else
    remembered; None leaves the call to jaxlib's autotuner."""
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


def note_undecided(undecided: Undecided | None) -> None:
    """Tells a tuning session, if one is watching, that a lowering left this call undecided."""
    current = _SESSION.get()
    if current is not None and undecided is not None and undecided.key not in current.forced:
        current.undecided.setdefault(undecided.key, undecided)
