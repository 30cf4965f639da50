"""Planning and graph cards with the real team vector store (the fast ``hash`` provider)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from toolcards import VectorStoreTool
from toolcards.runtime import Team
from toolcards.tools._common.fusion import KEYWORD_ONLY_NOTICE
from toolcards.tools.knowledge_graph import views as graph_views
from toolcards.tools.knowledge_graph.card import KnowledgeGraphTool
from toolcards.tools.planning.card import PlanningTool
from toolcards.tools.vector_store import actor as actor_mod
from toolcards.tools.vector_store.actor import VectorStoreActor
from toolcards.tools.vector_store.client import query


def bind(team: Team, member: str) -> dict[str, Any]:
    cards = [KnowledgeGraphTool(), PlanningTool(), VectorStoreTool(provider="hash")]
    factory = team.bind(cards, member=member)
    assert factory.cards[0].card_type == "VectorStoreTool"
    return {fn.__name__: fn for fn in factory.get_tools()}


def settle(team: Team, name: str = "#VectorStore") -> None:
    store = team.actor(name)
    assert store is not None
    store.ask(VectorStoreActor.flush).result(timeout=30)


def test_graph_vector_search_goes_through_the_store(team: Team) -> None:
    tools = bind(team, "alice")
    tools["update_graph"](
        create_entities=[
            {"name": "ledger", "entity_type": "Service", "description": "bookkeeping records"},
            {"name": "search", "entity_type": "Service", "description": "catalogue lookup"},
        ]
    )
    settle(team)
    out = tools["search_graph"]("bookkeeping", mode="vector")
    assert "ledger [Service]" in out and KEYWORD_ONLY_NOTICE not in out


def test_graph_relations_reach_the_store_and_survive_a_restart(tmp_path: Path) -> None:
    """A relation's id joins its ends and type with the unit separator: the one-line id check
    refused it, so no relation reached the store (and stored ones were dropped on restore)."""
    entities = [
        {"name": "ledger", "entity_type": "Service", "description": "books"},
        {"name": "billing", "entity_type": "Service", "description": "invoices"},
    ]
    relation = {"from_entity": "billing", "relation_type": "writes_to", "to_entity": "ledger"}
    store_path = tmp_path / "team.db"
    with Team("rel", store=store_path) as team:
        bind(team, "alice")["update_graph"](create_entities=entities, create_relations=[relation])
        settle(team)
        store = team.actor("#VectorStore")
        assert store is not None
        assert store.ask(VectorStoreActor.count, "knowledge_graph") == 3
    with Team.resume("rel", store=store_path) as team:
        bind(team, "alice")
        settle(team)
        store = team.actor("#VectorStore")
        assert store is not None
        assert store.ask(VectorStoreActor.count, "knowledge_graph") == 3


def test_an_entity_deleted_and_created_again_in_one_batch_keeps_its_row_and_vector(
    tmp_path: Path,
) -> None:
    """The rows were written before the removals were applied: the entity created again was
    deleted from the store (lost at a restart, its relation left without an end) and its
    vector removed at once."""
    store_path = tmp_path / "team.db"
    with Team("recreate", store=store_path) as team:
        tools = bind(team, "alice")
        old = {"name": "db", "entity_type": "Service", "description": "postgres cluster"}
        tools["update_graph"](create_entities=[old, {"name": "app", "entity_type": "Service"}])
        settle(team)
        tools["update_graph"](
            delete_entities=["db"],
            create_entities=[{**old, "entity_type": "Database"}],
            create_relations=[{"from_entity": "app", "to_entity": "db", "relation_type": "uses"}],
        )
        settle(team)
        assert "db [Database]" in tools["search_graph"]("postgres cluster", mode="vector")
    with Team.resume("recreate", store=store_path) as team:
        tools = bind(team, "alice")
        settle(team)
        store = team.actor("#VectorStore")
        assert store is not None
        assert store.ask(VectorStoreActor.count, "knowledge_graph") == 3
        out = tools["search_graph"]("postgres cluster", mode="vector", include_edges=True)
        assert "db [Database]" in out and "app -uses-> db" in out


def test_the_network_view_searches_the_store_of_the_graph(team: Team) -> None:
    """The view always queried ``#VectorStore``: a graph on another store got vector hits in
    ``search_graph`` and none in the dashboard's Graph panel."""
    docs = VectorStoreTool(name="Docs", provider="hash")
    factory = team.bind([docs, KnowledgeGraphTool(vector_store="Docs")], member="alice")
    tools = {fn.__name__: fn for fn in factory.get_tools()}
    tools["update_graph"](
        create_entities=[{"name": "band", "entity_type": "Group", "description": "The Who"}]
    )
    settle(team, "#Docs")
    search = graph_views.network(team, {}, "the who")["search"]
    assert search["mode"] == "hybrid"
    assert [e["name"] for e in search["entities"]] == ["band"]


