"""ACL from YAML: the same conversation, run as two different agents.

Run with: .venv/bin/python examples/apcore_acl/main.py
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apcore import ACL, Executor, Registry
from apcore.decorator import module
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolcards.bridges.apcore import ApcoreToolset

HERE = Path(__file__).parent
STAFF = {
    "ada": {"team": "engineering", "salary": 120_000},
    "bo": {"team": "sales", "salary": 90_000},
}


def build_registry() -> Registry:
    registry = Registry()

    @module(id="hr.directory.search", registry=registry, annotations={"readonly": True})
    def search(name: str) -> dict[str, Any]:
        """Find a colleague's team.

        Args:
            name: First name.
        """
        person = STAFF.get(name.lower())
        return {"name": name, "team": person["team"] if person else None}

    @module(id="hr.salary.read", registry=registry, annotations={"readonly": True})
    def salary(name: str) -> dict[str, Any]:
        """Read a colleague's salary.

        Args:
            name: First name.
        """
        return {"name": name, "salary": STAFF[name.lower()]["salary"]}

    return registry


@dataclass(frozen=True)
class Caller:
    """The application's idea of who is running the agent."""

    id: str
    roles: tuple[str, ...]
    type: str = "agent"


def scripted_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Ask for the directory entry and the salary, then summarise what came back."""
    if len(messages) == 1:
        return ModelResponse(
            parts=[
                ToolCallPart("hr_directory_search", {"name": "ada"}, tool_call_id="search"),
                ToolCallPart("hr_salary_read", {"name": "ada"}, tool_call_id="salary"),
            ]
        )
    last = messages[-1]
    parts = last.parts if isinstance(last, ModelRequest) else []
    seen = [f"{p.tool_name}={p.outcome}" for p in parts if isinstance(p, ToolReturnPart)]
    return ModelResponse(parts=[TextPart("I saw: " + ", ".join(seen))])


def main() -> None:
    registry = build_registry()
    executor = Executor(registry, acl=ACL.load(str(HERE / "acl.yaml")))
    toolset: ApcoreToolset[Caller] = ApcoreToolset(
        registry, executor, identity_resolver=lambda ctx: ctx.deps
    )
    agent = Agent(FunctionModel(scripted_model), toolsets=[toolset], deps_type=Caller)
    for caller in (Caller("agent.helpdesk", ("support",)), Caller("agent.payroll", ("payroll",))):
        print(f"== running as {caller.id} with roles {list(caller.roles)}")
        result = agent.run_sync("Tell me about Ada", deps=caller)
        for message in result.all_messages():
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    print(f"  {part.tool_name}: {part.outcome}: {part.content}")
        print(f"  model: {result.output}")


if __name__ == "__main__":
    main()
