"""Members across processes: a shared roster and mail relayed through the team's event log.

With a store several processes share, each member runs in the process that hired it, and
the roster rows in the store name that process (its holder, with a heartbeat). A message
for a member of another process is written to the log as a ``queued`` event carrying the
whole message; the holder's relay delivers it to the member's mailbox and keeps a per-member
watermark: the log position before the oldest message delivered but not yet processed, or,
with none open, the position the relay has read to (written at hire, on each heartbeat and on
stop: a takeover reads the log from there, not from its start). A process that takes the
member over (a resume, a restarted worker) reads the messages' events from there and skips
what the log says was answered, so every message is handled once, including those queued
while no process held the member or still waiting in a mailbox that died; one whose turn had
begun there (``received``, no ``processed``) is answered with a notice instead of a second
turn, whose tools would act twice. A relayed message is data: it never runs as the host's
slash command (any writer of the team's event table could write the row), so a command runs
only in the process holding the member. A member whose holder stopped cleanly, or whose
heartbeat is older than :data:`STALE_AFTER`, is taken over by the next process that resumes
the team.
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
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from toolcards.core.events import ToolStateEvent
from toolcards.core.threads import background_thread
from toolcards.runtime.events import EventLog, Subscription
from toolcards.runtime.messaging import (
    MAX_MESSAGE_CHARS,
    MESSAGES,
    SENDER_PATTERN,
    MemberMessage,
    truncate,
)
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
        self._marks: dict[str, int] = {}
        """Per member this process holds: the watermark last written."""
        self._at = 0
        """The log position the relay has handled events up to."""
        self._done: set[str] = set()
        """Ids of messages the log showed answered or processed when a member was taken over:
        the subscription skips them when it reaches their ``queued`` event."""
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
            if sub is not None and not sub.active:
                return
            with contextlib.suppress(Exception):
                self._roster.put(f"holder:{process_token()}", time.time())
                with self._lock:
                    self._advance()

    def beat(self) -> None:
        """Beat from now on, as a holder: another process judges this one's claims of names it
        is hiring, and then its members, live by the heartbeat (a first hire whose member took
        long to start had its claim taken for stale, and its name hired again elsewhere)."""
        with self._lock:
            self._start_beat()

    def _start_beat(self) -> None:
        """Write this process's heartbeat row and keep it fresh (under the lock; once)."""
        if self._beat is None:
            self._roster.put(f"holder:{process_token()}", time.time())
            self._beat = background_thread(self._heartbeat, name="relay-beat")
            self._beat.start()

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

    def start(self, member: str, since: int) -> None:
        """Hold ``member`` from log position ``since`` (its watermark; the log's end for a new
        member): deliver what was queued for it since then and the log shows unanswered, then
        the live messages. The first call starts the subscription and the heartbeat; a later
        one catches ``member`` up to where the subscription is (it waits meanwhile)."""
        with self._lock:
            running = self._sub is not None
            self._start_beat()
            start = min(since, self._at) if running else since
            seen = _read(self._log, member, start, self._at if running else None)
            self._write_mark(member, since)
            delivered = self._open.get(member, {})
            for message_id, (position, message) in seen.queued.items():
                if message_id in seen.done or message_id in delivered:
                    continue
                if message_id in seen.started:  # its turn began in a holder that died
                    message = message.model_copy(update={"interrupted": True})
                self._hand(message, position)
            if running:  # the messages the subscription has yet to reach
                self._done |= seen.done & seen.later
                self._interrupted |= (seen.started - seen.done) & seen.later
            else:
                self._at = seen.end
                self._sub = self._log.subscribe(self._on_event, seen.end, on_failure=self._died)
            self._advance()

    def release(self, member: str) -> None:
        """Stop keeping ``member``'s watermark (fired, or free for another process). Takes no
        lock: it is called under the roster's, which delivery takes under the relay's."""
        self._marks.pop(member, None)
        self._open.pop(member, None)

    def mark_new(self, member: str) -> None:
        """Set the watermark of ``member``, hired now in another process (placed on the
        cluster), to the log's end: the process adopting it reads the log from there."""
        self._roster.put(f"seen:{member}", self._log.position)

    def queue(self, message: MemberMessage) -> None:
        """Hand ``message`` to whichever process holds its recipient."""
        self._log.append(MESSAGES, queued_event(message))

    def _on_event(self, event: ToolStateEvent) -> None:
        with self._lock:  # a member being taken over is caught up in between, not during
            if self._sub is None:  # stopped
                return
            position = self._sub.position  # this event's
            self._handle(event, position)
            self._at = position

    def _handle(self, event: ToolStateEvent, position: int) -> None:
        if _is_message(event, "processed"):
            payload = event.payload
            self._settle(str(payload.get("recipient")), str(payload.get("message_id")), position)
            return
        if not _is_message(event, "queued"):
            return
        message = _relayed(event.payload)
        if message is None:
            return
        if message.id in self._done:
            self._done.discard(message.id)
            return
        if message.id in self._interrupted:  # its turn began in a holder that died
            self._interrupted.discard(message.id)
            message = message.model_copy(update={"interrupted": True})
        self._hand(message, position)

    def _hand(self, message: MemberMessage, position: int) -> None:
        """Deliver ``message``, queued at ``position``; it stays open until processed."""
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
        self._write_mark(member, min(pending.values()) - 1 if pending else position)

    def _advance(self) -> None:
        """Move the watermark of each member with no message open to where the relay has
        read: one taken over reads the log from there, not from the position of the last
        message relayed to it (or from the log's start)."""
        for member, mark in list(self._marks.items()):
            if self._at > mark and not self._open.get(member):
                self._write_mark(member, self._at)

    def _write_mark(self, member: str, mark: int) -> None:
        self._marks[member] = mark
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
        with self._lock, contextlib.suppress(Exception):
            self._advance()
        with contextlib.suppress(Exception):
            self._roster.delete(f"holder:{process_token()}")


