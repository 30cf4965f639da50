"""Plain (ungoverned) tool calls retried after a fault write once: a pydantic-ai tool call runs
under ``<run id>/<tool call id>``, a direct caller gives its own key (``call_key``), and a
retry under the key is answered from the record the first commit left. An ask that timed out
says the call may still apply, and inside a governed call an ask waits until the call's own
deadline. Real PostgreSQL: behind a TCP proxy that withholds a COMMIT's answer, and with a
table lock held by another session."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pydantic_ai import ModelRetry, RunContext
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RunUsage

from faults.writers import stored_rows, stored_tasks
from support.pg_proxy import CommitCuttingProxy, commit_cutting_proxy
from support.scripted import wait_until
from support.servers import RayCluster
from toolcards import KnowledgeGraphTool, PlanningTool
from toolcards.core import actors
from toolcards.core.errors import TransientError
from toolcards.governance import Identity, Policy
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import Executor, Outcome
from toolcards.runtime import ActorTimeout, Team, call_key
from toolcards.tools.knowledge_graph.actor import ACTOR_NAME as GRAPH


@pytest.fixture
def short_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ask without a deadline of its own waits 4 s, not 10: the tests that wait one out
    wait less (what they check does not depend on the figure)."""
    monkeypatch.setattr(actors, "DEFAULT_ASK_TIMEOUT", 4.0)


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[CommitCuttingProxy]:
    with commit_cutting_proxy(postgres_url) as running:
        yield running


def _tools(team: Team) -> dict[str, Any]:
    cards = [PlanningTool(vector_store=False), KnowledgeGraphTool(vector_store=False)]
    return {t.__name__: t for t in team.bind(cards, member="w").get_tools()}


def _tasks(url: str) -> list[str]:
    return sorted(stored_tasks(url, "t").values())


def test_plain_retries_under_their_keys_after_lost_commit_answers_write_each_task_once(
    postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    """Ten creates whose COMMIT answer is lost, each retried once (before: 20 tasks)."""
    with Team("t", store=proxy.url) as team:
        update = _tools(team)["update_planning"]
        answers = []
        for i in range(10):
            proxy.arm(f"lost answer {i}")
            with call_key("writer", str(i)):
                with pytest.raises(TransientError, match="outcome unknown"):
                    update(create=[{"description": f"lost answer {i}"}])
                answers.append(update(create=[{"description": f"lost answer {i}"}]))
    assert proxy.cuts == 10
    assert answers == [f"created ids: [{i + 1}]" for i in range(10)]  # the first attempts'
    assert _tasks(postgres_url) == sorted(f"lost answer {i}" for i in range(10))


def test_a_plain_graph_change_retried_under_its_key_after_a_lost_commit_answer_applies_once(
    postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    ada = {"name": "ada", "entity_type": "person", "description": "answer lost"}
    with Team("t", store=proxy.url) as team:
        update = _tools(team)["update_graph"]
        proxy.arm("answer lost")
        with call_key("graph-1"):
            with pytest.raises(TransientError, match="outcome unknown"):
                update(create_entities=[ada])
            retry = update(create_entities=[ada])
    assert retry.startswith("entities: 1 created")  # not "'ada' already exists"
    assert len(stored_rows(postgres_url, "t", GRAPH, "e:")) == 1


def test_an_agent_tool_call_made_again_after_a_lost_commit_answer_writes_once(
    postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    """The cards' toolset keys each call by its run and tool call id: the same call made
    again (a durable run replaying it) is answered from the record."""
    with Team("t", store=proxy.url) as team:
        cards = [PlanningTool(vector_store=False)]
        toolset = team.bind(cards, member="w").toolset()
        ctx = RunContext(
            deps=None, model=TestModel(), usage=RunUsage(), run_id="run-1", tool_call_id="c-1"
        )
        args = {"create": [{"description": "answer lost"}]}

        async def call_twice() -> Any:
            tool = (await toolset.get_tools(ctx))["update_planning"]
            proxy.arm("answer lost")
            with pytest.raises(ModelRetry, match="outcome unknown"):
                await toolset.call_tool("update_planning", args, ctx, tool)
            return await toolset.call_tool("update_planning", args, ctx, tool)

        again = asyncio.run(call_twice())
    assert again == "created ids: [1]"
    assert _tasks(postgres_url) == ["answer lost"]


def test_a_plain_call_held_up_by_a_lock_times_out_saying_it_may_apply_and_its_retry_writes_once(
    postgres_url: str, short_asks: None
) -> None:
    """Another session holds the state table past the ask's deadline: the ask says the call
    may still apply; the retry under the same key, made while the first still waits, is
    answered with the first's result once the lock goes (before: the task was stored twice)."""
    with Team("t", store=postgres_url) as team:
        update = _tools(team)["update_planning"]
        update(create=[{"description": "before"}])
        retried: list[Any] = []
        with psycopg.connect(postgres_url) as other:
            other.execute("LOCK TABLE toolcards_state IN EXCLUSIVE MODE")  # writes wait
            with call_key("held-1"):
                with pytest.raises(ActorTimeout) as caught:
                    update(create=[{"description": "held up"}])

                def retry() -> None:
                    with call_key("held-1"):
                        retried.append(update(create=[{"description": "held up"}]))

                thread = threading.Thread(target=retry, daemon=True)
                thread.start()
            other.rollback()  # the lock goes: the first attempt commits
            thread.join(60)
        assert isinstance(caught.value, TimeoutError)
        assert "may still be running and apply its change" in str(caught.value)
        assert retried == ["created ids: [2]"]
        board = _tools(team)["search_planning"]()
    assert board.count("held up") == 1
    assert _tasks(postgres_url) == ["before", "held up"]


def test_a_governed_call_waits_on_its_actor_until_its_own_deadline(
    postgres_url: str, short_asks: None
) -> None:
    """Its 'timed out after 5 s' comes at 5 s, not at the ask's own 4 s, and says the call may
    still complete, which it then does."""
    with Team("t", store=postgres_url) as team:
        factory = team.bind([PlanningTool(vector_store=False)])
        executor = Executor(CapabilityRegistry.from_factory(factory), Policy.allow_all(), timeout=5)
        args = {"create": [{"description": "slow"}]}
        with psycopg.connect(postgres_url) as other:
            other.execute("LOCK TABLE toolcards_state IN EXCLUSIVE MODE")
            started = time.monotonic()
            result = asyncio.run(executor.call("update_planning", args, Identity("alice")))
            waited = time.monotonic() - started
            other.rollback()
        assert result.outcome is Outcome.ERROR, result.message
        assert "timed out after 5 s" in result.message
        assert "may still complete" in result.message
        assert waited >= 5  # the call's deadline answered, not the ask's own 4 s
        assert wait_until(lambda: _tasks(postgres_url) == ["slow"], 60)  # it did complete


def test_a_plain_retry_on_ray_under_its_key_after_a_lost_commit_answer_writes_once(
    postgres_url: str, proxy: CommitCuttingProxy, ray_cluster: RayCluster
) -> None:
    from toolcards.runtime import RayActorSystem

    system = RayActorSystem(address=ray_cluster.address, namespace="plain-retries")
    with Team("t", store=proxy.url, system=system) as team:
        update = _tools(team)["update_planning"]
        proxy.arm("answer lost")
        with call_key("ray-1"):
            with pytest.raises(TransientError, match="outcome unknown"):
                update(create=[{"description": "answer lost"}])
            retry = update(create=[{"description": "answer lost"}])
    assert retry == "created ids: [1]"
    assert _tasks(postgres_url) == ["answer lost"]
