"""Cards as one pydantic-ai capability in real agent runs (FunctionModel): the tools, the
system prompts and the per-turn context as team state, and governance equal to the
toolset's (who reads the team state: ``test_team_state.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.exceptions import UnexpectedModelBehavior
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

from support.scripted import Script, SequenceScript, call_tool
from toolcards import PlanningTool, ToolFactory, WorkspaceTool
from toolcards.core.agent_capability import TeamStatePart
from toolcards.governance import AuditLog, GovernedToolset, Identity, Policy
from toolcards.surfaces.agent import GovernedCards

WRITER = Identity("agent.writer", type="agent")
POLICY = {
    "default_effect": "deny",
    "rules": [
        {"callers": ["agent.*"], "targets": ["workspace_write"], "effect": "deny",
         "conditions": {"arguments": {"path": {"glob": "deploy/*"}}}},
        {"callers": ["agent.*"], "targets": ["workspace_*"], "effect": "allow"},
    ],
}  # fmt: skip
CALLS = [
    ("workspace_write", {"path": "notes/a.md", "content": "hello"}),
    ("workspace_write", {"path": "deploy/prod.env", "content": "x"}),
    ("workspace_read", {"path": "notes/a.md"}),
]


def _planning_with_context() -> PlanningTool:
    return PlanningTool(vector_store=False, get_planning={"expose": ["llm_context"]})


def _state_blocks(messages: list[ModelMessage]) -> list[str]:
    return [
        part.content
        for m in messages
        if isinstance(m, ModelRequest)
        for part in m.parts
        if isinstance(part, TeamStatePart)
    ]


def test_one_capability_gives_the_agent_the_card_tools(root: Path) -> None:
    script = Script(call_tool("workspace_write", {"path": "a.md", "content": "hi"}))
    agent = Agent(script.model, capabilities=[ToolFactory([WorkspaceTool()]).capability()])
    result = agent.run_sync("write a.md")
    assert (root / "default" / "a.md").read_text() == "hi"
    assert "workspace_write" in [t.name for t in script.calls[0][1].function_tools]
    assert result.output.startswith("tool said:")


def test_card_system_prompts_are_team_state_not_instructions(root: Path) -> None:
    script = Script()
    factory = ToolFactory([PlanningTool(vector_store=False)])
    result = Agent(script.model, capabilities=[factory.capability()]).run_sync("hi")
    assert script.calls[0][1].instructions is None
    [summary] = _state_blocks(result.all_messages())
    assert summary.startswith("Context update 1") and "0 tasks total" in summary


def test_per_turn_context_is_a_full_block_then_only_what_changed(root: Path) -> None:
    script = SequenceScript([("update_planning", {"create": [{"description": "Ship it"}]})])
    factory = ToolFactory([_planning_with_context()])
    agent = Agent(script.model, capabilities=[factory.capability()])
    result = agent.run_sync("plan")
    blocks = _state_blocks(result.all_messages())
    assert len(blocks) == 2
    assert blocks[0].startswith("Context update 1") and "(none)" in blocks[0]
    assert (
        blocks[1].startswith("Context update 2") and "+ added: ID 1 [pending] Ship it" in blocks[1]
    )


def test_a_later_run_continues_the_context_of_its_history(root: Path) -> None:
    factory = ToolFactory([_planning_with_context()])
    first = Agent(SequenceScript([("update_planning", {"create": [{"description": "A"}]})]).model,
                  capabilities=[factory.capability()])  # fmt: skip
    history = first.run_sync("plan").all_messages()
    again = Agent(SequenceScript([("update_planning", {"create": [{"description": "B"}]})]).model,
                  capabilities=[ToolFactory([_planning_with_context()]).capability()])  # fmt: skip
    later = again.run_sync("more", message_history=history).new_messages()
    blocks = _state_blocks(later)
    assert len(blocks) == 1  # nothing changed before the call: no block; then only task B
    assert blocks[0].startswith("Context update 3") and "B" in blocks[0] and "ID 1" not in blocks[0]


def _audit_rows(log: AuditLog) -> list[tuple[Any, ...]]:
    return [(e.principal, e.surface, e.tool, e.decision, e.outcome, e.args) for e in log.tail(50)]


def test_governed_capability_audits_exactly_as_the_governed_toolset(
    root: Path, tmp_path: Path
) -> None:
    outputs = []
    rows = []
    for form in ("toolset", "capability"):
        with AuditLog(tmp_path / f"{form}.db", durability="sync") as log:
            policy = Policy.from_dict(POLICY)
            script = SequenceScript(CALLS)
            if form == "toolset":
                tools = ToolFactory([WorkspaceTool(workspace_id=form)]).toolset()
                governed = GovernedToolset(tools, policy=policy, identity=WRITER, audit=log)
                agent = Agent(script.model, toolsets=[governed])
            else:
                card = WorkspaceTool(workspace_id=form)  # a fresh workspace each
                cards = GovernedCards([card], policy=policy, identity=WRITER, audit=log)
                agent = Agent(script.model, capabilities=[cards])
            outputs.append(agent.run_sync("go").output)
            rows.append(_audit_rows(log))
    assert outputs[0] == outputs[1]
    assert "denied: workspace_write" in outputs[1]
    assert rows[0] == rows[1]
    assert [(r[2], r[3]) for r in rows[1]] == [
        ("workspace_write", "allow"), ("workspace_write", "deny"), ("workspace_read", "allow")
    ]  # fmt: skip


def test_a_call_to_a_card_tool_hidden_from_the_caller_has_one_row(
    root: Path, tmp_path: Path
) -> None:
    """pydantic-ai answers the name it was not offered itself, so the capability's tools never
    saw the call: it left no row (the MCP and CLI surfaces write ``deny``/``unknown_tool``)."""
    policy = Policy.from_dict({"default_effect": "deny", "rules": [
        {"callers": ["agent.*"], "targets": ["workspace_read"], "effect": "allow"}]})  # fmt: skip
    script = SequenceScript([("workspace_write", {"path": "a.md", "content": "x"})])
    with AuditLog(tmp_path / "audit.db", durability="sync") as log:
        cards = GovernedCards([WorkspaceTool()], policy=policy, identity=WRITER, audit=log)
        Agent(script.model, capabilities=[cards]).run_sync("go")
        rows = _audit_rows(log)
    assert rows == [
        ("agent.writer", "pydantic-ai", "workspace_write", "deny", "unknown_tool",
         {"path": "a.md", "content": "x"}),
    ]  # fmt: skip
    assert not (root / "default" / "a.md").exists()


HIDDEN_POLICY = {"default_effect": "deny", "rules": [
    {"callers": ["agent.*"], "targets": ["workspace_read"], "effect": "allow"}]}  # fmt: skip


def _ending_model(beside: ToolCallPart) -> FunctionModel:
    """One response, that ends the run: a hidden ``workspace_write`` call beside ``beside``."""
    hidden = ToolCallPart("workspace_write", {"path": "a.md", "content": "x"}, tool_call_id="h1")

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[hidden, beside])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        for i, part in enumerate((hidden, beside)):
            args = part.args_as_json_str()
            yield {i: DeltaToolCall(part.tool_name, args, tool_call_id=part.tool_call_id)}

    return FunctionModel(respond, stream_function=stream)


async def _run(agent: Agent[None, Any], mode: str) -> Any:
    if mode == "run":
        return (await agent.run("go")).output
    async with agent.run_stream("go") as streamed:
        return await streamed.get_output()


@pytest.mark.parametrize("mode", ["run", "stream"])
def test_a_hidden_call_beside_the_final_output_has_one_row(
    root: Path, tmp_path: Path, mode: str
) -> None:
    """The run ends on the response that made the hidden call, so no next step wrote its row
    (the toolset writes it there): the call left none."""
    final = ToolCallPart("final_result", {"response": 7}, tool_call_id="f1")
    with AuditLog(tmp_path / "audit.db", durability="sync") as log:
        cards = GovernedCards([WorkspaceTool()], policy=Policy.from_dict(HIDDEN_POLICY),
                              identity=WRITER, audit=log)  # fmt: skip
        agent = Agent(_ending_model(final), capabilities=[cards], output_type=int)
        output = asyncio.run(_run(agent, mode))
        rows = [(e.tool, e.decision, e.outcome, e.call_id) for e in log.tail(50)]
    assert output == 7
    assert rows == [("workspace_write", "deny", "unknown_tool", "h1")]


@pytest.mark.parametrize("mode", ["run", "stream"])
def test_a_hidden_call_in_a_response_that_fails_the_run_has_one_row(
    root: Path, tmp_path: Path, mode: str
) -> None:
    """pydantic-ai fails the run on the response (two calls share an id) before any next step:
    the hidden call in it left no row."""
    read = ToolCallPart("workspace_read", {"path": "a.md"}, tool_call_id="h1")
    with AuditLog(tmp_path / "audit.db", durability="sync") as log:
        cards = GovernedCards([WorkspaceTool()], policy=Policy.from_dict(HIDDEN_POLICY),
                              identity=WRITER, audit=log)  # fmt: skip
        with pytest.raises(UnexpectedModelBehavior, match="unique `tool_call_id`"):
            asyncio.run(_run(Agent(_ending_model(read), capabilities=[cards]), mode))
        rows = [(e.tool, e.decision, e.outcome, e.call_id) for e in log.tail(50)]
    assert rows == [("workspace_write", "deny", "unknown_tool", "h1")]
    assert not (root / "default" / "a.md").exists()


@pytest.mark.parametrize("mode", ["run", "stream"])
def test_two_hidden_calls_under_one_id_have_a_row_each(
    root: Path, tmp_path: Path, mode: str
) -> None:
    """A model gives two hidden calls one id in one response (pydantic-ai fails the run on
    it): a call was written once by its id, so the second call had no row."""
    args = {"path": "deploy/prod.env", "content": "EVIL"}
    again = ToolCallPart("workspace_write", args, tool_call_id="h1")
    with AuditLog(tmp_path / "audit.db", durability="sync") as log:
        cards = GovernedCards([WorkspaceTool()], policy=Policy.from_dict(HIDDEN_POLICY),
                              identity=WRITER, audit=log)  # fmt: skip
        with pytest.raises(UnexpectedModelBehavior, match="unique `tool_call_id`"):
            asyncio.run(_run(Agent(_ending_model(again), capabilities=[cards]), mode))
        rows = [(e.tool, e.outcome, e.call_id, e.args["path"]) for e in log.tail(50)]
    assert rows == [
        ("workspace_write", "unknown_tool", "h1", "a.md"),
        ("workspace_write", "unknown_tool", "h1", "deploy/prod.env"),
    ]


def test_denied_tools_are_not_offered_through_the_capability(root: Path) -> None:
    policy = Policy.from_dict({"default_effect": "deny", "rules": [
        {"callers": ["agent.*"], "targets": ["workspace_read"], "effect": "allow"}]})  # fmt: skip
    script = SequenceScript([])
    cards = GovernedCards([WorkspaceTool()], policy=policy, identity=WRITER)
    Agent(script.model, capabilities=[cards]).run_sync("hi")
    assert script.seen_tools[0] == ["workspace_read"]


def test_identity_without_a_policy_is_refused() -> None:
    with pytest.raises(TypeError, match="need policy= or executor="):
        GovernedCards([WorkspaceTool()], identity=WRITER)


def test_a_team_members_cards_are_one_capability(root: Path) -> None:
    from toolcards.runtime import Team

    with Team("t-cap", store=":memory:") as team:
        alice = team.bind([PlanningTool(vector_store=False)], member="alice")
        policy = Policy.from_dict({"default_effect": "allow"})
        cards = GovernedCards(alice, policy=policy, identity=Identity("alice"))
        script = SequenceScript([("update_planning", {"create": [{"description": "Ship"}]})])
        Agent(script.model, capabilities=[cards]).run_sync("plan")
        bob = team.bind([PlanningTool(vector_store=False)], member="bob")
        assert "1 task total" in bob.get_system_prompts()[0]()  # not "1 tasks"
