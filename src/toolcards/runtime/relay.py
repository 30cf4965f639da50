"""Members across processes: a shared roster and mail relayed through the team's event log.

With a store several processes share, each member runs in the process that hired it, and
the roster rows in the store name that process (its holder, with a heartbeat). A message
for a member of another process is written to the log as a ``queued`` event carrying the
whole message; the holder's relay delivers it to the member's mailbox, once, and keeps a
per-member watermark so messages queued while no process held the member are delivered when
one resumes it. A member whose holder stopped cleanly, or whose heartbeat is older than
:data:`STALE_AFTER`, is taken over by the next process that resumes the team.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from toolcards.core.events import ToolStateEvent
from toolcards.runtime.events import EventLog, Subscription
from toolcards.runtime.messaging import MESSAGES, MemberMessage
from toolcards.runtime.store_base import StateNamespace, StoreClosedError

HEARTBEAT = 10.0
"""Seconds between a holder's heartbeats."""

STALE_AFTER = 45.0
"""A holder silent this long is presumed gone; its members may be taken over."""

TOKEN = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
"""This process's holder token."""


def queued_event(message: MemberMessage) -> dict[str, Any]:
    """The log payload that hands ``message`` to the process holding its recipient."""
    return {"event": "queued", "message": message.model_dump(mode="json")}


class Relay:
    """Delivers messages queued for the members this process holds; keeps its heartbeat."""

    def __init__(
        self,
        log: EventLog,
        roster: StateNamespace,
        deliver: Callable[[MemberMessage], bool],
    ) -> None:
        self._log = log
        self._roster = roster
        self._deliver = deliver
        self._lock = threading.Lock()
        self._sub: Subscription | None = None
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    # ---- holders -----------------------------------------------------------------------------

    def holder_alive(self, token: str | None) -> bool:
        """True when ``token`` is this process or a holder with a fresh heartbeat."""
        if not token:
            return False
        if token == TOKEN:
            return True
        beat = self._roster.get(f"holder:{token}")
        return isinstance(beat, (int, float)) and time.time() - beat < STALE_AFTER

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT):
            with contextlib.suppress(Exception):
                self._roster.put(f"holder:{TOKEN}", time.time())

    # ---- delivery ----------------------------------------------------------------------------

    def start(self, since: int) -> None:
        """Deliver queued messages after position ``since`` (and live ones) to local members."""
        with self._lock:
            if self._sub is not None:
                return
            self._roster.put(f"holder:{TOKEN}", time.time())
            self._sub = self._log.subscribe(self._on_event, since)
            self._beat = threading.Thread(target=self._heartbeat, name="relay-beat", daemon=True)
            self._beat.start()

    def queue(self, message: MemberMessage) -> None:
        """Hand ``message`` to whichever process holds its recipient."""
        self._log.append(MESSAGES, queued_event(message))

    def _on_event(self, event: ToolStateEvent) -> None:
        payload = event.payload
        if event.tool_id != MESSAGES or not isinstance(payload, dict):
            return
        if payload.get("event") != "queued":
            return
        message = MemberMessage.model_validate(payload["message"])
        if self._deliver(message):
            with contextlib.suppress(StoreClosedError):
                self._roster.put(f"seen:{message.recipient}", self._sub_position())

    def _sub_position(self) -> int:
        return self._sub.position if self._sub is not None else 0

    def watermark(self, member: str) -> int:
        """The log position up to which ``member``'s queued messages were delivered."""
        found = self._roster.get(f"seen:{member}")
        return int(found) if isinstance(found, int) else 0

    def stop(self) -> None:
        """Stop delivering; mark this process's heartbeat gone (its members are free)."""
        self._stop.set()
        with self._lock:
            sub, self._sub = self._sub, None
        if sub is not None:
            sub.close()
        with contextlib.suppress(Exception):
            self._roster.delete(f"holder:{TOKEN}")
