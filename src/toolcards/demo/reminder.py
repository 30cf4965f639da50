"""The demo's reminder: whether the notification the lead registered was delivered in this
run, read from the team's event log."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolcards.runtime import Team


def delivered_reminder(team: Team, timeout: float = 15.0) -> tuple[str, str] | None:
    """The reminder's recipient and text if it is delivered during this run (read from the
    event log, from this run's ``team_started`` on: one delivered in an earlier run is not
    news). One still pending when the first run stopped is overdue on resume and fires on the
    first tick, so a resumed run waits (bounded) for it. One that fired in this run is awaited
    until its member has taken it (bounded), whatever ``timeout`` says: stopped in between,
    it would be news to neither run."""
    deadline = time.monotonic() + timeout
    taken_by = time.monotonic() + 15.0
    while True:
        events = team.events()
        start = max(
            (i for i, e in enumerate(events) if _payload(e).get("event") == "team_started"),
            default=0,
        )
        delivered: dict[str, Any] = {}
        for event in events[start:]:
            payload = _payload(event)
            if payload.get("event") == "received" and payload.get("sender") == "#NotificationTool":
                delivered = payload
            elif (
                delivered
                and payload.get("event") == "processed"
                and payload.get("message_id") == delivered.get("message_id")
            ):
                return str(delivered.get("recipient")), str(delivered["text"])
        if _settled_before(events, start):
            return None
        now = time.monotonic()
        if now >= deadline and not (now < taken_by and _fired_since(events, start)):
            return None
        time.sleep(0.1)


def _fired_since(events: list[Any], start: int) -> bool:
    """True when a reminder fired from ``start`` on (its delivery is under way)."""
    return any(e.tool_id == "#NotificationTool" and "fired" in _payload(e) for e in events[start:])


def _payload(event: Any) -> dict[str, Any]:
    return event.payload if isinstance(event.payload, dict) else {}


def _settled_before(events: list[Any], start: int) -> bool:
    """True when every reminder was fired, cancelled or dropped before ``start`` (nothing
    will arrive in this run, so there is nothing to wait for)."""
    registered = sum(
        1 for e in events if e.tool_id == "#NotificationTool" and "registered" in _payload(e)
    )
    ended = sum(
        1
        for e in events[:start]
        if e.tool_id == "#NotificationTool"
        and any(k in _payload(e) for k in ("fired", "cancelled", "dropped"))
    )
    return ended >= registered
