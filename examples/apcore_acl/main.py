"""ACL from YAML: the same conversation, run as two different agents.

Run with: .venv/bin/python examples/apcore_acl/main.py
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from apcore import ACL, Executor, Registry
from apcore.decorator import module
from pydantic_ai import Agent
from pydantic_ai.messages import ToolCallPart, ToolReturnPart

from toolcards.bridges.apcore import ApcoreToolset

# the scripted model the examples share lives in examples/_shared: put it on the import path
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "_shared"))
from scripted import scripted_model

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


MODEL = scripted_model(
    [
        ToolCallPart("hr_directory_search", {"name": "ada"}, tool_call_id="search"),
        ToolCallPart("hr_salary_read", {"name": "ada"}, tool_call_id="salary"),
    ],
    "I saw: ",
    label="tool_name",
)
"""Asks for the directory entry and the salary, then summarises what came back."""


def main() -> None:
    registry = build_registry()
    executor = Executor(registry, acl=ACL.load(str(HERE / "acl.yaml")))
    toolset: ApcoreToolset[Caller] = ApcoreToolset(
        registry, executor, identity_resolver=lambda ctx: ctx.deps
    )
    agent = Agent(MODEL, toolsets=[toolset], deps_type=Caller)
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
