"""Wakes this process's watchers of a team when another process commits a change of it: one
thread per store ``LISTEN``\\s on its channel (the team store ``NOTIFY``\\s :data:`CHANNEL` with
the team id in each transaction that appends an event; the approval store notifies
:data:`GRANTS_CHANNEL` when a grant is made or revoked), without polling."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any

from toolcards.core.threads import background_thread
from toolcards.stores.errors import DatabaseUnavailable
from toolcards.stores.postgres.connections import Connections

__all__ = ["CHANNEL", "GRANTS_CHANNEL", "EventListener"]

log = logging.getLogger(__name__)

CHANNEL = "toolcards_events"
"""The channel the team store notifies, with the team id as payload."""
GRANTS_CHANNEL = "toolcards_grants"
"""The channel the approval store notifies when a team's grants change (the team id)."""


class EventListener:
    """The watchers of each team and the thread, started by the first :meth:`watch`, that
    calls them on each notice of their team."""

    def __init__(self, db: Connections, location: str, channel: str = CHANNEL) -> None:
        self._db = db
        self._location = location
        self._channel = channel
        self._watchers: dict[str, list[Callable[[], Any]]] = {}
        self._watch_lock = threading.Lock()
        self._listener: threading.Thread | None = None
        self._stop_listening = threading.Event()

    def stop(self) -> None:
        """Ask the thread to end (it ends within its wait of 0.5 s)."""
        self._stop_listening.set()

    def join(self) -> None:
        """Wait (at most 2 s) for the thread to end, if it ran."""
        if self._listener is not None:
            self._listener.join(timeout=2.0)

    def watch(self, team_id: str, callback: Callable[[], Any]) -> Callable[[], None]:
        """Call ``callback`` on each notice of ``team_id``; returns what stops the calls."""
        with self._watch_lock:
            self._watchers.setdefault(team_id, []).append(callback)
            if self._listener is None:
                self._listener = background_thread(self._listen, name="toolcards-pg-listen")
                self._listener.start()

        def unwatch() -> None:
            with self._watch_lock:
                found = self._watchers.get(team_id, [])
                if callback in found:
                    found.remove(callback)

        return unwatch

    def _listen(self) -> None:
        """Wake the watchers of a team on each NOTIFY; reconnect (backing off) when the
        connection drops, and wake everyone after a reconnect (a notice may have been lost)."""
        delay = 0.1
        while not self._stop_listening.is_set():
            try:
                conn = self._db.open()
            except DatabaseUnavailable:
                self._stop_listening.wait(delay)
                delay = min(delay * 2, 5.0)
                continue
            delay = 0.1
            try:
                conn.execute(f"LISTEN {self._channel}")
                self._wake_all()
                while not self._stop_listening.is_set():
                    for note in conn.notifies(timeout=0.5):
                        self._wake(note.payload)
            except Exception:  # the connection dropped: reconnect
                log.debug("event listener of %s lost its connection", self._location)
            finally:
                with contextlib.suppress(Exception):
                    conn.close()

    def _wake(self, team_id: str) -> None:
        with self._watch_lock:
            callbacks = list(self._watchers.get(team_id, ()))
        for callback in callbacks:
            callback()

    def _wake_all(self) -> None:
        with self._watch_lock:
            teams = list(self._watchers)
        for team_id in teams:
            self._wake(team_id)
