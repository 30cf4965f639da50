"""A COMMIT whose answer never comes: the call reports "outcome unknown" (never "nothing was
committed"), and its retry under the same call id returns the recorded result instead of
writing the task again. Real PostgreSQL behind a real TCP proxy that cuts the COMMIT."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from faults.writers import stored_rows
from support.pg_proxy import CommitCuttingProxy, commit_cutting_proxy
from support.servers import RayCluster
from toolcards import KnowledgeGraphTool, PlanningTool
from toolcards.governance import Identity, Policy
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import ExecutionResult, Executor, Outcome
from toolcards.runtime import Team
from toolcards.tools.knowledge_graph.actor import ACTOR_NAME as GRAPH
from toolcards.tools.planning.actor import ACTOR_NAME as PLAN

ALICE = Identity("alice")


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[CommitCuttingProxy]:
    with commit_cutting_proxy(postgres_url) as running:
        yield running


def _executor(team: Team) -> Executor:
    factory = team.bind([PlanningTool(vector_store=False), KnowledgeGraphTool(vector_store=False)])
    return Executor(CapabilityRegistry.from_factory(factory), Policy.allow_all())


def _call(executor: Executor, tool: str, args: dict[str, Any], call_id: str) -> ExecutionResult:
    return asyncio.run(executor.call(tool, args, ALICE, call_id=call_id))


def _rows(url: str, actor: str, prefix: str) -> list[Any]:
    return stored_rows(url, "t", actor, prefix)


def _create(description: str) -> dict[str, Any]:
    return {"create": [{"description": description}]}


def test_a_commit_whose_answer_is_lost_is_reported_as_outcome_unknown(
    postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    with Team("t", store=proxy.url) as team:
        executor = _executor(team)
        proxy.arm("answer lost")
        result = _call(executor, "update_planning", _create("answer lost"), "c-1")
    assert proxy.cuts == 1
    assert result.outcome is Outcome.RETRY, result.message
    assert "outcome unknown" in result.message
    assert "nothing" not in result.message
    assert len(_rows(postgres_url, PLAN, "task:")) == 1  # it did commit


def test_a_retry_after_a_lost_commit_answer_returns_the_recorded_result(
    postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    with Team("t", store=proxy.url) as team:
        executor = _executor(team)
        proxy.arm("answer lost")
        _call(executor, "update_planning", _create("answer lost"), "c-1")
        retry = _call(executor, "update_planning", _create("answer lost"), "c-1")
        assert retry.outcome is Outcome.OK, retry.message
        assert retry.value == "created ids: [1]"
        board = _call(executor, "search_planning", {}, "c-2")
    assert [t["description"] for t in _rows(postgres_url, PLAN, "task:")] == ["answer lost"]
    assert board.value.count("answer lost") == 1  # the actor reloaded what the store holds


def test_a_retry_after_a_commit_that_never_arrived_writes_the_task_once(
    postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    with Team("t", store=proxy.url) as team:
        executor = _executor(team)
        proxy.arm("commit lost", mode="commit")
        first = _call(executor, "update_planning", _create("commit lost"), "c-1")
        assert "outcome unknown" in first.message
        assert _rows(postgres_url, PLAN, "task:") == []  # the server rolled it back
        retry = _call(executor, "update_planning", _create("commit lost"), "c-1")
    assert retry.outcome is Outcome.OK, retry.message
    assert [t["description"] for t in _rows(postgres_url, PLAN, "task:")] == ["commit lost"]


def test_a_graph_change_retried_after_a_lost_commit_answer_is_applied_once(
    postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    entity = {"name": "ada", "entity_type": "person", "description": "answer lost"}
    args = {"create_entities": [entity]}
    with Team("t", store=proxy.url) as team:
        executor = _executor(team)
        proxy.arm("answer lost")
        first = _call(executor, "update_graph", args, "g-1")
        retry = _call(executor, "update_graph", args, "g-1")
    assert "outcome unknown" in first.message
    assert retry.outcome is Outcome.OK, retry.message
    assert retry.value.startswith("entities: 1 created")  # the first attempt's own answer
    assert len(_rows(postgres_url, GRAPH, "e:")) == 1


def test_a_ray_actor_retried_after_a_lost_commit_answer_returns_the_recorded_result(
    postgres_url: str, proxy: CommitCuttingProxy, ray_cluster: RayCluster
) -> None:
    from toolcards.runtime import RayActorSystem

    system = RayActorSystem(address=ray_cluster.address, namespace="commit-outcome")
    with Team("t", store=proxy.url, system=system) as team:
        executor = _executor(team)
        proxy.arm("answer lost")
        first = _call(executor, "update_planning", _create("answer lost"), "c-1")
        retry = _call(executor, "update_planning", _create("answer lost"), "c-1")
    assert "outcome unknown" in first.message
    assert retry.value == "created ids: [1]", retry.message
    assert len(_rows(postgres_url, PLAN, "task:")) == 1


def test_retries_under_new_call_ids_after_lost_commit_answers_duplicate(
    postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    """What the key prevents: a retry that is a new call (another id) writes again."""
    with Team("t", store=proxy.url) as team:
        executor = _executor(team)
        proxy.arm("answer lost")
        _call(executor, "update_planning", _create("answer lost"), "c-1")
        _call(executor, "update_planning", _create("answer lost"), "c-2")
    assert len(_rows(postgres_url, PLAN, "task:")) == 2
