"""The Graph panel: entities and relations as a drawn network, and the card's hybrid search.

The network is read from the graph actor's persisted state (what the actor wrote before it
announced the change), capped at :data:`MAX_NODES` entities. Nodes start on a circle, laid
out on the server so the page reads without JavaScript; ``graph.js`` then spreads them with a
force layout. Search runs the knowledge graph card's own path: vector hits from the team's
vector store (when there is one), fused with keyword hits by the graph actor.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from toolcards.tools._common.fusion import VectorLink
from toolcards.tools.knowledge_graph.actor import COLLECTION, KnowledgeGraphActor

if TYPE_CHECKING:
    from toolcards.runtime.team import Team

GRAPH = "#KnowledgeGraphTool"
VECTOR_STORE = "#VectorStore"
MAX_NODES = 150
MAX_QUERY = 500
TOP_K = 10
MIN_SCORE = 0.3
WIDTH, HEIGHT = 880, 520
_ENTITY, _RELATION = "e:", "r:"


def graph_view(team: Team | None, query: str | None = None) -> dict[str, Any]:
    """Nodes and edges to draw, and the hits of ``query`` (when given)."""
    if team is None:
        return {"available": False}
    state = team.state_of(GRAPH)
    total_entities = state.count(_ENTITY)
    if total_entities == 0 and team.actor(GRAPH) is None:
        return {"available": False}
    search = _search(team, query) if query else None
    hit_names = {e["name"] for e in search["entities"]} if search else set()
    entities: dict[str, dict[str, Any]] = {}
    for _, value in state.iter_items(_ENTITY):
        if isinstance(value, dict) and len(entities) < MAX_NODES:
            entities[str(value.get("name"))] = value
    for name in hit_names - entities.keys():  # hits are always drawn
        value = state.get(_ENTITY + name)
        if isinstance(value, dict):
            entities[name] = value
    edges = [
        value
        for _, value in state.iter_items(_RELATION)
        if isinstance(value, dict)
        and value.get("from_entity") in entities
        and value.get("to_entity") in entities
    ]
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
        "total_entities": total_entities,
        "total_relations": state.count(_RELATION),
        "width": WIDTH,
        "height": HEIGHT,
        "query": query or "",
        "search": search,
    }


def _circle(entities: list[dict[str, Any]], hits: set[str]) -> list[dict[str, Any]]:
    """Nodes on a circle, roots first (a stable start for the force layout)."""
    entities.sort(key=lambda e: (not e.get("is_root"), str(e.get("name"))))
    count = max(len(entities), 1)
    radius = min(WIDTH, HEIGHT) / 2 - 40
    nodes = []
    for i, entity in enumerate(entities):
        angle = 2 * math.pi * i / count - math.pi / 2
        nodes.append(
            {
                "name": str(entity.get("name")),
                "type": str(entity.get("entity_type", "")),
                "description": str(entity.get("description", "")),
                "root": bool(entity.get("is_root")),
                "hit": str(entity.get("name")) in hits,
                "x": round(WIDTH / 2 + radius * math.cos(angle), 1),
                "y": round(HEIGHT / 2 + radius * math.sin(angle), 1),
            }
        )
    return nodes


def _search(team: Team, query: str) -> dict[str, Any]:
    """The card's hybrid search: vector hits (when a store answers) fused by the actor."""
    text = query.strip()[:MAX_QUERY]
    handle = team.actor(GRAPH)
    if handle is None or not text:
        return {"entities": [], "relations": [], "mode": "keyword", "notice": ""}
    link = VectorLink(team, VECTOR_STORE if team.actor(VECTOR_STORE) else None, timeout=5.0)
    hits, notice = link.query_above(COLLECTION, text, max(TOP_K * 3, 30), MIN_SCORE)
    mode = "hybrid" if hits is not None else "keyword"
    result = handle.within(10.0).ask(KnowledgeGraphActor.search, text, mode, TOP_K, hits)
    return {
        "entities": [
            {
                "name": e.name,
                "type": e.entity_type,
                "description": e.description,
                "score": score,
            }
            for e, score in result.entities
        ],
        "relations": [
            {
                "source": r.from_entity,
                "target": r.to_entity,
                "type": r.relation_type,
                "score": score,
            }
            for r, score in result.relations
        ],
        "mode": mode,
        "notice": notice if hits is None and team.actor(VECTOR_STORE) else "",
    }
