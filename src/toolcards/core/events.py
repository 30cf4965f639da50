"""State-change events emitted by stateful tools."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

logger = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


TOOL_STATE = "tool_state"
"""The display type of a tool actor's state delta (the default)."""
LIFECYCLE_DISPLAY = "lifecycle"
"""The display type of a team lifecycle event (team and actors started/stopped, hires)."""
MESSAGE_DISPLAY = "message"
"""The display type of a message between members (queued, received, sent, processed)."""


def new_event_id() -> str:
    """A fresh event id (32 hex digits, unique across processes)."""
    return uuid.uuid4().hex


class ToolStateEvent(BaseModel):
    """A delta of a tool actor's state.

    ``tool_id`` is the emitting actor's name (``#PlanningTool``); ``seq`` counts per tool from 1
    without gaps, so a consumer detects a missed event; ``payload`` is the change, not the state.
    ``id`` names the event itself (the same on every read of it); ``sender`` is the member or
    principal whose call caused it (None for the team's own events); ``display_type`` tells a
    viewer what kind of event it is (:data:`TOOL_STATE`, :data:`LIFECYCLE_DISPLAY`,
    :data:`MESSAGE_DISPLAY`, or a card's own word).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_id: str
    seq: int = Field(ge=1)
    payload: Any = None
    team_id: str | None = None
    timestamp: float = Field(default_factory=time.time)
    id: str = Field(default_factory=new_event_id)
    sender: str | None = None
    display_type: str = TOOL_STATE


class PayloadTypes:
    """Pydantic models that event payloads are restored to, by tag.

    An event whose payload is an instance of a registered model is stored with the model's
    tag; reading it back (``team.events()``, subscriptions, another process) gives an instance
    of the model again. A tag is only a key into this table: nothing is imported from data, and
    an unknown tag (or a payload that no longer validates) reads back as the plain JSON value.
    """

    def __init__(self) -> None:
        self._by_tag: dict[str, type[BaseModel]] = {}
        self._by_class: dict[type[BaseModel], str] = {}

    def register(self, cls: type[M], tag: str | None = None) -> type[M]:
        """Restore payloads of ``cls`` to ``cls`` (tag default ``module:QualName``)."""
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
            raise TypeError(f"event payload types are pydantic models, got {cls!r}")
        name = tag or f"{cls.__module__}:{cls.__qualname__}"
        self._by_tag[name] = cls
        self._by_class[cls] = name
        return cls

    def forget(self, tag: str) -> None:
        """Stop restoring payloads tagged ``tag`` (registering the model again restores it)."""
        cls = self._by_tag.pop(tag, None)
        if cls is not None:
            self._by_class.pop(cls, None)

    def tag_of(self, payload: Any) -> str | None:
        """The tag of a registered model instance, else None."""
        return self._by_class.get(type(payload)) if isinstance(payload, BaseModel) else None

    def restore(self, tag: str | None, data: Any) -> Any:
        """``data`` as the model registered under ``tag`` (the plain value when unknown)."""
        cls = self._by_tag.get(tag) if tag else None
        if cls is None:
            return data
        try:
            return cls.model_validate(data)
        except ValidationError:
            logger.warning("event payload tagged %s no longer validates; kept as JSON", tag)
            return data


EVENT_PAYLOADS = PayloadTypes()
"""The process-wide table of event payload models."""


def event_payload(cls: type[M]) -> type[M]:
    """Class decorator: register ``cls`` so its event payloads are restored to it."""
    return EVENT_PAYLOADS.register(cls)