def test_the_network_view_of_a_keyword_only_graph_queries_no_store(team: Team) -> None:
    """The view queried the team's ``#VectorStore`` for a graph that keeps no vectors."""
    cards = [VectorStoreTool(provider="hash"), KnowledgeGraphTool(vector_store=False)]
    factory = team.bind(cards, member="alice")
    tools = {fn.__name__: fn for fn in factory.get_tools()}
    tools["update_graph"](create_entities=[{"name": "band", "entity_type": "Group"}])
    settle(team)
    search = graph_views.network(team, {}, "band")["search"]
    assert (search["mode"], search["notice"]) == ("keyword", "")
    assert [e["name"] for e in search["entities"]] == ["band"]


def test_planning_search_goes_through_the_store(team: Team) -> None:
    tools = bind(team, "alice")
    tools["update_planning"](create=[{"description": "Rotate certificates"}])
    settle(team)
    assert team.actor("#VectorStore").ask(VectorStoreActor.count, "planning") == 1
    out = tools["search_planning"](query="certificates")
    assert "Rotate certificates" in out and KEYWORD_ONLY_NOTICE not in out


def test_resume_sends_only_changed_items_to_the_store(tmp_path: Path) -> None:
    db = tmp_path / "team.db"
    with Team("vs-resume", db) as team:
        tools = bind(team, "alice")
        tools["update_graph"](
            create_entities=[
                {"name": f"e{i}", "entity_type": "Note", "description": f"note {i}"}
                for i in range(20)
            ]
        )
        settle(team)
    with Team.resume("vs-resume", db) as team:
        tools = bind(team, "alice")
        settle(team)
        store = team.actor("#VectorStore")
        assert store is not None
        assert store.ask(VectorStoreActor.count, "knowledge_graph") == 20
        before = [e for e in team.events() if e.tool_id == "#VectorStore"]
        tools["update_graph"](update_entities=[{"name": "e3", "description": "changed"}])
        settle(team)
        after = [e for e in team.events() if e.tool_id == "#VectorStore"]
        assert len(after) - len(before) == 1
        assert "e:e3" in str(after[-1].payload)
        assert "e:e4" not in str(after[-1].payload)


class Gated:
    """A slow embedding service: every call waits for ``release`` (at most 10 s)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.started = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: list[str]) -> Any:
        self.started.set()
        self.release.wait(10)
        return self.inner.embed(texts)


def test_writes_a_stop_left_unembedded_are_embedded_after_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the graph and the board wrote their fingerprints when they told the store; the store
    # kept the pending embeddings in memory and dropped them at the stop: never sent again
    provider = Gated(actor_mod.provider_for(VectorStoreTool(provider="hash").config()))
    monkeypatch.setattr(actor_mod, "provider_for", lambda config: provider)
    db = tmp_path / "team.db"
    try:
        with Team("vs-stopped", db) as team:
            tools = bind(team, "alice")
            tools["update_graph"](
                create_entities=[
                    {"name": "ledger", "entity_type": "Service", "description": "bookkeeping"}
                ]
            )
            tools["update_planning"](create=[{"description": "Rotate certificates"}])
            assert provider.started.wait(10)  # the store is embedding: the team stops now
    finally:
        provider.release.set()
    with Team.resume("vs-stopped", db) as team:
        tools = bind(team, "alice")
        tools["search_graph"]("bookkeeping")  # a consumer that started before the store
        tools["search_planning"](query="certificates")  # the board loads on its first read
        settle(team)
        store = team.actor("#VectorStore")
        assert store is not None
        assert query(store, "knowledge_graph", "bookkeeping", 3)[0][0] == "e:ledger"
        assert query(store, "planning", "Rotate certificates", 3)[0][0] == "1"


def test_writes_whose_embedding_failed_are_embedded_after_resume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Down:
        def embed(self, texts: list[str]) -> Any:
            raise RuntimeError("the embedding service is down")

    working = actor_mod.provider_for
    monkeypatch.setattr(actor_mod, "provider_for", lambda config: Down())
    db = tmp_path / "team.db"
    with Team("vs-failed", db) as team:
        bind(team, "alice")["update_graph"](
            create_entities=[{"name": "ledger", "entity_type": "Service", "description": "books"}]
        )
        settle(team)  # the embedding failed
    monkeypatch.setattr(actor_mod, "provider_for", working)
    with Team.resume("vs-failed", db) as team:
        bind(team, "alice")["search_graph"]("books")
        settle(team)
        store = team.actor("#VectorStore")
        assert store is not None
        assert query(store, "knowledge_graph", "books", 3)[0][0] == "e:ledger"
