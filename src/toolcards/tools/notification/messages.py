"""The message a due notification delivers, chosen by the deployment by name.

A message type is a :class:`NotificationMessage` subclass registered under its ``kind``
(``register_message_type``, or the ``toolcards.notification_messages`` entry-point group);
``NotificationTool(message_type="...")`` names it and is validated when the card is loaded.
Names never resolve to an import of a path read from data.
"""

from __future__ import annotations

import threading
from typing import ClassVar, cast

from pydantic import BaseModel, ConfigDict

from toolcards._lazy import entry_point_classes

ENTRY_POINT_GROUP = "toolcards.notification_messages"
DEFAULT_KIND = "notification"


class NotificationMessage(BaseModel):
    """What the owner of a due entry receives. Subclass it and override :meth:`render`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ClassVar[str] = DEFAULT_KIND
    """The name deployments use for this type."""

    id: int
    owner: str
    content: str
    created_at: float
    due_at: float

    def render(self) -> str:
        """The text delivered to the owner's mailbox."""
        return f"[notification #{self.id}] {self.content}"


class PlainMessage(NotificationMessage):
    """Only the scheduled text, as the member wrote it."""

    kind: ClassVar[str] = "plain"

    def render(self) -> str:
        return self.content


class ReminderMessage(NotificationMessage):
    """A reminder naming when it was set, for members that act on time."""

    kind: ClassVar[str] = "reminder"

    def render(self) -> str:
        waited = max(0, round(self.due_at - self.created_at))
        return f"Reminder #{self.id} (set {waited}s ago): {self.content}"


_lock = threading.Lock()
_types: dict[str, type[NotificationMessage]] = {
    cls.kind: cls for cls in (NotificationMessage, PlainMessage, ReminderMessage)
}
_entry_points_loaded = False


def register_message_type(cls: type[NotificationMessage]) -> type[NotificationMessage]:
    """Make ``cls`` available under ``cls.kind`` (usable as a class decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, NotificationMessage)):
        raise TypeError(f"a notification message type subclasses NotificationMessage: {cls!r}")
    with _lock:
        _types[cls.kind] = cls
    return cls


def message_types() -> list[str]:
    """Every known message type name."""
    _load_entry_points()
    with _lock:
        return sorted(_types)


def message_type(kind: str) -> type[NotificationMessage]:
    """The class registered under ``kind``; ValueError listing the known names otherwise."""
    with _lock:
        found = _types.get(kind)
    if found is None:
        _load_entry_points()
        with _lock:
            found = _types.get(kind)
    if found is None:
        raise ValueError(
            f"unknown notification message type {kind!r}; known: {', '.join(message_types())}"
        )
    return found


def _load_entry_points() -> None:
    global _entry_points_loaded
    with _lock:
        if _entry_points_loaded:
            return
        _entry_points_loaded = True
    for name, cls in entry_point_classes(ENTRY_POINT_GROUP, NotificationMessage):
        kind = cast(type[NotificationMessage], cls)
        with _lock:
            _types.setdefault(name, kind)
            _types.setdefault(kind.kind, kind)
