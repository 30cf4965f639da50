"""Pending notifications as stored (one durable state row per entry)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from toolcards.governance.approvals.view import escaped_line
from toolcards.tools.notification.messages import DEFAULT_KIND, message_type

ACTOR_NAME = "#NotificationTool"
"""The team singleton that holds and delivers every member's notifications."""


class PendingNotification(BaseModel):
    """One scheduled message to ``owner``; ``due_at`` is absolute wall-clock time (epoch s)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: int = Field(ge=1)
    owner: str = Field(min_length=1)
    content: str
    due_at: float = Field(allow_inf_nan=False)
    """Never infinite or NaN: such an entry (a garbled stored row) could never come due."""
    created_at: float = Field(allow_inf_nan=False)
    message_type: str = "notification"
    """The registered message type delivered when the entry comes due."""
    hired_at: float | None = Field(default=None, allow_inf_nan=False)
    """The owner's hire time on the roster when it was scheduled (None: no member then): a
    member hired under the name later is someone else, and is never handed its text."""
    since: int | None = Field(default=None, ge=0)
    """The team log's position when it was scheduled; None in entries of older versions,
    which are delivered to whoever holds the name, as they were."""

    def line(self, now: float, *, with_owner: bool = False) -> str:
        """One listing line: id, time left, (owner), content. The content is escaped before it
        is cut: a member's text read in another member's listing can never show as more
        lines (entries of someone else) or hide what it says."""
        left = max(0, round(self.due_at - now))
        owner = f" {self.owner}" if with_owner else ""
        text = escaped_line(self.content)
        text = text if len(text) <= 120 else text[:117] + "..."
        return f"#{self.id}{owner} in {left}s: {text}"

    def message(self) -> str:
        """The text delivered to the owner when the entry comes due (its message type's
        rendering; an unknown type, e.g. a plugin removed since, falls back to the default)."""
        try:
            cls = message_type(self.message_type)
        except ValueError:
            cls = message_type(DEFAULT_KIND)
        fields = self.model_dump(include={"id", "owner", "content", "created_at", "due_at"})
        return cls.model_validate(fields).render()
