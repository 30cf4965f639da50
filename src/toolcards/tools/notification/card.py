"""NotificationTool: an agent schedules a message to itself, delivered after a delay."""

from __future__ import annotations

import math
from typing import Any, ClassVar

from pydantic import Field, StrictInt, field_validator

from toolcards.core.actors import ActorHandle
from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.errors import RetriableError
from toolcards.core.params import BaseToolParam
from toolcards.core.spec import annotate
from toolcards.tools._common.caller import writer_of
from toolcards.tools._common.team import team_observer
from toolcards.tools.notification.actor import NotificationActor
from toolcards.tools.notification.messages import message_type
from toolcards.tools.notification.models import ACTOR_NAME, PendingNotification


class RegisterNotification(BaseToolParam):
    """``register_notification(content, delay_seconds)``: schedule a message to yourself."""


class PendingNotifications(BaseToolParam):
    """``pending_notification(all=False)``: your pending entries (or the team's)."""

    max_lines: int = Field(default=50, ge=1, le=1000)
    """Most entries listed; the rest is counted."""


class CancelNotification(BaseToolParam):
    """``cancel_notification(notification_id)``: cancel one of your own entries."""


def parse_delay(value: Any, limit: int) -> float:
    """``value`` as seconds within 1..``limit``; anything else is a ``RetriableError``."""
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and len(value) <= 32:
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or not 1 <= number <= limit:
        raise RetriableError(
            f"delay_seconds must be a number of seconds from 1 to {limit}, got {value!r:.40}"
        )
    return number


def parse_id(value: Any) -> int:
    """A notification id: a positive int as given, never read out of text (``"#3"``,
    ``"1_0"``), so the id an approver saw is the one cancelled."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RetriableError(f"notification_id must be a positive integer id, got {value!r:.40}")
    return value


class NotificationTool(ToolCard):
    """Self-scheduled notifications: a message to yourself, delivered after a delay.

    Entries belong to who calls (``writer_of``: the governed call's principal, a team member
    being its address), so principals served through one bound card each list, cancel and
    count only their own; the team's ``#NotificationTool`` actor keeps them across a stop and
    resume and delivers each one as a message from ``#NotificationTool`` to its owner.
    """

    max_delay_seconds: int = Field(default=300, ge=1, le=7 * 24 * 3600)
    """Largest delay an agent may schedule."""
    max_pending: int = Field(default=20, ge=1, le=1000)
    """Most pending entries one agent may hold at a time."""
    max_content_chars: int = Field(default=2000, ge=1, le=100_000)
    """Longest notification text."""
    message_type: str = "notification"
    """The registered message type delivered when an entry comes due (``notification``,
    ``plain``, ``reminder``, or one registered by the deployment)."""
    register_notification: bool | RegisterNotification = True
    pending_notification: bool | PendingNotifications = True
    cancel_notification: bool | CancelNotification = True

    # ---- runtime wiring -----------------------------------------------------------------------

    def _actor(self) -> ActorHandle[NotificationActor]:
        return team_observer(self).tool_actor(ACTOR_NAME, NotificationActor)

    def _owner(self) -> str:
        """Who calls (never from tool arguments): the card's member alone would make every
        principal of a served config one owner, reading and cancelling the others' entries."""
        return writer_of(self)

    # ---- capabilities -------------------------------------------------------------------------

    @field_validator("message_type")
    @classmethod
    def _known_message_type(cls, value: str) -> str:
        message_type(value)  # ValueError naming the known types
        return value

    def _register(self, param: RegisterNotification) -> ToolFunc:
        limit, cap, max_chars = self.max_delay_seconds, self.max_pending, self.max_content_chars

        def register_notification(content: str, delay_seconds: StrictInt) -> str:
            """Schedule a message to yourself, delivered after a delay; returns its id.

            Use it to come back to something later (check a long job, follow up if nothing
            happened). The message arrives in your conversation as a notification.

            Args:
                content: The text you will receive.
                delay_seconds: Seconds from now, from 1 to the configured maximum.
            """
            if not isinstance(content, str) or not content.strip():
                raise RetriableError("content must be a non-empty text")
            if len(content) > max_chars:
                raise RetriableError(
                    f"content has {len(content)} characters; at most {max_chars} are allowed"
                )
            delay = parse_delay(delay_seconds, limit)
            registered = self._actor().ask_once(  # a retry of a committed call adds none
                NotificationActor.register,
                self._owner(),
                content.strip(),
                delay,
                cap,
                self.message_type,
            )
            entry = PendingNotification.model_validate(registered)  # recorded: its JSON
            return f"notification #{entry.id} scheduled in {delay:g}s"

        return annotate(register_notification)

    def _pending(self, param: PendingNotifications) -> ToolFunc:
        max_lines = param.max_lines

        def pending_notification(all: bool = False) -> str:
            """List pending notifications with the time left on each.

            Args:
                all: False (default): only yours. True: every team member's, each marked
                    with its owner; you can still cancel only your own.
            """
            widen = all is True or (isinstance(all, str) and all.strip().lower() == "true")
            owner = None if widen else self._owner()
            now, entries = self._actor().ask(NotificationActor.listing, owner)
            if not entries:
                return "no pending notifications"
            lines = [e.line(now, with_owner=widen) for e in entries[:max_lines]]
            if len(entries) > max_lines:
                lines.append(f"... and {len(entries) - max_lines} more")
            return "\n".join(lines)

        return annotate(pending_notification, readonly=True, idempotent=True)

    def _cancel(self, param: CancelNotification) -> ToolFunc:
        def cancel_notification(notification_id: StrictInt) -> str:
            """Cancel one of your own pending notifications.

            Args:
                notification_id: The id returned when it was scheduled.
            """
            wanted = parse_id(notification_id)
            entry = self._actor().ask(NotificationActor.cancel, self._owner(), wanted)
            return f"notification #{entry.id} cancelled"

        return annotate(cancel_notification, destructive=True)

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "register_notification": CardCapability(tool=_register, command=_register),
        "pending_notification": CardCapability(tool=_pending, command=_pending),
        "cancel_notification": CardCapability(tool=_cancel, command=_cancel),
    }
