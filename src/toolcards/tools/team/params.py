"""The capability params of TeamTool (pure configuration; nothing here starts a team)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from toolcards.core.channels import Channels
from toolcards.core.params import BaseToolParam
from toolcards.runtime.profiles import model_spec, valid_model


class HireMembers(BaseToolParam):
    """``hire_members(roles)``: hire one member per listed role."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL})
    max_per_call: int = Field(default=5, ge=1, le=50)
    """Most roles one call may hire."""


class FireMembers(BaseToolParam):
    """``fire_members(names)``: fire the listed members (guards apply per name)."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL})
    max_per_call: int = Field(default=10, ge=1, le=100)


class HireMember(BaseToolParam):
    """``/hire_member role [name]``: hire one member."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.COMMAND})


class FireMember(BaseToolParam):
    """``/fire_member name``: fire one member (same guards as ``fire_members``)."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.COMMAND})


class TeamMembersView(BaseToolParam):
    """The roster: ``/team_members``, and per-turn context ("X joined", "X left")."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.COMMAND, Channels.LLM_CONTEXT})


class TeamRolesView(BaseToolParam):
    """The roles that can be hired: ``/team_roles``, and per-turn context."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.COMMAND, Channels.LLM_CONTEXT})


class ActivitySummarizer(BaseModel):
    """The model that summarizes long tasks in ``team_activity`` (on request only)."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    model: Any
    """A pydantic-ai model spec string (serializable) or, in code only, a model object."""
    poll_attempts: int = Field(default=5, ge=1, le=50)
    poll_delay_seconds: float = Field(default=0.4, gt=0, le=10)
    timeout_seconds: float = Field(default=20.0, gt=0, le=300)
    """The budget of one summarizing model call."""
    max_summary_chars: int = Field(default=200, ge=20, le=2000)

    @field_validator("model")
    @classmethod
    def _valid_model(cls, model: Any) -> Any:
        return valid_model(model, "a model spec string or Model")

    @field_serializer("model")
    def _serialize_model(self, model: Any) -> str:
        return model_spec(model, "the summarizer", "use a model spec string to persist the card")


class TeamActivity(BaseToolParam):
    """``team_activity()``: which other members are busy, and on what."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL, Channels.COMMAND})
    max_task_chars: int = Field(default=200, ge=20, le=2000)
    """Task text is cut to this many characters (unless summarized)."""
    stale_after_seconds: float = Field(default=300.0, gt=0)
    """A message open longer than this is dropped as stale telemetry, not reported as work."""
    summarizer: ActivitySummarizer | None = None
    """When set, ``team_activity`` takes ``summarize_over`` and can summarize long tasks."""
