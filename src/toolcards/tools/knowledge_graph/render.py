"""Text the model reads about the graph."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from toolcards.governance.approvals.view import escaped_line as shown
from toolcards.tools.knowledge_graph.graph import SearchResult
from toolcards.tools.knowledge_graph.models import Entity, Relation

MAX_LINE = 400


def clip(text: str, limit: int = MAX_LINE) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def entity_line(entity: Entity, with_observations: bool = True) -> str:
    line = f"{entity.name} [{entity.entity_type}]" + (" (root)" if entity.is_root else "")
    if entity.description:
        line += f": {entity.description}"
    if with_observations and entity.observations:
        line += " | observations: " + "; ".join(entity.observations)
    return clip(shown(line))


def relation_line(relation: Relation) -> str:
    line = f"{relation.from_entity} -{relation.relation_type}-> {relation.to_entity}"
    return clip(shown(f"{line}: {relation.description}" if relation.description else line))


def search_text(result: SearchResult, notice: str = "") -> str:
    lines = [notice] if notice else []
    if not (result.entities or result.relations):
        lines.append("(no matches)")
    if result.entities:
        lines.append(f"Entities ({len(result.entities)}):")
        lines += [f"- {entity_line(e)} (score {s:.3f})" for e, s in result.entities]
    if result.relations:
        lines.append(f"Relations ({len(result.relations)}):")
        lines += [f"- {relation_line(r)} (score {s:.3f})" for r, s in result.relations]
    if result.neighbors:
        lines.append(f"Neighbors ({len(result.neighbors) + result.more_neighbors}):")
        lines += [f"- {entity_line(e, with_observations=False)}" for e in result.neighbors]
        if result.more_neighbors:
            lines.append(f"... {result.more_neighbors} more")
    if result.edges:
        lines.append(f"Edges ({len(result.edges) + result.more_edges}):")
        lines += [f"- {relation_line(r)}" for r in result.edges]
        if result.more_edges:
            lines.append(f"... {result.more_edges} more")
    if result.paths:
        lines.append(f"Paths ({len(result.paths)}):")
        lines += ["- " + shown(" ".join(path)) for path in result.paths]
    return "\n".join(lines)


def graph_summary(summary: dict[str, Any], hint_tools: Sequence[str]) -> str:
    """Counts, types, roots and a hint naming only the exposed tools."""
    lines = [
        f"**Knowledge graph:** {summary['entities']} entities, {summary['relations']} relations"
    ]
    if summary["types"]:
        types = shown(", ".join(f"{t} ({n})" for t, n in summary["types"]))
        more = summary["more_types"]
        lines.append(f"Types: {types}" + (f", ... {more} more" if more else ""))
    if summary["roots"]:
        lines.append("Root entities:")
        lines += [f"- {entity_line(e, with_observations=False)}" for e in summary["roots"]]
        if summary["more_roots"]:
            lines.append(f"... {summary['more_roots']} more")
    hints = []
    if "search_graph" in hint_tools:
        hints.append("search_graph(query) to find entities and relations")
    if "update_graph" in hint_tools:
        hints.append("update_graph(...) to record entities, observations and relations")
    if hints:
        lines.append("Use " + " and ".join(hints) + ".")
    return "\n".join(lines)