@dataclass
class _Seen:
    """What the messages' events after a member's watermark say (read streaming)."""

    end: int
    """The position of the last event read."""
    queued: dict[str, tuple[int, MemberMessage]] = field(default_factory=dict)
    """The member's messages queued up to the subscription's position, and where."""
    later: set[str] = field(default_factory=set)
    """The ids of messages queued after it (any member's)."""
    done: set[str] = field(default_factory=set)
    started: set[str] = field(default_factory=set)


def _read(log: EventLog, member: str, since: int, through: int | None) -> _Seen:
    """Read the log after ``since`` once, keeping only what taking ``member`` over needs: the
    team's other events (most of the log) are skipped as they stream by."""
    seen = _Seen(end=since)
    for position, event in log.entries(since):
        seen.end = position
        if event.tool_id != MESSAGES:
            continue
        handled = _handled(event)
        if handled is not None:
            seen.done.add(handled)
        elif _is_message(event, "received"):
            seen.started.add(str(event.payload.get("message_id")))
        elif _is_message(event, "queued"):
            message = _relayed(event.payload)
            if message is None:
                continue
            if through is not None and position > through:
                seen.later.add(message.id)
            elif message.recipient == member:
                seen.queued[message.id] = (position, message)
    return seen


def _relayed(payload: dict[str, Any]) -> MemberMessage | None:
    """The message of a ``queued`` event, as data: whether the host sent it or asked for its
    slash command (which runs with no policy, approval or audit) and the run waiting for it
    never come from the row, which any writer of the team's event table could have written."""
    try:
        message = MemberMessage.model_validate(payload.get("message"))
    except ValidationError as exc:
        log.warning("a queued message in the event log is not one (%d errors)", exc.error_count())
        return None
    if not SENDER_PATTERN.fullmatch(message.sender):  # as a send checks it
        log.warning("a queued message in the event log names no sender a send allows")
        return None
    content = truncate(message.content, MAX_MESSAGE_CHARS)  # as a send cuts it
    forced = {"from_host": False, "command": False, "caller_run": None, "content": content}
    return message.model_copy(update=forced)


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
