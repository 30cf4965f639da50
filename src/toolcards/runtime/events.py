"""The team event log: append-only, per-tool gap-free ``seq``, replay then live subscriptions.

A position in the log counts the team's events: ``events(since=n)`` gives every event after
the ``n``-th, so a client that has seen ``n`` events resumes with ``since=n``. Positions and
seqs are assigned by the store, so they stay gap-free when several processes write one team
(PostgreSQL). Old events may be compacted (:meth:`EventLog.compact`): a compacted tool's
newest removed event is kept as a ``{"compacted": {"through_seq": n}}`` marker, so a reader
sees exactly what was compacted and its seqs still have no gap.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

from toolcards.core import outside_json
from toolcards.core.events import (
    EVENT_PAYLOADS,
    LIFECYCLE_DISPLAY,
    MESSAGE_DISPLAY,
    TOOL_STATE,
    ToolStateEvent,
    new_event_id,
)
from toolcards.core.threads import background_thread
from toolcards.runtime.host_events import current_listener
from toolcards.stores.base import (
    LIFECYCLE_TOOL,
    Compaction,
    DatabaseUnavailable,
    EventRow,
    Store,
    dumps,
)

logger = logging.getLogger(__name__)

LIFECYCLE = LIFECYCLE_TOOL
"""The ``tool_id`` of lifecycle events (team and actor started/stopped)."""

MESSAGES = "messages"
"""The ``tool_id`` of message telemetry in the team event log."""

_DISPLAY_TYPES = {LIFECYCLE: LIFECYCLE_DISPLAY, MESSAGES: MESSAGE_DISPLAY}

_BUILTIN_PAYLOAD_MODULES = (
    "toolcards.tools.planning.models",
    "toolcards.tools.knowledge_graph.models",
)
"""Modules of the built-in cards' payload models: imported (from this fixed list) when a
stored tag names one of them, so a process that never bound the card still reads them typed."""

_OLD_ROW_IDS = uuid.UUID("6b1f0c1e-4f3a-5d0e-9a57-2b7c1d9e8f10")
"""Namespace of the ids given to rows stored before events had one (stable per position)."""

RECENT_EVENTS = 500
"""Events :meth:`EventLog.recent` reads by default (activity views: the dashboard, the
``team_activity`` tool)."""


def display_type_of(tool_id: str) -> str:
    """The display type an event of ``tool_id`` gets unless its emitter names one."""
    return _DISPLAY_TYPES.get(tool_id, TOOL_STATE)


def restore_payload(tag: str | None, data: Any) -> Any:
    """A stored payload as its registered model (built-in card models load on first use)."""
    if tag and tag.split(":", 1)[0] in _BUILTIN_PAYLOAD_MODULES:
        _load_builtin_payloads()
    return EVENT_PAYLOADS.restore(tag, data)


@functools.cache
def _load_builtin_payloads() -> None:
    for module in _BUILTIN_PAYLOAD_MODULES:
        importlib.import_module(module)


EventCallback = Callable[[ToolStateEvent], Any]

RETRY_FIRST = 0.1
RETRY_MAX = 5.0
"""A subscription whose store is unavailable retries after these many seconds, doubling."""


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

    def __init__(self, store: Store, team_id: str) -> None:
        self._store = store
        self.team_id = team_id
        self._changed = threading.Condition()
        self._version = 0
        self._closed = False
        self._unwatch: Callable[[], None] | None = None
        """Stops the calls on other processes' commits; watched from the first subscription
        on (a process that never waits on the log takes no notice of every commit)."""

    def append(
        self,
        tool_id: str,
        payload: Any,
        *,
        sender: str | None = None,
        display_type: str | None = None,
        event_id: str | None = None,
    ) -> ToolStateEvent | None:
        """Record a delta of ``tool_id``; returns the event, or None for an empty payload.

        A payload that is an instance of a registered model (``EVENT_PAYLOADS``) is stored
        with its tag and read back as that model. ``sender`` is who caused it; the display
        type defaults by tool (:func:`display_type_of`); the id is fresh unless given.
        """
        if is_empty_delta(payload):
            return None
        tag = EVENT_PAYLOADS.tag_of(payload)
        text = dumps(payload)
        now = time.time()
        shown = display_type or display_type_of(tool_id)
        eid = event_id or new_event_id()
        store = self._store
        with store.lock:
            _, seq = store.append_event(
                self.team_id,
                tool_id,
                text,
                tag,
                now,
                event_id=eid,
                sender=sender,
                display_type=shown,
            )
            store.after_commit(self.wake)
        event = ToolStateEvent(
            tool_id=tool_id,
            seq=seq,
            payload=restore_payload(tag, json.loads(text)),
            team_id=self.team_id,
            timestamp=now,
            id=eid,
            sender=sender,
            display_type=shown,
        )
        listener = current_listener()
        if listener is not None:  # a host observer's call: it hears the event once committed
            store.after_commit(functools.partial(listener, event))
        return event

    def lifecycle(self, event: str, **details: Any) -> ToolStateEvent | None:
        """Record a lifecycle event (``team_started``, ``actor_stopped``, ...)."""
        return self.append(LIFECYCLE, {"event": event, **details})

    def wake(self) -> None:
        with self._changed:
            self._version += 1
            self._changed.notify_all()

    @property
    def version(self) -> int:
        """Bumped on every commit of this process that added events (and on close)."""
        return self._version

    def last_seq(self, tool_id: str) -> int:
        """The ``seq`` of the last recorded event of ``tool_id`` (0 when none)."""
        return self._store.last_seq(self.team_id, tool_id)

    @property
    def position(self) -> int:
        """How many events the team has recorded so far (the last position)."""
        return self._store.last_position(self.team_id)

    # ---- reading -----------------------------------------------------------------------------

    def entries(self, since: int = 0) -> Iterator[tuple[int, ToolStateEvent]]:
        """``(position, event)`` for every committed event after position ``since``."""
        after = max(since, 0)
        while True:
            rows = self._store.read_events(self.team_id, after)
            if not rows:
                return
            for row in rows:
                after = row.position
                yield row.position, self._event(row)

    def events(self, since: int = 0) -> list[ToolStateEvent]:
        """Every committed event after position ``since``, in order."""
        return [event for _, event in self.entries(since)]

    def recent(self, count: int = RECENT_EVENTS) -> list[ToolStateEvent]:
        """The last ``count`` committed events, in order: what views of the team's activity
        read (the whole log grows without end)."""
        return self.events(max(0, self.position - count))

    def _event(self, row: EventRow) -> ToolStateEvent:
        """A stored row as an event; a row from before envelopes gets a stable id derived
        from its position and the display type of its tool. A payload that does not decode
        (bad text, nesting too deep: written into the store by hand) reads as an
        ``{"event": "unreadable", "seq": n}`` marker, so one bad row fails no reader."""
        try:
            payload = restore_payload(row.payload_type, outside_json.loads(row.payload))
        except ValueError as exc:
            logger.warning(
                "event %s #%d of %s at position %d is unreadable: %s",
                row.tool_id,
                row.seq,
                self.team_id,
                row.position,
                exc,
            )
            payload = {"event": "unreadable", "seq": row.seq}
        return ToolStateEvent(
            tool_id=row.tool_id,
            seq=row.seq,
            payload=payload,
            team_id=self.team_id,
            timestamp=row.timestamp,
            id=row.event_id or uuid.uuid5(_OLD_ROW_IDS, f"{self.team_id}/{row.position}").hex,
            sender=row.sender,
            display_type=row.display_type or display_type_of(row.tool_id),
        )

    def compact(
        self, *, keep_per_tool: int | None = None, older_than: float | None = None
    ) -> list[Compaction]:
        """Drop old events of every tool (never lifecycle ones): all but the newest
        ``keep_per_tool`` of each tool, and/or those older than ``older_than`` seconds.

        The tools' state is untouched: only the history of changes goes. Each compacted tool
        keeps a marker event at the newest removed seq.
        """
        if keep_per_tool is not None and keep_per_tool < 0:
            raise ValueError("keep_per_tool must be 0 or more")
        before = None if older_than is None else time.time() - older_than
        return self._store.compact_events(self.team_id, keep_per_tool=keep_per_tool, before=before)

    # ---- subscriptions -----------------------------------------------------------------------

    def subscribe(
        self,
        callback: EventCallback,
        since: int = 0,
        *,
        on_failure: Callable[[BaseException], Any] | None = None,
    ) -> Subscription:
        """Deliver every event after ``since`` to ``callback`` (replay, then live), in order,
        on a dedicated thread, until the subscription is closed. While the store is
        unavailable the subscription retries (backing off) and resumes after the last event
        it delivered; ``on_failure`` is called if it ends on any other error."""
        with self._changed:
            if self._unwatch is None and not self._closed:  # commits of other processes
                self._unwatch = self._store.watch(self.team_id, self.wake)
        return Subscription(self, callback, since, on_failure)

    def wait_for_change(self, seen: int, timeout: float) -> None:
        """Wait until :attr:`version` differs from ``seen`` (a commit of this process, or of
        another one on a shared store) or ``timeout`` passes."""
        with self._changed:
            self._changed.wait_for(lambda: self._version != seen or self._closed, timeout)

    def close(self) -> None:
        with self._changed:
            unwatch, self._unwatch = self._unwatch, None
        if unwatch is not None:
            unwatch()
        with self._changed:
            self._closed = True
            self._version += 1
            self._changed.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


class Subscription:
    """A live feed of a team's events. ``close()`` stops delivery (bounded wait).

    When the store is unavailable (a database restart), the feed waits and reads again from
    after the last event it delivered, backing off from :data:`RETRY_FIRST` to
    :data:`RETRY_MAX` seconds: every event is delivered once, in order, across the outage.
    Any other error ends it (``error`` holds it; ``on_failure`` is told).
    """

    def __init__(
        self,
        log: EventLog,
        callback: EventCallback,
        since: int,
        on_failure: Callable[[BaseException], Any] | None = None,
    ) -> None:
        self._log = log
        self._callback = callback
        self._on_failure = on_failure
        self.position = since
        """The position of the last event delivered (or skipped) so far; during a callback,
        the position of the event being delivered."""
        self.error: BaseException | None = None
        """What ended the subscription, when an error did."""
        self._stop = threading.Event()
        self._thread = background_thread(self._run, name=f"events-{log.team_id}")
        self._thread.start()

    def _run(self) -> None:
        delay = RETRY_FIRST
        while not self._stop.is_set():
            seen = self._log.version
            try:
                delivered = self._deliver()
            except DatabaseUnavailable as exc:
                if self._log.closed:
                    return
                if delay == RETRY_FIRST:
                    logger.warning("events of %s: %s", self._log.team_id, exc)
                self._stop.wait(delay)
                delay = min(delay * 2, RETRY_MAX)
                continue
            except Exception as exc:
                if self._log.closed:  # the store closed under us: the team stopped
                    return
                self._failed(exc)
                return
            if delay != RETRY_FIRST:
                logger.info("events of %s: the store answers again", self._log.team_id)
                delay = RETRY_FIRST
            if not delivered:
                if self._log.closed:  # what was committed before the close is read once more
                    self._last_delivery()
                    return
                self._log.wait_for_change(seen, 1.0)

    def _last_delivery(self) -> None:
        """Deliver the events committed before the log closed: the close comes after the
        team's last event (``team_stopped``), which an empty read just before it missed."""
        try:
            self._deliver()
        except Exception as exc:  # the store went with the team: nothing more to read
            logger.debug("events of %s after the close: %s", self._log.team_id, exc)

    def _failed(self, exc: Exception) -> None:
        self.error = exc
        logger.error(
            "event subscription of %s ended after position %d: %s: %s",
            self._log.team_id,
            self.position,
            type(exc).__name__,
            exc,
        )
        if self._on_failure is not None:
            try:
                self._on_failure(exc)
            except Exception:
                logger.exception("on_failure of an event subscription failed")

    def _deliver(self) -> bool:
        delivered = False
        for position, event in self._log.entries(self.position):
            if self._stop.is_set():
                return True
            self.position = position  # the callback sees the position of its event
            try:
                self._callback(event)
            except Exception:
                logger.exception("event subscriber failed on %s #%d", event.tool_id, event.seq)
            delivered = True
        return delivered

    def close(self, timeout: float = 2.0) -> None:
        """Stop delivering events; waits at most ``timeout`` for an in-flight callback."""
        self._stop.set()
        self._log.wake()
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
