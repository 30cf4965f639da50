"""Test support: an agent whose MCPTool card talks to the asking server, governed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from support.launch import PYTHON
from toolcards import ToolFactory
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.tools.mcp import MCPTool

ASKING = Path(__file__).parent / "servers" / "asking_server.py"
CALLER = Identity("agent.writer", "agent")
APPROVER = Identity("human.ann", "user", roles=["approver"])
TOOLS = ["book", "summarize", "where", "era"]
ALLOW_ALL = {"default_effect": "allow"}
ONLY_TOOLS = {  # the server's tools, and none of the pseudo-tools of its requests
    "default_effect": "deny",
    "rules": [{"callers": ["agent.*"], "targets": TOOLS, "effect": "allow"}],
}


def asking_card(tmp_path: Path, *, url: str | None = None, **fields: Any) -> MCPTool:
    fields.setdefault("connect_timeout_seconds", 60.0)
    fields.setdefault("name", "asker")
    if url is not None:
        card = MCPTool(transport="streamable-http", url=url, **fields)
    else:
        card = MCPTool(transport="stdio", command=PYTHON, args=[str(ASKING), "stdio"], **fields)
    card.use_workspaces_root(tmp_path / "workspaces")
    return card


@dataclass
class Run:
    """A FunctionModel agent: calls ``calls`` in its first turn, then outputs the results as
    JSON; a sampling request (the server's system prompt) is answered with ``completion``."""

    calls: list[tuple[str, dict[str, Any]]]
    completion: str = "a short summary"
    sampled: list[list[ModelMessage]] = field(default_factory=list)
    limits: list[Any] = field(default_factory=list)

    def model(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        first = messages[0]
        if isinstance(first, ModelRequest) and any(
            isinstance(p, SystemPromptPart) and p.content == "Answer briefly." for p in first.parts
        ):
            self.sampled.append(messages)
            self.limits.append((info.model_settings or {}).get("max_tokens"))
            return ModelResponse(parts=[TextPart(self.completion)])
        last = messages[-1]
        if isinstance(last, ModelRequest) and any(
            isinstance(p, ToolReturnPart) for p in last.parts
        ):
            out = [str(p.content) for p in last.parts if isinstance(p, ToolReturnPart)]
            return ModelResponse(parts=[TextPart(json.dumps(out))])
        return ModelResponse(parts=[ToolCallPart(name, args) for name, args in self.calls])


def governed_agent(
    card: MCPTool, run: Run, audit: AuditLog, policy: dict[str, Any] | None = None
) -> tuple[Agent[None, str], GovernedToolset]:
    governed = GovernedToolset(
        ToolFactory([card]).toolset(),
        policy=Policy.from_dict(policy or ALLOW_ALL),
        identity=CALLER,
        audit=audit,
    )
    agent: Agent[None, str] = Agent(FunctionModel(run.model), toolsets=[governed])
    return agent, governed


async def run_once(agent: Agent[None, str]) -> list[Any]:
    """The tool results of one run, parsed from the JSON each tool returned."""
    result = await agent.run("go")
    return [_parsed(text) for text in json.loads(result.output)]


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def rows(audit: AuditLog, tool: str) -> list[Any]:
    return audit.query(tool=tool)
