"""Two copies of one planning actor, and of one knowledge graph, on one PostgreSQL store (two
teams in this process, each with its own Pykka copy, one reaching the database through a TCP
proxy): a copy catches up with the rows the other changed, without being rebuilt; it is
rebuilt when the store cannot tell what changed or its own commit failed."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from support.pg_proxy import CommitCuttingProxy, commit_cutting_proxy
from toolcards.core.actors import ActorHandle
from toolcards.core.errors import TransientError
from toolcards.runtime import Team
from toolcards.stores.postgres import versions as postgres_versions
from toolcards.stores.postgres.team import PostgresStore
from toolcards.tools.knowledge_graph.actor import ACTOR_NAME as GRAPH
from toolcards.tools.knowledge_graph.actor import GraphConfig, KnowledgeGraphActor
from toolcards.tools.knowledge_graph.models import (
    EntityCreate,
    EntityUpdate,
    RelationCreate,
    RelationRef,
)
from toolcards.tools.planning.actor import ACTOR_NAME, PlanningActor, PlanningConfig
from toolcards.tools.planning.models import TaskCreate, TaskUpdate

_copies = itertools.count(1)


class CountedPlanning(PlanningActor):
    """The planning actor, numbering each object built (a rebuild gets a new number)."""

    actor_tag = "tests:counted-planning"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.copy = next(_copies)

    def copy_number(self) -> int:
        return self.copy


Handle = ActorHandle[CountedPlanning]


def _plan(team: Team) -> Handle:
    return team.tool_actor(ACTOR_NAME, CountedPlanning, PlanningConfig(vector_store=None))


def _create(handle: Handle, *descriptions: str) -> list[int]:
    made = handle.ask(
        CountedPlanning.apply, "ann", [TaskCreate(description=d) for d in descriptions], [], []
    )
    return list(made["created"])


def _board(handle: Handle) -> dict[int, tuple[int, str, str]]:
    return {t.id: (t.version, t.status, t.description) for t in handle.ask(CountedPlanning.tasks)}


def _stored(url: str) -> dict[int, tuple[int, str, str]]:
    store = PostgresStore(url)
    try:
        rows = store.state_items("t", ACTOR_NAME, "task:")
    finally:
        store.close()
    return {
        int(v["id"]): (int(v["version"]), str(v["status"]), str(v["description"])) for _, v in rows
    }


@pytest.fixture
def proxy(postgres_url: str) -> Iterator[CommitCuttingProxy]:
    """The same database at a second address (one process runs a team once per address)."""
    with commit_cutting_proxy(postgres_url) as running:
        yield running


@pytest.fixture
def two(postgres_url: str, proxy: CommitCuttingProxy) -> Iterator[tuple[Handle, Handle]]:
    with Team("t", store=postgres_url) as a, Team("t", store=proxy.url) as b:
        yield _plan(a), _plan(b)


def test_a_copy_takes_in_another_copys_new_tasks_without_a_rebuild(
    two: tuple[Handle, Handle], postgres_url: str
) -> None:
    a, b = two
    _create(a, "first")
    b.ask(CountedPlanning.tasks)  # b's board is loaded
    copy = b.ask(CountedPlanning.copy_number)
    _create(a, "second", "third")
    assert _board(b) == _stored(postgres_url)
    assert [d for _, _, d in _board(b).values()] == ["first", "second", "third"]
    assert b.ask(CountedPlanning.copy_number) == copy


def test_a_copy_takes_in_another_copys_updates_and_deletes_without_a_rebuild(
    two: tuple[Handle, Handle], postgres_url: str
) -> None:
    a, b = two
    ids = _create(a, "keep", "drop", "change")
    b.ask(CountedPlanning.tasks)
    copy = b.ask(CountedPlanning.copy_number)
    a.ask(
        CountedPlanning.apply,
        "ann",
        [],
        [TaskUpdate(id=ids[2], version=1, status="completed")],
        [ids[1]],
    )
    assert _board(b) == _stored(postgres_url)
    assert sorted(_board(b)) == [ids[0], ids[2]]
    assert b.ask(CountedPlanning.copy_number) == copy


def test_a_copy_keeps_counting_ids_and_searching_after_taking_in_changes(
    two: tuple[Handle, Handle],
) -> None:
    a, b = two
    _create(b, "seed")  # b's board is loaded and in step
    _create(a, "zebra stripes")
    (made,) = _create(b, "after")
    assert made == 3  # b's next id moved past a's task
    found, total = b.ask(CountedPlanning.search, query="zebra")
    assert [t.description for t in found] == ["zebra stripes"]
    assert total == 3


def test_a_copy_older_than_the_pruned_tombstones_is_rebuilt_and_answers_the_store(
    two: tuple[Handle, Handle], postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(postgres_versions, "TOMBSTONES_KEPT", 1)
    a, b = two
    ids = _create(a, "one", "two", "three", "four")
    b.ask(CountedPlanning.tasks)
    copy = b.ask(CountedPlanning.copy_number)
    for task_id in ids[:3]:  # three commits that delete: the first tombstones are pruned
        a.ask(CountedPlanning.apply, "ann", [], [], [task_id])
    assert _board(b) == _stored(postgres_url)
    assert sorted(_board(b)) == [ids[3]]
    assert b.ask(CountedPlanning.copy_number) != copy


def test_a_copy_whose_commit_failed_is_rebuilt_and_answers_the_store(
    two: tuple[Handle, Handle], postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    other, cut = two  # cut's store is behind the proxy
    _create(cut, "kept")
    copy = cut.ask(CountedPlanning.copy_number)
    _cut_commit(proxy, cut)
    _create(other, "from the other copy")
    assert _board(cut) == _stored(postgres_url)
    assert [d for _, _, d in _board(cut).values()] == ["kept", "from the other copy"]
    assert cut.ask(CountedPlanning.copy_number) != copy


def _cut_commit(proxy: CommitCuttingProxy, handle: Handle) -> None:
    proxy.arm("never stored", mode="commit")
    with pytest.raises(TransientError):
        _create(handle, "never stored")
    assert proxy.cuts == 1


def test_the_store_tells_the_rows_written_and_the_keys_deleted_since_a_version(
    postgres_url: str,
) -> None:
    store = PostgresStore(postgres_url)
    try:
        store.state_put("t", "#A", "k1", 1)
        store.state_put("t", "#A", "k2", 2)
        store.state_put("t", "#B", "k3", 3)
        since = store.actor_version("t", "#A")
        with store.transaction():
            store.state_put("t", "#A", "k1", 10)
            store.state_delete("t", "#A", "k2")
            store.state_put("t", "#B", "k3", 30)
        assert store.state_changes("t", "#A", since) == ([("k1", 10)], ["k2"])
        assert store.state_changes("t", "#A", store.actor_version("t", "#A")) == ([], [])
    finally:
        store.close()


def test_a_store_written_before_rows_recorded_their_version_gains_the_column(
    postgres_url: str,
) -> None:
    PostgresStore(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("DROP INDEX toolcards_state_changed")
        conn.execute("ALTER TABLE toolcards_state DROP COLUMN changed")
        conn.execute("INSERT INTO toolcards_state VALUES ('t', '#A', 'old', '1')")
    store = PostgresStore(postgres_url)
    try:
        store.state_put("t", "#A", "new", 2)
        assert store.state_changes("t", "#A", 0) == ([("new", 2)], [])
        assert store.state_items("t", "#A") == [("new", 2), ("old", 1)]
    finally:
        store.close()


class CountedGraph(KnowledgeGraphActor):
    """The graph actor, numbering each object built, and showing its graph."""

    actor_tag = "tests:counted-graph"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.copy = next(_copies)

    def copy_number(self) -> int:
        return self.copy

    def shown(self) -> tuple[dict[str, Any], dict[str, Any], list[str], list[Any]]:
        """Entities and relations as dumped, what a keyword search for 'mathematician'
        finds, and the types with their counts."""
        graph = self.graph
        found = graph.search("mathematician", "keyword", 10)
        return (
            {name: e.model_dump() for name, e in graph.entities.items()},
            {key: r.model_dump() for key, r in graph.relations.items()},
            sorted(e.name for e, _ in found.entities),
            graph.summary(5).types,
        )


def _graph(team: Team) -> ActorHandle[CountedGraph]:
    return team.tool_actor(GRAPH, CountedGraph, GraphConfig(vector_store=None))


def _stored_graph(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
    store = PostgresStore(url)
    try:
        entities = {v["name"]: v for _, v in store.state_items("t", GRAPH, "e:")}
        relations = {k.removeprefix("r:"): v for k, v in store.state_items("t", GRAPH, "r:")}
    finally:
        store.close()
    return entities, relations


def _person(name: str, what: str) -> EntityCreate:
    return EntityCreate(name=name, entity_type="person", description=what)


def test_a_graph_copy_takes_in_another_copys_changes_without_a_rebuild(
    postgres_url: str, proxy: CommitCuttingProxy
) -> None:
    with Team("t", store=postgres_url) as one, Team("t", store=proxy.url) as two:
        a, b = _graph(one), _graph(two)
        a.ask(
            CountedGraph.update,
            create_entities=[_person("ada", "a mathematician"), _person("bob", "a mathematician")],
            create_relations=[
                RelationCreate(from_entity="ada", to_entity="bob", relation_type="knew")
            ],
        )
        b.ask(CountedGraph.shown)  # b's graph is loaded
        copy = b.ask(CountedGraph.copy_number)
        a.ask(
            CountedGraph.update,
            delete_entities=["bob"],  # with its relation
            create_entities=[_person("carol", "a mathematician"), _person("dan", "a poet")],
            update_entities=[EntityUpdate(name="ada", add_observations=["wrote notes"])],
            create_relations=[
                RelationCreate(from_entity="ada", to_entity="carol", relation_type="taught"),
                RelationCreate(from_entity="dan", to_entity="carol", relation_type="met"),
            ],
        )
        a.ask(
            CountedGraph.update,
            delete_relations=[
                RelationRef(from_entity="dan", to_entity="carol", relation_type="met")
            ],
            update_entities=[EntityUpdate(name="dan", entity_type="writer")],
        )
        entities, relations, found, types = b.ask(CountedGraph.shown)
        assert (entities, relations) == _stored_graph(postgres_url)
        assert entities["ada"]["observations"] == ["wrote notes"]
        assert [(r["from_entity"], r["to_entity"]) for r in relations.values()] == [
            ("ada", "carol")
        ]
        assert found == ["ada", "carol"]  # bob left the keyword index, carol joined it
        assert types == [("person", 2), ("writer", 1)]
        assert b.ask(CountedGraph.copy_number) == copy  # no rebuild
