"""The scripted model the apcore examples share: no API key, the same run every time.

Each example puts this folder on ``sys.path`` and imports :func:`scripted_model`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def scripted_model(
    calls: Sequence[ToolCallPart], report: str, label: str = "tool_call_id"
) -> FunctionModel:
    """A model that makes ``calls`` at once on the first turn, then replies ``report``
    followed by ``label=outcome`` for each tool result it got back (``label`` is
    ``tool_call_id`` or ``tool_name``)."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            return ModelResponse(parts=copy.deepcopy(list(calls)))  # fresh parts every run
        last = messages[-1]
        parts = last.parts if isinstance(last, ModelRequest) else []
        seen = [f"{getattr(p, label)}={p.outcome}" for p in parts if isinstance(p, ToolReturnPart)]
        return ModelResponse(parts=[TextPart(report + ", ".join(seen))])

    return FunctionModel(respond)
