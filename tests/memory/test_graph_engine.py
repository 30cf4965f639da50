"""The knowledge-graph engine: batch order, collected errors, cascades, search, paths."""

from __future__ import annotations

from typing import Literal

import pytest
from pydantic import ValidationError

from toolcards.tools.knowledge_graph import graph as graph_engine
from toolcards.tools.knowledge_graph.graph import MAX_PATH_VISITS, Graph
from toolcards.tools.knowledge_graph.models import (
    Entity,
    EntityCreate,
    EntityUpdate,
    Relation,
    RelationCreate,
    RelationRef,
    SearchMode,
)
from toolcards.tools.knowledge_graph.render import search_text


def ent(name: str, kind: str = "Service", desc: str = "", root: bool = False) -> EntityCreate:
    return EntityCreate(name=name, entity_type=kind, description=desc, is_root=root)


def rel(a: str, b: str, kind: str = "calls") -> RelationCreate:
    return RelationCreate(from_entity=a, to_entity=b, relation_type=kind)


@pytest.fixture
def graph() -> Graph:
    g = Graph()
    change, errors = g.apply(
        create_entities=[
            ent("checkout", desc="Takes orders and payments from shoppers"),
            ent("ledger", desc="Double-entry accounting records"),
            ent("alice", kind="Person", desc="Payments team lead"),
            ent("search-api", desc="Product catalogue search"),
        ],
        create_relations=[rel("checkout", "ledger"), rel("alice", "checkout", "owns")],
    )
    assert errors == [] and len(change.entities_added) == 4
    return g


def test_entities_and_relations_in_one_batch(graph: Graph) -> None:
    assert len(graph.relations) == 2


def test_duplicate_entity_is_an_error_but_rest_applies(graph: Graph) -> None:
    change, errors = graph.apply(create_entities=[ent("ledger"), ent("billing")])
    assert [e.name for e in change.entities_added] == ["billing"]
    assert len(errors) == 1 and "already exists" in errors[0]


def test_all_errors_are_collected(graph: Graph) -> None:
    _, errors = graph.apply(
        update_entities=[EntityUpdate(name="ghost", description="x")],
        delete_entities=["nobody"],
        create_relations=[rel("checkout", "phantom")],
        delete_relations=[RelationRef(from_entity="a", to_entity="b", relation_type="c")],
    )
    assert len(errors) == 4


def test_delete_entity_cascades_to_its_relations(graph: Graph) -> None:
    change, errors = graph.apply(delete_entities=["checkout"])
    assert errors == []
    assert len(change.relations_removed) == 2
    assert graph.relations == {}
    assert graph.search("orders", "keyword", 5).entities == []


def test_delete_then_recreate_in_one_batch(graph: Graph) -> None:
    change, errors = graph.apply(delete_entities=["ledger"], create_entities=[ent("ledger")])
    assert errors == []
    assert change.entities_removed == ["ledger"] and change.entities_added[0].name == "ledger"


def test_relation_to_entity_created_in_same_batch(graph: Graph) -> None:
    _, errors = graph.apply(
        create_entities=[ent("fraud")], create_relations=[rel("fraud", "ledger")]
    )
    assert errors == []


def test_update_adds_and_removes_observations(graph: Graph) -> None:
    graph.apply(update_entities=[EntityUpdate(name="alice", add_observations=["likes Go", "x"])])
    change, errors = graph.apply(
        update_entities=[EntityUpdate(name="alice", remove_observations=["x"], is_root=True)]
    )
    assert errors == []
    alice = graph.entities["alice"]
    assert alice.observations == ["likes Go"] and alice.is_root
    assert change.entities_modified == [alice]


def test_an_event_of_a_batch_at_its_maxima_stays_small() -> None:
    """An event copied every changed entity whole (up to ~51 KB each) and every relation a
    cascade removed: now names, the fields changed and a few observations cut short, for
    the first 100 items; the rest are counted."""
    g = Graph()
    names = [f"{i:03d}" + "n" * 197 for i in range(200)]
    g.apply(create_entities=[ent(n, kind="t" * 100, desc="d" * 1000) for n in names])
    g.apply(create_relations=[rel(names[0], n, "r" * 100) for n in names[1:]])
    facts = [f"{j:03d}" + "o" * (497 if j < 3 else 47) for j in range(100)]  # 7,350 in all
    g.apply(update_entities=[EntityUpdate(name=n, add_observations=facts) for n in names])
    change, errors = g.apply(
        update_entities=[
            EntityUpdate(name=n, description="e", is_root=True, remove_observations=facts)
            for n in names
        ]
    )
    assert errors == [] and len(change.entities_modified) == 200
    delta = change.payload()
    assert len(delta.model_dump_json()) < 128_000
    told = delta.entities_modified[0]
    assert (told.name, told.changed) == (names[0], ["description", "observations", "is_root"])
    assert told.observations_removed == [f[:99] + "…" for f in facts[:3]]
    assert told.more_observations == 97 and delta.more == {"entities_modified": 100}
    change, _ = g.apply(delete_entities=[names[0]])  # the hub, with its 199 relations
    delta = change.payload()
    assert delta.entities_removed == [names[0]] and len(delta.relations_removed) == 99
    assert delta.relations_removed[0].to_entity == names[1]
    assert delta.more == {"relations_removed": 100}


