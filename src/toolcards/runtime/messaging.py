"""Member messages and their telemetry, and "who is busy on what" derived from the event log.

Every message between members (or from outside the team) is recorded in the team event log
under the tool id :data:`MESSAGES`, with these payloads (``text`` cut to :data:`EVENT_TEXT_CHARS`):

- ``{"event": "sent", "message_id", "sender", "recipient", "text", "reply_to"}`` when a message
  is posted to a member's mailbox (replies included);
- ``{"event": "received", "message_id", "sender", "recipient", "text"}`` when the member starts
  handling it;
- ``{"event": "processed", "message_id", "recipient", "ok", "reply_id", "command"}`` when it is
  done (``ok`` is False when the model failed; the reply then says why).

A member is busy while a ``received`` has no ``processed``. Members handle one message at a
time, so a member with more than one open message is reported as ``suspect``.
"""

from __future__ import annotations

import contextvars
import re
import time
import uuid
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from toolcards.core.errors import RetriableError
from toolcards.core.events import ToolStateEvent
from toolcards.runtime.events import LIFECYCLE
from toolcards.runtime.events import MESSAGES as MESSAGES  # re-exported: its old home

MAX_MESSAGE_CHARS = 64_000
"""Longer message contents are cut to this size (with a marker) when posted."""

EVENT_TEXT_CHARS = 2_000
"""Message text kept in telemetry events."""

USER = "user"
"""The default sender of messages from outside the team."""

SENDER_PATTERN = re.compile(r"[^\s\x00-\x1f]{1,100}")
"""What a message's sender may be (one visible word)."""

current_member: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "toolcards_current_member", default=None
)
"""The member whose message is being handled in this context (tool calls inherit it)."""


def truncate(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters, with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    widest = len(f"\n[... {len(text)} more characters cut]")  # the marker never outgrows this
    keep = max(limit - widest, 0)
    return text[:keep] + f"\n[... {len(text) - keep} more characters cut]"


class MemberMessage(BaseModel):
    """One message in a member's mailbox."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:16])
    sender: str
    recipient: str
    content: str
    reply_to: str | None = None
    """The id of the message this one answers (replies are never answered automatically)."""
    route_reply: bool = False
    """Post the member's answer back to the sender's mailbox (member-to-member messages)."""
    awaited: bool = False
    """A sender in another process waits for the answer (it is logged in full)."""
    from_host: bool = False
    """The host's code posted it (``Team.post``/``Team.send``: a human's or an orchestrator's
    line), outside any governed call or member's turn: its model reads it bare."""
    command: bool = False
    """The host's code asked for a slash command (``command=True``, and ``from_host``): only
    such a message may run one. Text alone never does, as a tool that hands its model's words
    on with ``team.send`` may run in no context toolcards can see."""
    caller_run: str | None = None
    """The token of the run whose delegating tool sent the message and waits for the answer
    (``toolcards.core.nesting``): approvals the member's calls need may be asked of that run,
    when it is in this process."""
    interrupted: bool = False
    """A process that held the recipient stopped during its turn on this message (the log has
    its ``received`` and no ``processed``): the taking-over process answers it with a notice
    and never runs it again, as the turn's tools may have acted."""
    created_at: float = Field(default_factory=time.time)


def _message_event(event: str, message: MemberMessage) -> dict[str, Any]:
    return {
        "event": event,
        "message_id": message.id,
        "sender": message.sender,
        "recipient": message.recipient,
        "text": truncate(message.content, EVENT_TEXT_CHARS),
    }


def sent_event(message: MemberMessage) -> dict[str, Any]:
    return {**_message_event("sent", message), "reply_to": message.reply_to}


def received_event(message: MemberMessage) -> dict[str, Any]:
    return _message_event("received", message)


def processed_event(
    message: MemberMessage, *, ok: bool, reply_id: str | None, command: bool
) -> dict[str, Any]:
    return {
        "event": "processed",
        "message_id": message.id,
        "recipient": message.recipient,
        "ok": ok,
        "reply_id": reply_id,
        "command": command,
    }


class MemberActivity(BaseModel):
    """What one member is doing, derived from the event log."""

    name: str
    busy: bool = False
    task: str | None = None
    """The text of the message being handled (cut to ``max_task_chars``)."""
    sender: str | None = None
    message_id: str | None = None
    started_at: float | None = None
    suspect: bool = False
    """More than one message open at once: the telemetry is inconsistent."""
    handled: int = 0
    """Messages this member finished handling."""


def member_activity(
    events: Iterable[ToolStateEvent],
    *,
    members: Iterable[str] | None = None,
    max_task_chars: int = 200,
    stale_after: float | None = None,
    now: float | None = None,
) -> dict[str, MemberActivity]:
    """Per member: busy or idle, and on what, from ``events`` (a team's log, in order).

    ``members`` restricts the answer to those names (each listed one appears, idle if silent);
    otherwise every member seen hired, minus those fired. A team restart closes every open
    message (nothing in flight survives it). With ``stale_after``, messages open longer than
    that many seconds (at ``now``) are dropped rather than reported as work.
    """
    open_msgs: dict[str, dict[str, dict[str, Any]]] = {}
    handled: dict[str, int] = {}
    hired: dict[str, None] = {}
    for event in events:
        payload = event.payload if isinstance(event.payload, dict) else {}
        kind = payload.get("event")
        if event.tool_id == LIFECYCLE:
            if kind == "team_started":
                open_msgs.clear()
            elif kind == "member_hired":
                hired[str(payload.get("name"))] = None
            elif kind == "member_fired":
                name = str(payload.get("name"))
                hired.pop(name, None)
                open_msgs.pop(name, None)
            continue
        if event.tool_id != MESSAGES:
            continue
        who = str(payload.get("recipient"))
        if kind == "received":
            entry = {**payload, "at": event.timestamp}
            open_msgs.setdefault(who, {})[str(payload.get("message_id"))] = entry
        elif kind == "processed":
            open_msgs.get(who, {}).pop(str(payload.get("message_id")), None)
            handled[who] = handled.get(who, 0) + 1
    names = list(members) if members is not None else list(hired)
    clock = time.time() if now is None else now
    out: dict[str, MemberActivity] = {}
    for name in names:
        pending = list(open_msgs.get(name, {}).values())
        if stale_after is not None:
            pending = [p for p in pending if clock - (p["at"] or clock) <= stale_after]
        activity = MemberActivity(name=name, handled=handled.get(name, 0))
        if pending:
            first = pending[0]
            activity = activity.model_copy(
                update={
                    "busy": True,
                    "task": truncate(str(first.get("text", "")), max_task_chars),
                    "sender": first.get("sender"),
                    "message_id": first.get("message_id"),
                    "started_at": first["at"],
                    "suspect": len(pending) > 1,
                }
            )
        out[name] = activity
    return out


class MemberInfo(BaseModel):
    """One row of the roster."""

    name: str
    role: str
    busy: bool
    hired_at: float


NAME_PATTERN = re.compile(r"@[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def member_name(name: object) -> str:
    """The roster name a tool argument stands for (``alice`` is ``@alice``, as :meth:`resolve`
    finds it), put in place before a policy decides (``PathArgs(member_name, fields=...)``).
    Anything else, blank space or a hidden character around a name included, is refused, never
    cleaned: a rule on ``@boss-1`` is decided on the name the tool acts on."""
    wanted = name if not isinstance(name, str) or name.startswith("@") else f"@{name}"
    if not isinstance(wanted, str) or not NAME_PATTERN.fullmatch(wanted):
        raise RetriableError(f"{name!r:.80} is not a member name such as @researcher-1")
    return wanted
