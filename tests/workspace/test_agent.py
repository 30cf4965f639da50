"""End to end: a pydantic-ai Agent (FunctionModel) uses the workspace tools via the toolset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolcards.core.factory import ToolFactory
from toolcards.tools.workspace.card import WorkspaceTool


def _model(calls: list[tuple[str, dict[str, Any]]]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if len(returns) < len(calls):
            name, args = calls[len(returns)]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{len(returns)}")])
        return ModelResponse(parts=[TextPart(f"done: {returns[-1].content}")])

    return FunctionModel(respond)


def _returns(result: Any) -> list[ToolReturnPart]:
    return [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]


def test_agent_sees_a_bad_edit_as_retry_and_recovers(ws: Path) -> None:
    (ws / "app.py").write_text("x = 1\ny = 2\n")
    agent = Agent(
        _model(
            [
                (
                    "workspace_edit",
                    {"path": "app.py", "old_string": "z = 3", "new_string": "z = 4"},
                ),
                (
                    "workspace_edit",
                    {"path": "app.py", "old_string": "y = 2", "new_string": "y = 5"},
                ),
            ]
        )
    )
    result = agent.run_sync("edit", toolsets=[ToolFactory([WorkspaceTool()]).toolset()])
    first, second = _returns(result)
    assert first.outcome == "retried"
    assert "old_string was not found" in str(first.content)
    assert "+y = 5" in str(second.content)
    assert (ws / "app.py").read_text() == "x = 1\ny = 5\n"


def test_agent_escape_attempt_is_a_retry_and_nothing_is_read(ws: Path, outside: Path) -> None:
    agent = Agent(_model([("workspace_read", {"path": "../../outside/secret.txt"})]))
    result = agent.run_sync("read", toolsets=[ToolFactory([WorkspaceTool()]).toolset()])
    (only,) = _returns(result)
    assert only.outcome == "retried"
    assert "TOP SECRET" not in str(result.all_messages())


def test_agent_receives_an_image_from_view(ws: Path) -> None:
    pytest.importorskip("PIL")
    from PIL import Image

    Image.new("RGB", (8, 8)).save(ws / "a.png", format="PNG")
    agent = Agent(_model([("workspace_view", {"path": "a.png"})]))
    result = agent.run_sync("look", toolsets=[ToolFactory([WorkspaceTool()]).toolset()])
    parts = [
        c
        for m in result.all_messages()
        for p in m.parts
        if isinstance(p, (ToolReturnPart, UserPromptPart))
        for c in (p.content if isinstance(p.content, list) else [p.content])
    ]
    assert any(isinstance(c, BinaryContent) and c.media_type == "image/png" for c in parts)
