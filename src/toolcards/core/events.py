"""State-change events emitted by stateful tools."""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ToolStateEvent(BaseModel):
    """A delta of a tool actor's state.

    ``tool_id`` is the emitting actor's name (``#PlanningTool``); ``seq`` counts per tool from 1
    without gaps, so a consumer detects a missed event; ``payload`` is the change, not the state.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool_id: str
    seq: int = Field(ge=1)
    payload: Any = None
    team_id: str | None = None
    timestamp: float = Field(default_factory=time.time)
