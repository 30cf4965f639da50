"""A write reported failed is never seen again. With PostgreSQL stopped, or refusing
connections when the write begins, ``update_planning`` and ``update_graph`` answer a retry;
after the outage no answer, no stored row and no later write shows what they tried, and
their retries apply once. On the cluster's one Ray actor and on Pykka copies, called plainly
and governed (through the executor, under call ids)."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from support.scripted import once_served
from support.servers import PostgresServer, RayCluster
from toolcards import KnowledgeGraphTool, PlanningTool
from toolcards.core.errors import TransientError
from toolcards.governance import Identity, Policy
from toolcards.governance.capability import CapabilityRegistry
from toolcards.governance.executor.pipeline import Executor, Outcome
from toolcards.runtime import RayActorSystem, Team
from toolcards.stores.postgres.team import PostgresStore
from toolcards.stores.sqlite import team as sqlite_team
from toolcards.tools.knowledge_graph.actor import ACTOR_NAME as GRAPH
from toolcards.tools.planning.actor import ACTOR_NAME as PLAN

ALICE = Identity("alice")
_namespaces = itertools.count(1)


class Calls:
    """The planning and graph tools of one member, called plainly or governed. A call that
    ends in a retry raises :class:`TransientError` either way."""

    def __init__(self, team: Team, governed: bool) -> None:
        cards = [PlanningTool(vector_store=False), KnowledgeGraphTool(vector_store=False)]
        factory = team.bind(cards, "ann")
        self._tools = {t.__name__: t for t in factory.get_tools()}
        self._executor = (
            Executor(CapabilityRegistry.from_factory(factory), Policy.allow_all())
            if governed
            else None
        )
        self._reads = itertools.count(1)

    def __call__(self, tool: str, call_id: str | None = None, **args: Any) -> str:
        if self._executor is None:
            return str(self._tools[tool](**args))
        key = call_id or f"read-{next(self._reads)}"
        result = asyncio.run(self._executor.call(tool, args, ALICE, call_id=key))
        if result.outcome is Outcome.RETRY:
            raise TransientError(result.message)
        assert result.outcome is Outcome.OK, result.message
        return str(result.value)


@contextmanager
def _stopped(pg: PostgresServer, url: str) -> Iterator[None]:
    pg.stop("fast")
    try:
        yield
    finally:
        pg.start()


@contextmanager
def _refusing(pg: PostgresServer, url: str) -> Iterator[None]:
    pg.refuse(url)
    try:
        yield
    finally:
        pg.admit(url)


FAULTS = {"stopped": _stopped, "refusing": _refusing}


def _team(url: str, system: str, ray: RayCluster | None) -> Team:
    if system == "ray":
        assert ray is not None
        namespace = f"failed-writes-{next(_namespaces)}"
        return Team("t", store=url, system=RayActorSystem(address=ray.address, namespace=namespace))
    return Team("t", store=url)


def _stored(url: str) -> tuple[list[str], dict[str, list[str]]]:
    """The task descriptions and each entity's observations, as the store holds them."""
    store = PostgresStore(url)
    try:
        tasks = [str(v["description"]) for _, v in store.state_items("t", PLAN, "task:")]
        graph = {str(v["name"]): list(v["observations"]) for _, v in store.state_items("t", GRAPH)}
    finally:
        store.close()
    return tasks, graph


def _entity(name: str, *observations: str) -> dict[str, Any]:
    return {
        "name": name,
        "entity_type": "person",
        "description": "someone",
        "observations": list(observations),
    }


SYSTEMS = ["pykka", pytest.param("ray", marks=[pytest.mark.slow, pytest.mark.timeout(420)])]


@pytest.mark.parametrize("mode", ["plain", "governed"])
@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_a_write_reported_failed_is_not_shown_stored_or_written_later(
    pg: PostgresServer,
    pg_url: str,
    fault: str,
    system: str,
    mode: str,
    request: pytest.FixtureRequest,
) -> None:
    ray = request.getfixturevalue("ray_cluster") if system == "ray" else None
    team = _team(pg_url, system, ray)
    try:
        call = Calls(team, governed=mode == "governed")
        call("update_planning", "kept", create=[{"description": "kept task"}])
        call("update_graph", "ada", create_entities=[_entity("ada", "first fact")])
        failed = [
            ("update_planning", "phantom", {"create": [{"description": "phantom task"}]}),
            ("update_graph", "bob", {"create_entities": [_entity("bob", "phantom fact")]}),
            (
                "update_graph",
                "fact",
                {"update_entities": [{"name": "ada", "add_observations": ["lost fact"]}]},
            ),
        ]
        with FAULTS[fault](pg, pg_url):
            for tool, call_id, args in failed:
                with pytest.raises(TransientError):
                    call(tool, call_id, **args)

        # answers: whoever asks sees only what committed
        board = once_served(lambda: call("search_planning"))
        assert "kept task" in board and "phantom" not in board
        graph = once_served(lambda: call("search_graph", query="ada bob fact", mode="keyword"))
        assert "first fact" in graph
        assert "bob" not in graph and "phantom" not in graph and "lost fact" not in graph
        assert _stored(pg_url) == (["kept task"], {"ada": ["first fact"]})

        # a later, unrelated write stores only itself
        call("update_planning", "start", update=[{"id": 1, "version": 1, "status": "started"}])
        call("update_graph", "cy", create_entities=[_entity("cy")])
        assert _stored(pg_url) == (["kept task"], {"ada": ["first fact"], "cy": []})

        # each retry (under the failed call's id) applies, once
        answers = [call(tool, call_id, **args) for tool, call_id, args in failed]
        assert answers == [
            "created ids: [2]",
            "entities: 1 created, 0 updated, 0 deleted; relations: 0 created, 0 deleted",
            "entities: 0 created, 1 updated, 0 deleted; relations: 0 created, 0 deleted",
        ]
        assert _stored(pg_url) == (
            ["kept task", "phantom task"],
            {"ada": ["first fact", "lost fact"], "bob": ["phantom fact"], "cy": []},
        )
        board = call("search_planning")
        assert board.count("phantom task") == 1
    finally:
        team.stop(everywhere=True)


def test_a_write_that_cannot_begin_on_sqlite_is_not_shown_or_written_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On SQLite the transaction begins in the actor's batch: one that cannot begin (another
    connection holds the file's write lock past the busy timeout) is a retry, and the actor
    reloads before it answers again. The busy timeout is 0.5 s here (5 s by default): the
    test waits it out twice."""
    monkeypatch.setattr(sqlite_team, "BUSY_TIMEOUT", 0.5)
    path = tmp_path / "team.db"
    lost_fact = {"name": "ada", "add_observations": ["lost"]}
    with Team("t", store=str(path)) as team:
        call = Calls(team, governed=False)
        call("update_planning", create=[{"description": "kept task"}])
        call("update_graph", create_entities=[_entity("ada", "first fact")])
        holder = sqlite3.connect(path, isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")
            with pytest.raises(TransientError, match="locked"):
                call("update_planning", create=[{"description": "phantom task"}])
            with pytest.raises(TransientError, match="locked"):
                call("update_graph", update_entities=[lost_fact])
        finally:
            holder.close()
        board = call("search_planning")
        assert "kept task" in board and "phantom" not in board
        assert "lost" not in call("search_graph", query="ada", mode="keyword")
        assert call("update_planning", create=[{"description": "phantom task"}]) == (
            "created ids: [2]"
        )
        assert call("update_graph", update_entities=[lost_fact]).startswith(
            "entities: 0 created, 1 updated"
        )
        assert "first fact; lost" in call("search_graph", query="ada", mode="keyword")
