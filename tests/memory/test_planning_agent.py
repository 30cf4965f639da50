"""End to end: a pydantic-ai Agent (FunctionModel) plans through the team toolset."""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolcards.runtime import Team
from toolcards.tools.planning.card import PlanningTool


def results(messages: list[ModelMessage]) -> list[Any]:
    return [
        p
        for m in messages
        for p in getattr(m, "parts", [])
        if isinstance(p, ToolReturnPart | RetryPromptPart)
    ]


def scripted(calls: list[tuple[str, dict[str, Any]]], seen: list[AgentInfo]) -> FunctionModel:
    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        done = len(results(messages))
        if done < len(calls):
            name, args = calls[done]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"c{done}")])
        return ModelResponse(parts=[TextPart("done")])

    return FunctionModel(respond)


def test_agent_creates_tasks_and_bad_version_comes_back_as_retry(team: Team) -> None:
    calls = [
        ("update_planning", {"create": [{"description": "Write the changelog", "owner": "ann"}]}),
        ("update_planning", {"update": [{"id": 1, "version": 5, "status": "started"}]}),
        ("update_planning", {"update": [{"id": 1, "version": 1, "status": "started"}]}),
    ]
    seen: list[AgentInfo] = []
    factory = team.bind([PlanningTool(vector_store=False)], member="ann")
    agent = Agent(scripted(calls, seen))
    run = agent.run_sync("plan it", toolsets=[factory.toolset()])
    parts = results(run.all_messages())
    assert "created ids: [1]" in str(parts[0].content)
    assert "conflict" in str(parts[1].content)
    assert "updated: 1 (v2)" in str(parts[2].content)
    schema = next(t for t in seen[0].function_tools if t.name == "update_planning")
    text = str(schema.parameters_json_schema)
    assert "at most 150 characters" in text and "at most 300 characters" in text
    assert "creator" not in schema.parameters_json_schema["$defs"]["TaskCreate"]["properties"]
    detail = {fn.__name__: fn for fn in factory.get_tools()}["get_planning_task"](1)
    assert "Creator: @ann" in detail and "[started]" in detail


def test_agent_smuggling_creator_is_asked_to_retry(team: Team) -> None:
    calls = [
        ("update_planning", {"create": [{"description": "x", "creator": "boss"}]}),
    ]
    factory = team.bind([PlanningTool(vector_store=False)], member="ann")
    run = Agent(scripted(calls, [])).run_sync("go", toolsets=[factory.toolset()])
    first = results(run.all_messages())[0]
    assert getattr(first, "outcome", "retried") == "retried"
    assert "extra_forbidden" in str(first.content)
    tools = {fn.__name__: fn for fn in factory.get_tools()}
    assert "no matching tasks" in tools["search_planning"]()


def test_standalone_factory_toolset_uses_the_implicit_team() -> None:
    from toolcards import ToolFactory

    calls = [("update_planning", {"create": [{"description": "Standalone task"}]})]
    factory = ToolFactory([PlanningTool(vector_store=False)])
    run = Agent(scripted(calls, [])).run_sync("go", toolsets=[factory.toolset()])
    content = str(results(run.all_messages())[0].content)
    assert content.startswith("created ids: [")
    task_id = int(content.split("[")[1].split("]")[0])
    detail = {fn.__name__: fn for fn in factory.get_tools()}["get_planning_task"](task_id)
    assert "Standalone task" in detail and "Creator: @user" in detail
