"""Fencing on Ray: a worker whose node is gone stops, rather than serving on beside the
actor Ray restarts elsewhere.

A Ray worker is a child of its node's raylet. When the raylet dies (the node is lost), the
worker is re-parented, yet it can keep running for a long while, answering calls that
reach it and holding its store connections, while Ray has already restarted the actor on
another node: two copies of one actor, both writing. :class:`NodeFence` notes the worker's
parent when the actor starts; a watcher thread and every call check it, and the first to
see another parent ends the process at once (no hook runs, nothing more is written; the
store's server sees the connections drop and rolls back what was open).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

from toolcards.core.threads import background_thread

EXIT_CODE = 70
"""The exit status of a fenced worker (EX_SOFTWARE)."""


def _exit_now() -> None:  # pragma: no cover - ends the process
    os._exit(EXIT_CODE)


class NodeFence:
    """Stops this process once its parent (the raylet that started it) is no longer its
    parent. ``poll`` is how often the watcher looks, in seconds."""

    def __init__(
        self, name: str, poll: float = 0.25, on_lost: Callable[[], None] = _exit_now
    ) -> None:
        self.name = name
        self.poll = poll
        self._parent = os.getppid()
        self._on_lost = on_lost
        self._stop = threading.Event()
        self._fired = threading.Lock()

    @property
    def lost(self) -> bool:
        """Whether the node's raylet is gone (this worker was re-parented)."""
        return os.getppid() != self._parent

    def check(self) -> None:
        """Stop this process if its node is lost; return otherwise."""
        if self.lost:
            self._fire()

    def watch(self) -> NodeFence:
        """Start the watcher thread (a daemon); returns ``self``."""
        background_thread(self._watch, name=f"fence {self.name}").start()
        return self

    def close(self) -> None:
        """End the watcher (the actor stopped normally)."""
        self._stop.set()

    def _watch(self) -> None:
        while not self._stop.wait(self.poll):
            if self.lost:
                self._fire()
                return

    def _fire(self) -> None:
        if not self._fired.acquire(blocking=False):
            return
        print(
            f"toolcards: actor {self.name} lost its Ray node (its raylet, pid {self._parent},"
            " is gone); this worker stops without serving or writing again",
            file=sys.stderr,
            flush=True,
        )
        self._on_lost()
