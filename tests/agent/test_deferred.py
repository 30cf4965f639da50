"""Deferred tools (``defer_loading``) with pydantic-ai's tool search, in real agent runs: hidden
until searched, governed as ever, and a tool the caller may not call is never found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import ModelRequest, ToolSearchReturnPart

from support.launch import PYTHON
from support.scripted import SequenceScript
from toolcards import MCPTool, PlanningTool, ToolFactory, WorkspaceTool, dump_cards, load_cards
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.surfaces.agent import GovernedCards

WRITER = Identity("agent.writer", type="agent")
ECHO = Path(__file__).resolve().parents[1] / "mcp" / "servers" / "echo_server.py"
READ_ONLY = {
    "default_effect": "deny",
    "rules": [{"callers": ["agent.*"], "targets": ["workspace_read", "workspace_list"],
               "effect": "allow"}],
}  # fmt: skip


def _found(result: Any) -> list[str]:
    return [
        match["name"]
        for m in result.all_messages()
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolSearchReturnPart)
        for match in p.content["discovered_tools"]
    ]


def test_a_deferred_card_is_hidden_until_a_search_finds_it(root: Path) -> None:
    script = SequenceScript([
        ("search_tools", {"queries": ["write a file"]}),
        ("workspace_write", {"path": "a.md", "content": "found"}),
    ])  # fmt: skip
    cards = [WorkspaceTool(defer_loading=True), PlanningTool(vector_store=False)]
    result = Agent(script.model, capabilities=[ToolFactory(cards).capability()]).run_sync("go")
    assert not any(n.startswith("workspace_") for n in script.seen_tools[0])
    assert "update_planning" in script.seen_tools[0]
    assert "workspace_write" in _found(result)
    assert "workspace_write" in script.seen_tools[1]
    assert (root / "default" / "a.md").read_text() == "found"


def test_defer_loading_round_trips_with_the_card() -> None:
    again = load_cards(dump_cards([WorkspaceTool(defer_loading=True)]))[0]
    assert again.defer_loading is True


def test_the_search_never_offers_a_tool_the_caller_may_not_call(root: Path) -> None:
    script = SequenceScript([
        ("search_tools", {"queries": ["workspace write read file"]}),
        ("workspace_write", {"path": "a.md", "content": "x"}),
    ])  # fmt: skip
    cards = GovernedCards(
        [WorkspaceTool(defer_loading=True)], policy=Policy.from_dict(READ_ONLY), identity=WRITER
    )
    result = Agent(script.model, capabilities=[cards]).run_sync("go")
    found = _found(result)
    assert "workspace_read" in found
    assert "workspace_write" not in found
    assert all("workspace_write" not in seen for seen in script.seen_tools)
    assert not (root / "default" / "a.md").exists()


def test_listing_denied_tools_still_keeps_denied_deferred_ones_from_the_search(root: Path) -> None:
    script = SequenceScript([("search_tools", {"queries": ["workspace write read file"]})])
    tools = ToolFactory([WorkspaceTool(defer_loading=True), PlanningTool(vector_store=False)])
    governed = GovernedToolset(
        tools.toolset(), policy=Policy.from_dict(READ_ONLY), identity=WRITER, hide_denied=False
    )
    result = Agent(script.model, toolsets=[governed]).run_sync("go")
    found = _found(result)
    assert "workspace_read" in found and "workspace_write" not in found
    assert "update_planning" in script.seen_tools[0]  # a denied tool that is not deferred


def test_a_found_tool_runs_through_the_executor_and_is_audited(root: Path, audit: AuditLog) -> None:
    script = SequenceScript([
        ("search_tools", {"queries": ["list files"]}),
        ("workspace_list", {"path": "."}),
    ])  # fmt: skip
    policy = Policy.from_dict(READ_ONLY)
    card = WorkspaceTool(defer_loading=True)
    cards = GovernedCards([card], policy=policy, identity=WRITER, audit=audit)
    Agent(script.model, capabilities=[cards]).run_sync("go")
    rows = [(e.principal, e.tool, e.decision, e.outcome) for e in audit.tail(10)]
    assert rows == [("agent.writer", "workspace_list", "allow", "ok")]


def test_every_tool_of_a_deferred_mcp_card_is_hidden_until_searched() -> None:
    card = MCPTool(
        transport="stdio",
        command=PYTHON,
        args=[str(ECHO), "stdio"],
        connect_timeout_seconds=60.0,
        defer_loading=True,
    )
    script = SequenceScript([
        ("search_tools", {"queries": ["add two integers"]}),
        ("add", {"a": 2, "b": 3}),
    ])  # fmt: skip
    result = Agent(script.model, capabilities=[ToolFactory([card]).capability()]).run_sync("go")
    assert script.seen_tools[0] == []
    assert "add" in _found(result)
    assert "add" in script.seen_tools[1] and "echo" not in script.seen_tools[1]
    assert result.output.splitlines()[-1] == "add: success: 5"
