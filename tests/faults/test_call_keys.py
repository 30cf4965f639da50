"""A governed mutation runs once per call id (SQLite; the PostgreSQL side with a cut COMMIT is
in test_commit_outcome.py): a retry with the same call id returns the recorded result and
writes nothing, also after a restart; another id, or other arguments, is another call."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from toolcards import KnowledgeGraphTool, PlanningTool
from toolcards.governance import GovernedToolset, Identity, Policy
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import ExecutionResult, Executor, Outcome
from toolcards.runtime import Team
from toolcards.tools.knowledge_graph.actor import ACTOR_NAME as GRAPH
from toolcards.tools.planning.actor import ACTOR_NAME as PLAN

ALICE = Identity("alice")


def _executor(team: Team) -> Executor:
    factory = team.bind([PlanningTool(vector_store=False), KnowledgeGraphTool(vector_store=False)])
    return Executor(CapabilityRegistry.from_factory(factory), Policy.allow_all())


def _call(executor: Executor, tool: str, args: dict[str, Any], call_id: str) -> ExecutionResult:
    return asyncio.run(executor.call(tool, args, ALICE, call_id=call_id))


def _tasks(team: Team) -> list[str]:
    return [value["description"] for _, value in team.state_of(PLAN).items("task:")]


def _create(description: str) -> dict[str, Any]:
    return {"create": [{"description": description}]}


def test_a_retry_with_the_same_call_id_returns_the_recorded_result(tmp_path: Path) -> None:
    with Team("t", store=tmp_path / "t.db") as team:
        executor = _executor(team)
        first = _call(executor, "update_planning", _create("write once"), "c-1")
        retry = _call(executor, "update_planning", _create("write once"), "c-1")
        assert retry.outcome is Outcome.OK
        assert retry.value == first.value == "created ids: [1]"
        assert _tasks(team) == ["write once"]


def test_a_retry_after_a_restart_returns_the_recorded_result(tmp_path: Path) -> None:
    with Team("t", store=tmp_path / "t.db") as team:
        _call(_executor(team), "update_planning", _create("write once"), "c-1")
    with Team.resume("t", store=tmp_path / "t.db") as team:
        retry = _call(_executor(team), "update_planning", _create("write once"), "c-1")
        assert retry.value == "created ids: [1]"
        assert _tasks(team) == ["write once"]


def test_another_call_id_is_another_call(tmp_path: Path) -> None:
    with Team("t", store=tmp_path / "t.db") as team:
        executor = _executor(team)
        _call(executor, "update_planning", _create("twice"), "c-1")
        second = _call(executor, "update_planning", _create("twice"), "c-2")
        assert second.value == "created ids: [2]"
        assert _tasks(team) == ["twice", "twice"]


def test_a_call_id_another_principal_used_is_another_call(tmp_path: Path) -> None:
    with Team("t", store=tmp_path / "t.db") as team:
        executor = _executor(team)
        _call(executor, "update_planning", _create("mine"), "c-1")
        bob = asyncio.run(
            executor.call("update_planning", _create("mine"), Identity("bob"), call_id="c-1")
        )
        assert bob.value == "created ids: [2]"  # not alice's recorded answer
        assert _tasks(team) == ["mine", "mine"]


def test_the_same_call_id_with_other_arguments_runs_the_new_call(tmp_path: Path) -> None:
    with Team("t", store=tmp_path / "t.db") as team:
        executor = _executor(team)
        _call(executor, "update_planning", _create("first"), "c-1")
        other = _call(executor, "update_planning", _create("second"), "c-1")
        assert other.value == "created ids: [2]"
        assert _tasks(team) == ["first", "second"]


def test_a_graph_refusal_after_partial_writes_is_replayed_without_writing(
    tmp_path: Path,
) -> None:
    ada = {"name": "ada", "entity_type": "person", "description": "a mathematician"}
    args = {"create_entities": [ada], "delete_entities": ["nobody"]}
    with Team("t", store=tmp_path / "t.db") as team:
        executor = _executor(team)
        first = _call(executor, "update_graph", args, "g-1")
        retry = _call(executor, "update_graph", args, "g-1")
        assert first.outcome is retry.outcome is Outcome.RETRY
        assert retry.message == first.message and "nobody" in first.message
        assert [name for name, _ in team.state_of(GRAPH).items("e:")] == ["e:ada"]
        assert sum(1 for e in team.events(since=0) if e.tool_id == GRAPH) == 1


def test_an_agent_run_keys_its_calls_by_run_so_two_runs_both_write(tmp_path: Path) -> None:
    """Models reuse tool call ids across runs: the key is ``<run id>/<tool call id>``, so a
    second run's identical call (same tool call id, same arguments) is a new call."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def plan(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) > 1:
            return ModelResponse(parts=[TextPart("done")])
        call = ToolCallPart("update_planning", _create("each run"), tool_call_id="call-0")
        return ModelResponse(parts=[call])

    with Team("t", store=tmp_path / "t.db") as team:
        factory = team.bind([PlanningTool(vector_store=False)])
        toolset = GovernedToolset(factory.toolset(), policy=Policy.allow_all())
        agent = Agent(FunctionModel(plan), toolsets=[toolset])
        for _ in range(2):
            agent.run_sync("plan")
        assert _tasks(team) == ["each run", "each run"]
