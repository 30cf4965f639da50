"""The knowledge graph as views of the team's state (the card's RESOURCE channel): the MCP
resources ``toolcards://team/<team>/graph`` (counts, types, roots),
``.../graph/entity/{name}`` (one entity, read by name, and its relations) and
``.../graph/network`` (the dashboard's Graph panel: the network to draw, and the card's hybrid
search).

The network is read from the graph actor's persisted state (what the actor wrote before it
announced the change), at most :data:`MAX_NODES` entities and :data:`MAX_EDGES` relations
(a model makes rows freely: the rest are counted, never read). Nodes start on a circle, laid
out here so the page reads without JavaScript; the panel's script then spreads them with a
force layout. Search runs the card's own path: vector hits from the graph's own vector store
(when it has one and the store answers), fused with keyword hits by the graph actor.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from importlib import resources
from typing import Any

from pydantic_core import to_jsonable_python

from toolcards.core.views import Panel, TeamReader, TeamView, ViewNotFound
from toolcards.tools._common.fusion import VectorLink
from toolcards.tools.knowledge_graph.actor import ACTOR_NAME, COLLECTION, KnowledgeGraphActor

MAX_NODES = 150
MAX_EDGES = 4 * MAX_NODES
MAX_ROOTS = 50
MAX_RELATIONS = 50
MAX_QUERY = 500
TOP_K = 10
MIN_SCORE = 0.3
WIDTH, HEIGHT = 880, 520
ASK_TIMEOUT = 10.0
_ENTITY, _RELATION = "e:", "r:"
_EMPTY = {
    "entities": 0,
    "relations": 0,
    "types": [],
    "roots": [],
    "more_roots": 0,
    "more_types": 0,
}

_HERE = resources.files(__package__)
PANEL = Panel(
    "Graph",
    _HERE.joinpath("panel.html").read_text("utf-8"),
    script=_HERE.joinpath("panel.js").read_text("utf-8"),
)


def summary(team: TeamReader, variables: Mapping[str, str], query: str) -> Any:
    """Counts, entity types and root entities, from the running graph actor."""
    handle = team.actor(ACTOR_NAME)
    if handle is None:
        return dict(_EMPTY)
    found = handle.within(ASK_TIMEOUT).ask(KnowledgeGraphActor.summary, MAX_ROOTS)
    return to_jsonable_python(found, fallback=str)


def entity(team: TeamReader, variables: Mapping[str, str], query: str) -> Any:
    """One entity, read by its name, with its observations and first :data:`MAX_RELATIONS`
    relations (``more_relations`` counts the rest); :class:`ViewNotFound` when absent."""
    name = variables["name"]
    handle = team.actor(ACTOR_NAME)
    read = KnowledgeGraphActor.entity
    found = None if handle is None else handle.within(ASK_TIMEOUT).ask(read, name, MAX_RELATIONS)
    if found is None:
        raise ViewNotFound(f"no entity named {name!r:.100}")
    one, relations, more = found
    view = {"entity": one, "relations": relations, "more_relations": more}
    return to_jsonable_python(view, fallback=str)


def network(team: TeamReader, variables: Mapping[str, str], query: str) -> dict[str, Any]:
    """Nodes and edges to draw, and the hits of ``query`` (when given)."""
    state = team.state_of(ACTOR_NAME)
    total_entities = state.count(_ENTITY)
    if total_entities == 0 and team.actor(ACTOR_NAME) is None:
        return {"available": False}
    text = query.strip()
    search = _search(team, text) if text else None
    hit_names = {e["name"] for e in search["entities"]} if search else set()
    entities: dict[str, dict[str, Any]] = {}
    for _, value in state.iter_items(_ENTITY, batch=MAX_NODES):
        if isinstance(value, dict):
            entities[str(value.get("name"))] = value
            if len(entities) >= MAX_NODES:
                break  # the rows past the cap are never read
    for name in hit_names - entities.keys():  # hits are always drawn
        value = state.get(_ENTITY + name)
        if isinstance(value, dict):
            entities[name] = value
    edges = _edges_between(state, entities)
    total_relations = state.count(_RELATION)
    nodes = _circle(list(entities.values()), hit_names)
    at = {n["name"]: n for n in nodes}
    return {
        "available": True,
        "nodes": nodes,
        "edges": [
            {
                "source": e["from_entity"],
                "target": e["to_entity"],
                "type": str(e.get("relation_type", "")),
                "x1": at[e["from_entity"]]["x"],
                "y1": at[e["from_entity"]]["y"],
                "x2": at[e["to_entity"]]["x"],
                "y2": at[e["to_entity"]]["y"],
            }
            for e in edges
        ],
        "more_edges": max(0, total_relations - len(edges)),  # a writer may change rows between
        "total_entities": total_entities,
        "total_relations": total_relations,
        "width": WIDTH,
        "height": HEIGHT,
        "query": text,
        "search": search,
    }


def _edges_between(state: Any, entities: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The relations between ``entities`` among the first :data:`MAX_EDGES` in key order (by
    their from entity, as the entities drawn are): the rows past them are never read."""
    rows = itertools.islice(state.iter_items(_RELATION, batch=MAX_EDGES), MAX_EDGES)
    return [
        value
        for _, value in rows
        if isinstance(value, dict)
        and value.get("from_entity") in entities
        and value.get("to_entity") in entities
    ]


