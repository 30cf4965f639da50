"""Shared helpers for governance tests: a scripted FunctionModel and small toolsets."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

HERE = Path(__file__).parent
POLICY_PATH = HERE / "policy.yaml"
TABLE_PATH = HERE / "policy_table.yaml"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _results(messages: list[ModelMessage]) -> list[str]:
    out = []
    for msg in messages:
        if not isinstance(msg, ModelRequest):
            continue
        for part in msg.parts:
            if isinstance(part, RetryPromptPart):
                out.append(f"{part.tool_name}: retry: {part.model_response()}")
            elif isinstance(part, ToolReturnPart):
                out.append(f"{part.tool_name}: {part.outcome}: {part.content}")
    return out


class Script:
    """A FunctionModel that makes the given tool calls, one model step each, then answers
    with every tool result it saw (one per line). ``seen_tools`` records each step's tools."""

    def __init__(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.calls = list(calls)
        self.step = 0
        self.seen_tools: list[list[str]] = []
        self.seen_defs: list[Any] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen_tools.append([t.name for t in info.function_tools])
        self.seen_defs.append(list(info.function_tools))
        if self.step < len(self.calls):
            name, args = self.calls[self.step]
            self.step += 1
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{self.step}")])
        return ModelResponse(parts=[TextPart("\n".join(_results(messages)) or "done")])

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self)


class Recorder:
    """A FunctionToolset whose tools record their calls in ``calls``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        ts: FunctionToolset[Any] = FunctionToolset()

        @ts.tool_plain(metadata={"readonly": True})
        def crm_read(id: int) -> str:
            """Read one CRM record."""
            self.calls.append(("crm_read", {"id": id}))
            return f"record {id}"

        @ts.tool_plain(metadata={"destructive": True})
        def crm_delete(id: int) -> str:
            """Delete one CRM record."""
            self.calls.append(("crm_delete", {"id": id}))
            return f"deleted {id}"

        @ts.tool_plain(metadata={"sensitive": ["api_key"]})
        def transfer_money(amount: float, currency: str, to: str, api_key: str = "") -> str:
            """Transfer money."""
            self.calls.append(("transfer_money", {"amount": amount, "to": to}))
            return f"sent {amount:g} {currency} to {to}"

        @ts.tool_plain
        def send_email(to: str, body: str) -> str:
            """Send an email."""
            self.calls.append(("send_email", {"to": to, "body": body}))
            return f"mailed {to}"

        self.toolset = ts

    def count(self, name: str) -> int:
        return sum(1 for n, _ in self.calls if n == name)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()