def test_an_update_naming_a_missing_observation_changes_nothing(graph: Graph) -> None:
    """The item was reported failed, yet its description, type and the removals it could
    make were committed: a failing item is skipped whole, as every other one is."""
    graph.apply(update_entities=[EntityUpdate(name="alice", add_observations=["likes Go"])])
    before = graph.entities["alice"]
    change, errors = graph.apply(
        update_entities=[
            EntityUpdate(
                name="alice",
                description="Gone",
                entity_type="Retired",
                remove_observations=["likes Go", "no such fact"],
            ),
            EntityUpdate(name="ledger", description="Books"),
        ]
    )
    assert errors == ["update_entities: 'alice' has no observation 'no such fact'"]
    assert graph.entities["alice"] == before
    assert change.entities_modified == [graph.entities["ledger"]]


def test_an_entity_holds_at_most_its_cap_of_text(graph: Graph) -> None:
    """A description and 100 observations of 500 characters made ~51 KB an entity, ~2.1 GB
    at the entity cap, all rebuilt on each start: an entity holds at most 8,000 now."""
    facts = [f"{j:02d}" + "o" * 498 for j in range(15)]  # 7,500 characters
    change, errors = graph.apply(
        create_entities=[
            EntityCreate(name="fat", entity_type="T", description="d" * 501, observations=facts),
            EntityCreate(name="fit", entity_type="T", description="d" * 500, observations=facts),
        ]
    )
    assert [e.name for e in change.entities_added] == ["fit"]
    assert errors == [
        "create_entities: 'fat' would hold 8,001 characters of description and observations, "
        "at most 8,000: shorten them"
    ]
    change, errors = graph.apply(update_entities=[EntityUpdate(name="fit", add_observations=["x"])])
    assert change.is_empty and errors[0].startswith("update_entities: 'fit' would hold 8,001")
    assert graph.entities["fit"].observations == facts
    facts = [f"{j:02d}" + "o" * 498 for j in range(30)]
    stored = Entity(name="old", entity_type="T", observations=facts)  # kept from before
    kept = Graph([stored])
    change, _ = kept.apply(update_entities=[EntityUpdate(name="old", is_root=True)])
    assert len(change.entities_modified) == 1  # it may stay as large, or shrink
    _, errors = kept.apply(update_entities=[EntityUpdate(name="old", add_observations=["x"])])
    assert errors[0].startswith("update_entities: 'old' would hold 15,001 characters")