def _circle(entities: list[dict[str, Any]], hits: set[str]) -> list[dict[str, Any]]:
    """Nodes on a circle, roots first (a stable start for the force layout)."""
    entities.sort(key=lambda e: (not e.get("is_root"), str(e.get("name"))))
    count = max(len(entities), 1)
    radius = min(WIDTH, HEIGHT) / 2 - 40
    nodes = []
    for i, found in enumerate(entities):
        angle = 2 * math.pi * i / count - math.pi / 2
        nodes.append(
            {
                "name": str(found.get("name")),
                "type": str(found.get("entity_type", "")),
                "description": str(found.get("description", "")),
                "root": bool(found.get("is_root")),
                "hit": str(found.get("name")) in hits,
                "x": round(WIDTH / 2 + radius * math.cos(angle), 1),
                "y": round(HEIGHT / 2 + radius * math.sin(angle), 1),
            }
        )
    return nodes


def _search(team: TeamReader, query: str) -> dict[str, Any]:
    """The card's hybrid search: vector hits from the graph's own store (when it answers)
    fused by the actor."""
    text = query[:MAX_QUERY]
    handle = team.actor(ACTOR_NAME)
    if handle is None:
        return {"entities": [], "relations": [], "mode": "keyword", "notice": ""}
    store = handle.within(ASK_TIMEOUT).ask(KnowledgeGraphActor.vector_store)
    has_store = store is not None and team.actor(store) is not None
    link = VectorLink(team, store, timeout=5.0)
    hits, notice = link.query_above(COLLECTION, text, max(TOP_K * 3, 30), MIN_SCORE)
    mode = "hybrid" if hits is not None else "keyword"
    result = handle.within(ASK_TIMEOUT).ask(KnowledgeGraphActor.search, text, mode, TOP_K, hits)
    return {
        "entities": [
            {"name": e.name, "type": e.entity_type, "description": e.description, "score": score}
            for e, score in result.entities
        ],
        "relations": [
            {"source": r.from_entity, "target": r.to_entity, "type": r.relation_type, "score": s}
            for r, s in result.relations
        ],
        "mode": mode,
        "notice": notice if hits is None and has_store else "",
    }


VIEWS = (
    TeamView(
        "graph",
        "knowledge-graph",
        "The team's knowledge graph: counts, entity types and root entities.",
        summary,
        (ACTOR_NAME,),
    ),
    TeamView(
        "graph/entity/{name}",
        "knowledge-graph-entity",
        "One knowledge-graph entity with its observations and relations.",
        entity,
        (ACTOR_NAME,),
    ),
    TeamView(
        "graph/network",
        "knowledge-graph-network",
        "The knowledge graph's entities and relations to draw (at most 150 and 600).",
        network,
        (ACTOR_NAME,),
        PANEL,
        key="graph",
    ),
)
