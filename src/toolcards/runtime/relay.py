"""Members across processes: a shared roster and mail relayed through the team's event log.

With a store several processes share, each member runs in the process that hired it, and
the roster rows in the store name that process (its holder, with a heartbeat). A message
for a member of another process is written to the log as a ``queued`` event carrying the
whole message; the holder's relay delivers it to the member's mailbox and keeps a per-member
watermark: the log position before the oldest message delivered but not yet processed. A
process that takes the member over (a resume, a restarted worker) replays from there and
skips what the log says was answered, so every message is handled once, including those
queued while no process held the member or still waiting in a mailbox that died; one whose
turn had begun there (``received``, no ``processed``) is answered with a notice instead of a
second turn, whose tools would act twice. A member
whose holder stopped cleanly, or whose heartbeat is older than :data:`STALE_AFTER`, is taken
over by the next process that resumes the team.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from toolcards.core.events import ToolStateEvent
from toolcards.core.threads import background_thread
from toolcards.runtime.events import EventLog, Subscription
from toolcards.runtime.messaging import MESSAGES, MemberMessage
from toolcards.stores.base import StateNamespace, StoreClosedError

log = logging.getLogger(__name__)

HEARTBEAT = 10.0
"""Seconds between a holder's heartbeats."""

STALE_AFTER = 45.0
"""A holder silent this long is presumed gone; its members may be taken over."""

_token: tuple[int, str] | None = None


def process_token() -> str:
    """This process's holder token; a forked child makes its own (a token made when the
    module was imported would be its parent's, and the two would take each other's
    members for their own)."""
    global _token
    pid = os.getpid()
    if _token is None or _token[0] != pid:
        _token = (pid, f"{socket.gethostname()}:{pid}:{uuid.uuid4().hex[:8]}")
    return _token[1]


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
        self._open: dict[str, dict[str, int]] = {}
        """Per member: message id -> log position, delivered and not processed yet."""
        self._done: set[str | None] = set()
        """Ids of messages the log showed answered or processed when delivery started."""
        self._interrupted: set[str] = set()
        """Ids of messages whose turn the log showed begun and never ended then: answered with
        a notice, not run a second time."""

    # ---- holders -----------------------------------------------------------------------------

    def holder_alive(self, token: str | None) -> bool:
        """True when ``token`` is this process or a holder with a fresh heartbeat."""
        if not token:
            return False
        if token == process_token():
            return True
        beat = self._roster.get(f"holder:{token}")
        return isinstance(beat, (int, float)) and time.time() - beat < STALE_AFTER

    def holder_gone(self, token: str | None) -> bool:
        """True when no process delivers under ``token``: none is named, or its heartbeat row
        is gone (it stopped, or its relay died). One killed outright leaves the row, and is
        presumed gone only when :meth:`holder_alive` finds it stale."""
        if not token:
            return True
        return token != process_token() and self._roster.get(f"holder:{token}") is None

    def _heartbeat(self) -> None:
        """Beat while the relay delivers: a relay that died stops beating (and says so), so
        its members are taken over instead of waiting for ever."""
        while not self._stop.wait(HEARTBEAT):
            sub = self._sub
            if sub is None or not sub.active:
                return
            with contextlib.suppress(Exception):
                self._roster.put(f"holder:{process_token()}", time.time())

    def _died(self, exc: BaseException) -> None:
        """The relay's subscription ended on an error: stop beating, free the members."""
        log.error(
            "the member relay of %s stopped (%s); its members are free to be taken over",
            process_token(),
            type(exc).__name__,
        )
        self._stop.set()
        with contextlib.suppress(Exception):
            self._roster.delete(f"holder:{process_token()}")

    # ---- delivery ----------------------------------------------------------------------------

    def start(self, since: int) -> None:
        """Deliver queued messages after position ``since`` (and live ones) to local members."""
        with self._lock:
            if self._sub is not None:
                return
            self._roster.put(f"holder:{process_token()}", time.time())
            seen = [event for _, event in self._log.entries(since)]
            self._done = {_handled(event) for event in seen}
            started = {str(e.payload.get("message_id")) for e in seen if _is_message(e, "received")}
            self._interrupted = started - self._done
            self._sub = self._log.subscribe(self._on_event, since, on_failure=self._died)
            self._beat = background_thread(self._heartbeat, name="relay-beat")
            self._beat.start()

    def queue(self, message: MemberMessage) -> None:
        """Hand ``message`` to whichever process holds its recipient."""
        self._log.append(MESSAGES, queued_event(message))

    def _on_event(self, event: ToolStateEvent) -> None:
        position = self._sub.position if self._sub is not None else 0  # this event's
        if _is_message(event, "processed"):
            payload = event.payload
            self._settle(str(payload.get("recipient")), str(payload.get("message_id")), position)
            return
        if not _is_message(event, "queued"):
            return
        message = MemberMessage.model_validate(event.payload["message"])
        if message.id in self._done:
            self._done.discard(message.id)
            return
        if message.id in self._interrupted:  # its turn began in a holder that died
            self._interrupted.discard(message.id)
            message = message.model_copy(update={"interrupted": True})
        if self._deliver(message):
            self._open.setdefault(message.recipient, {})[message.id] = position
            self._settle(message.recipient, None, position)

    def _settle(self, member: str, processed: str | None, position: int) -> None:
        """Move ``member``'s watermark to before its oldest open message (or to here)."""
        pending = self._open.get(member)
        if pending is None:
            return
        if processed is not None:
            pending.pop(processed, None)
        mark = min(pending.values()) - 1 if pending else position
        with contextlib.suppress(StoreClosedError):
            self._roster.put(f"seen:{member}", mark)

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
            self._roster.delete(f"holder:{process_token()}")


def _is_message(event: ToolStateEvent, kind: str) -> bool:
    payload = event.payload
    return event.tool_id == MESSAGES and isinstance(payload, dict) and payload.get("event") == kind


def _handled(event: ToolStateEvent) -> str | None:
    """The id of the message ``event`` shows handled: its answer, or its processed record."""
    if _is_message(event, "processed"):
        return str(event.payload.get("message_id"))
    if _is_message(event, "sent") and event.payload.get("reply_to"):
        return str(event.payload["reply_to"])
    return None
