"""The imports a lowering needs, taken under one re-entrant lock (`IMPORTS.lowering()`) that a
fork waits for: a per-module import lock another thread held at the fork would be held forever
in the child, which gets every module whole, or none (it then imports them itself).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import threading
from collections.abc import Iterator

logger = logging.getLogger("jax_triton_rocm")


# Modules Triton imports lazily during its first compile (a cache miss), which a lowering
# therefore needs: missing ones (another Triton version) are skipped.
LOWERING_IMPORTS = (
    "triton.compiler.code_generator",
    "triton.language.semantic",
    "triton.language.extra.libdevice",
    "triton.experimental.gluon._runtime",
)
# How long a fork waits for another thread to finish the lowering imports; past it the fork
# goes on (a thread stuck importing must not stop the process from forking) with a warning.
FORK_IMPORT_WAIT_S = 60.0


class LoweringImports:
    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._held_for_fork = False
        self._triton_done = False

    @contextlib.contextmanager
    def lowering(self) -> Iterator[None]:
        """Holds the import lock for the body's imports, then imports `LOWERING_IMPORTS`."""
        with self._lock:
            yield
            if not self._triton_done:
                for name in LOWERING_IMPORTS:  # by name: which of them exist depends on Triton
                    with contextlib.suppress(ImportError):
                        importlib.import_module(name)
                self._triton_done = True

    def before_fork(self) -> None:
        self._held_for_fork = self._lock.acquire(timeout=FORK_IMPORT_WAIT_S)
        if not self._held_for_fork:
            logger.warning("jax_triton_rocm: forking while another thread has been importing "
                           "Triton for %s s; the child may wait on that import forever.",
                           FORK_IMPORT_WAIT_S)

    def after_fork_in_parent(self) -> None:
        if self._held_for_fork:
            self._held_for_fork = False
            self._lock.release()

    def after_fork_in_child(self) -> None:
        self._held_for_fork = False
        self._lock = threading.RLock()


IMPORTS = LoweringImports()
os.register_at_fork(before=IMPORTS.before_fork, after_in_parent=IMPORTS.after_fork_in_parent,
                    after_in_child=IMPORTS.after_fork_in_child)