def test_a_graph_holds_at_most_its_cap_of_text(
    graph: Graph, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The caps counted entities and relations only: the graph's text, counted as it is
    created, updated and deleted, is capped too; what would grow it past is refused."""
    loaded = Graph(graph.entities.values(), graph.relations.values())
    assert loaded.text == graph.text > 0  # counted item by item as a load counts it
    most = graph.text + 10
    monkeypatch.setattr(graph_engine, "MAX_GRAPH_TEXT", most)
    change, errors = graph.apply(  # 16 and 20 characters past 10, then 8 of them
        create_entities=[ent("a" * 9), ent("big", desc="x" * 10), ent("b")],
        update_entities=[
            EntityUpdate(name="ledger", description="Double-entry accounting records, kept")
        ],
        create_relations=[rel("ledger", "search-api", "r")],
    )
    assert [e.name for e in change.entities_added] == ["b"] and graph.text == most - 2
    cap = f"the graph holds at most {most:,} characters of text: delete some first"
    assert errors == [
        f"create_entities: 2 not created, {cap}",
        f"update_entities: 1 not applied, {cap}",
        f"create_relations: 1 not created, {cap}",
    ]
    change, errors = graph.apply(  # deleting and shrinking make room
        delete_entities=["checkout"],
        update_entities=[EntityUpdate(name="ledger", description="")],
        create_relations=[rel("ledger", "search-api", "r")],
    )
    assert errors == [] and len(change.relations_added) == 1
    assert graph.text == Graph(graph.entities.values(), graph.relations.values()).text


def test_no_op_update_is_not_a_change(graph: Graph) -> None:
    change, _ = graph.apply(update_entities=[EntityUpdate(name="alice")])
    assert change.is_empty


def test_keyword_search_finds_by_description(graph: Graph) -> None:
    result = graph.search("accounting", "keyword", 5)
    assert [e.name for e, _ in result.entities] == ["ledger"]


def test_relations_are_searchable(graph: Graph) -> None:
    result = graph.search("owns", "keyword", 5)
    assert [r.relation_type for r, _ in result.relations] == ["owns"]


def test_hybrid_fuses_vector_hits(graph: Graph) -> None:
    result = graph.search("money bookkeeping", "hybrid", 3, vector_hits=[("e:ledger", 0.7)])
    assert result.entities[0][0].name == "ledger"


def test_vector_hits_for_unknown_ids_are_ignored(graph: Graph) -> None:
    result = graph.search("x", "vector", 3, vector_hits=[("e:deleted", 0.9), ("bogus", 0.9)])
    assert result.entities == [] and result.relations == []


@pytest.mark.parametrize(
    ("mode", "fusion"), [("vector", "scores"), ("hybrid", "scores"), ("hybrid", "rrf")]
)
def test_vector_hits_the_graph_no_longer_holds_take_no_place(
    graph: Graph, mode: SearchMode, fusion: Literal["scores", "rrf"]
) -> None:
    # a store lagging behind a removal still names the removed entity, best first: it is passed
    # over and the next hits fill its place, as if the store had not named it
    known = [("e:ledger", 0.8), ("e:checkout", 0.6), ("e:alice", 0.5), ("e:search-api", 0.4)]
    stale = [("e:deleted", 0.95), ("bogus", 0.9), *known[:2], ("e:gone", 0.55), *known[2:]]
    for k in (1, 2, 3, 4):
        got = graph.search("payments records", mode, k, vector_hits=stale, fusion=fusion)
        want = graph.search("payments records", mode, k, vector_hits=known, fusion=fusion)
        assert (got.entities, got.relations) == (want.entities, want.relations)
        assert len(got.entities) + len(got.relations) == k


def test_neighbors_and_edges(graph: Graph) -> None:
    result = graph.search("accounting", "keyword", 1, include_neighbors=True, include_edges=True)
    assert [e.name for e in result.neighbors] == ["checkout"]
    assert [r.to_entity for r in result.edges] == ["ledger"]


def test_a_hubs_neighbors_and_edges_are_shown_up_to_fifty_and_counted() -> None:
    """A hub with 120 relations: its search shows 50 neighbours and 50 edges and counts the
    rest (a hub's thousands made a 220,000-character result at top_k=1)."""
    g = Graph()
    spokes = [ent(f"spoke{i}") for i in range(120)]
    g.apply(create_entities=[ent("hub", desc="the hub"), *spokes])
    g.apply(create_relations=[rel("hub", f"spoke{i}") for i in range(120)])
    result = g.search("hub", "keyword", 1, include_neighbors=True, include_edges=True)
    assert [e.name for e, _ in result.entities] == ["hub"]
    assert (len(result.neighbors), result.more_neighbors) == (50, 70)
    assert (len(result.edges), result.more_edges) == (50, 70)
    text = search_text(result)
    assert "Neighbors (120):" in text and "Edges (120):" in text
    assert text.count("... 70 more") == 2


def test_a_relation_loaded_without_its_end_shows_no_neighbour_and_raises_nothing() -> None:
    """Rows written around the actor (or an entity row the store once failed to read back)
    can leave a relation whose end is not in the graph: search with neighbours raised
    KeyError for every query that reached it."""
    checkout = Entity(name="checkout", entity_type="Service", description="takes orders")
    ledger = Entity(name="ledger", entity_type="Service")
    edges = [Relation(from_entity="checkout", to_entity=end, relation_type="calls")
             for end in ("ghost", "ledger")]  # fmt: skip
    g = Graph([checkout, ledger], edges)
    result = g.search("orders", "keyword", 1, include_neighbors=True, find_paths=True)
    assert [e.name for e in result.neighbors] == ["ledger"] and result.more_neighbors == 0


def test_paths_between_hits(graph: Graph) -> None:
    assert graph.shortest_path("alice", "ledger") == [
        "alice",
        "-owns->",
        "checkout",
        "-calls->",
        "ledger",
    ]
    assert graph.shortest_path("ledger", "search-api") == []


def test_find_paths_in_search(graph: Graph) -> None:
    result = graph.search("payments accounting", "keyword", 5, find_paths=True)
    assert any(p[0] in {"alice", "checkout", "ledger"} and len(p) > 1 for p in result.paths)


class CountedRelations(dict[str, Relation]):
    """A graph's relations, counting the lookups by key (what a path search looks at)."""

    looked = 0

    def __getitem__(self, key: str) -> Relation:
        self.looked += 1
        return super().__getitem__(key)


def test_path_finding_through_hubs_looks_at_a_bounded_number_of_relations() -> None:
    """Two hubs tied to every entity: each of a search's 10 path searches went through the
    whole graph (one search held the graph's actor ~2.7 s at its caps)."""
    spokes = [Entity(name=f"n{i:05d}", entity_type="T", description="alpha") for i in range(6000)]
    hubs = [Entity(name=hub, entity_type="Hub") for hub in ("hub-a", "hub-b")]
    edges = [Relation(from_entity=hub, to_entity=spoke.name, relation_type="has")
             for hub in ("hub-a", "hub-b") for spoke in spokes]  # fmt: skip
    found = []
    for order in (1, -1):  # the same graph built in another order finds the same paths
        g = Graph(hubs + spokes[::order], edges[::order])
        g.relations = counted = CountedRelations(g.relations)
        found.append(g.search("alpha", "keyword", 5, find_paths=True).paths)
        assert counted.looked <= MAX_PATH_VISITS
    first = found[0][0]
    assert first[1:4] == ["<-has-", "hub-a", "-has->"] and len(found[0]) == 10
    assert found[0] == found[1]


def test_an_entitys_relations_sorted_once_follow_its_changes(graph: Graph) -> None:
    assert [r.relation_type for r in graph.edges_of("checkout")] == ["owns", "calls"]
    graph.apply(create_relations=[rel("checkout", "alice", "asks")])
    assert [r.relation_type for r in graph.edges_of("checkout")] == ["owns", "asks", "calls"]
    graph.apply(delete_entities=["alice"])
    assert [r.relation_type for r in graph.edges_of("checkout")] == ["calls"]


def test_restored_graph_rebuilds_adjacency_and_index(graph: Graph) -> None:
    again = Graph(graph.entities.values(), graph.relations.values())
    assert again.search("accounting", "keyword", 3).entities[0][0].name == "ledger"
    assert len(again.edges_of("checkout")) == 2


def test_blank_and_oversized_names_are_rejected() -> None:
    with pytest.raises(ValidationError):
        EntityCreate(name="   ", entity_type="x")
    with pytest.raises(ValidationError):
        EntityCreate(name="n" * 201, entity_type="x")


def test_delete_takes_a_name_exactly_as_given(graph: Graph) -> None:
    """Delete names were stripped again here: ``"ledger\\u3000"`` deleted ``ledger``."""
    change, errors = graph.apply(delete_entities=["ledger\u3000", " ledger", "ledger\u00a0"])
    assert change.entities_removed == [] and len(errors) == 3
    assert "ledger" in graph.entities and len(graph.edges_of("ledger")) == 1


@pytest.mark.parametrize("padded", ["ledger\u3000", "\u2028ledger", "ledger\u00a0", "ledger "])
def test_names_and_types_are_taken_unstripped_or_refused(padded: str) -> None:
    with pytest.raises(ValidationError):
        EntityUpdate(name=padded)
    with pytest.raises(ValidationError):
        EntityCreate(name="ledger", entity_type=padded)
    with pytest.raises(ValidationError):
        RelationRef(from_entity="a", to_entity=padded, relation_type="calls")


def test_a_copy_merging_the_rows_another_copy_changed_answers_as_a_graph_loaded_from_them(
    graph: Graph,
) -> None:
    copy = Graph(graph.entities.values(), graph.relations.values())
    batches = [
        {
            "create_entities": [ent("bob", kind="Person", desc="Ledger and payments auditor")],
            "update_entities": [EntityUpdate(name="ledger", add_observations=["audited by bob"])],
            "create_relations": [rel("bob", "ledger", "audits")],
        },
        {"delete_entities": ["checkout"]},  # with both of its relations
        {
            "create_entities": [ent("checkout", desc="Orders again"), ent("cart")],
            "update_entities": [EntityUpdate(name="alice", entity_type="Lead", is_root=True)],
            "create_relations": [rel("cart", "checkout"), rel("alice", "cart", "owns")],
        },
        {
            "delete_relations": [
                RelationRef(from_entity="cart", to_entity="checkout", relation_type="calls")
            ]
        },
    ]
    for batch in batches:
        change, errors = graph.apply(**batch)
        assert errors == []
        copy.merge(
            [*change.entities_added, *change.entities_modified],
            change.relations_added,
            change.entities_removed,
            [r.key for r in change.relations_removed],
        )
    loaded = Graph(graph.entities.values(), graph.relations.values())
    assert copy.entities == loaded.entities and copy.relations == loaded.relations
    for query in ("payments", "ledger auditor", "orders", "owns cart", "checkout calls"):
        assert copy.search(query, "keyword", 10) == loaded.search(query, "keyword", 10), query
    assert {n: copy.edges_of(n) for n in copy.entities} == {
        n: loaded.edges_of(n) for n in loaded.entities
    }
    assert dict(copy.summary(10).types) == dict(loaded.summary(10).types)
    assert [e.name for e in copy.summary(10).roots] == ["alice"]
