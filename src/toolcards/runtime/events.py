"""The team event log: append-only, per-tool gap-free ``seq``, replay then live subscriptions.

A position in the log is the count of events before it: ``events(since=n)`` gives every event
after the first ``n``, so a client that has seen ``n`` events resumes with ``since=n``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

from toolcards.core.events import ToolStateEvent
from toolcards.runtime.store import TeamStore, dumps

logger = logging.getLogger(__name__)

LIFECYCLE = "team"
"""The ``tool_id`` of lifecycle events (team and actor started/stopped)."""

EventCallback = Callable[[ToolStateEvent], Any]


def is_empty_delta(payload: Any) -> bool:
    """True for a payload that changes nothing: None, an empty container, or a mapping whose
    values are all None or empty containers (``{"created": [], "deleted": []}``)."""
    if isinstance(payload, BaseModel):
        payload = payload.model_dump(exclude_defaults=True)
    if payload is None:
        return True
    if isinstance(payload, (list, tuple, set, frozenset, str, bytes)):
        return len(payload) == 0
    if isinstance(payload, dict):
        return all(_empty_value(v) for v in payload.values())
    return False


def _empty_value(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, (list, tuple, set, frozenset, dict, str)) and len(value) == 0


class EventLog:
    """The events of one team in one store. Thread-safe; appends join an open transaction."""

    def __init__(self, store: TeamStore, team_id: str) -> None:
        self._store = store
        self.team_id = team_id
        self._seqs = store.last_seqs(team_id)
        self._changed = threading.Condition()
        self._version = 0
        self._closed = False
        store.rollback_hooks.append(self._reload)

    def append(self, tool_id: str, payload: Any) -> ToolStateEvent | None:
        """Record a delta of ``tool_id``; returns the event, or None for an empty payload."""
        if is_empty_delta(payload):
            return None
        text = dumps(payload)
        store = self._store
        with store.lock:
            seq = self._seqs.get(tool_id, 0) + 1
            now = time.time()
            store.append_event(self.team_id, tool_id, seq, text, now)
            self._seqs[tool_id] = seq
            store.after_commit(self._wake)
        return ToolStateEvent(
            tool_id=tool_id, seq=seq, payload=json.loads(text), team_id=self.team_id, timestamp=now
        )

    def lifecycle(self, event: str, **details: Any) -> ToolStateEvent | None:
        """Record a lifecycle event (``team_started``, ``actor_stopped``, ...)."""
        return self.append(LIFECYCLE, {"event": event, **details})

    def _reload(self) -> None:
        self._seqs = self._store.last_seqs(self.team_id)

    def _wake(self) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()

    @property
    def version(self) -> int:
        """Bumped on every commit that added events (and on close)."""
        return self._version

    def last_seq(self, tool_id: str) -> int:
        """The ``seq`` of the last recorded event of ``tool_id`` (0 when none)."""
        with self._store.lock:
            return self._seqs.get(tool_id, 0)

    # ---- reading -----------------------------------------------------------------------------

    def entries(self, since: int = 0) -> Iterator[tuple[int, ToolStateEvent]]:
        """``(position, event)`` for every committed event after position ``since``."""
        for position, (_, event) in enumerate(self.rows_after(self.row_of(since)), since + 1):
            yield position, event

    def rows_after(self, row: int) -> Iterator[tuple[int, ToolStateEvent]]:
        """``(storage row, event)`` for every committed event stored after ``row``."""
        while True:
            rows = self._store.read_events(self.team_id, row)
            if not rows:
                return
            for pos, tool_id, seq, payload, timestamp in rows:
                row = pos
                yield pos, self._event(tool_id, seq, payload, timestamp)

    def events(self, since: int = 0) -> list[ToolStateEvent]:
        """Every committed event after the first ``since``, in order."""
        return [event for _, event in self.entries(since)]

    def row_of(self, since: int) -> int:
        """The storage row id of the ``since``-th event of this team (0 for the start)."""
        if since <= 0:
            return 0
        with self._store.lock:
            row = self._store.conn.execute(
                "SELECT pos FROM events WHERE team_id=? ORDER BY pos LIMIT 1 OFFSET ?",
                (self.team_id, since - 1),
            ).fetchone()
            if row is not None:
                return int(row[0])
            sql = "SELECT MAX(pos) FROM events WHERE team_id=?"
            last = self._store.conn.execute(sql, (self.team_id,)).fetchone()
            return int(last[0] or 0)

    def _event(self, tool_id: str, seq: int, payload: str, timestamp: float) -> ToolStateEvent:
        return ToolStateEvent(
            tool_id=tool_id,
            seq=seq,
            payload=json.loads(payload),
            team_id=self.team_id,
            timestamp=timestamp,
        )

    # ---- subscriptions -----------------------------------------------------------------------

    def subscribe(self, callback: EventCallback, since: int = 0) -> Subscription:
        """Deliver every event after ``since`` to ``callback`` (replay, then live), in order,
        on a dedicated thread, until the subscription is closed."""
        return Subscription(self, callback, since)

    def wait_for_change(self, seen: int, timeout: float) -> None:
        """Wait until :attr:`version` differs from ``seen`` (or ``timeout`` passes)."""
        with self._changed:
            self._changed.wait_for(lambda: self._version != seen or self._closed, timeout)

    def close(self) -> None:
        with self._changed:
            self._closed = True
            self._version += 1
            self._changed.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class Subscription:
    """A live feed of a team's events. ``close()`` stops delivery (bounded wait)."""

    def __init__(self, log: EventLog, callback: EventCallback, since: int) -> None:
        self._log = log
        self._callback = callback
        self.position = since
        """How many events of the log this subscription has delivered (or skipped) so far."""
        self._row: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"events-{log.team_id}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            seen = self._log.version
            try:
                delivered = self._deliver()
            except Exception:  # the store closed under us: the team stopped
                if self._log.closed:
                    return
                raise
            if not delivered:
                if self._log.closed:
                    return
                self._log.wait_for_change(seen, 1.0)

    def _deliver(self) -> bool:
        delivered = False
        if self._row is None:
            self._row = self._log.row_of(self.position)
        for row, event in self._log.rows_after(self._row):
            if self._stop.is_set():
                return True
            try:
                self._callback(event)
            except Exception:
                logger.exception("event subscriber failed on %s #%d", event.tool_id, event.seq)
            self._row = row
            self.position += 1
            delivered = True
        return delivered

    def close(self, timeout: float = 2.0) -> None:
        """Stop delivering events; waits at most ``timeout`` for an in-flight callback."""
        self._stop.set()
        self._log._wake()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def drain(self, timeout: float) -> None:
        """After the log closed: let delivery reach the end (bounded), then stop."""
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        self._stop.set()

    @property
    def active(self) -> bool:
        return self._thread.is_alive() and not self._stop.is_set()

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
