"""NotificationTool: self-scheduled messages, held and delivered by ``#NotificationTool``."""

from toolcards.tools.notification.card import (
    CancelNotification,
    NotificationTool,
    PendingNotifications,
    RegisterNotification,
)
from toolcards.tools.notification.models import ACTOR_NAME, PendingNotification

__all__ = [
    "ACTOR_NAME",
    "CancelNotification",
    "NotificationTool",
    "PendingNotification",
    "PendingNotifications",
    "RegisterNotification",
]
