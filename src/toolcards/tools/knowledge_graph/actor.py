"""The ``#KnowledgeGraphTool`` team actor: one graph per team, persisted item by item."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict

from toolcards.core.errors import RetriableError
from toolcards.runtime import ToolActor, ToolActorContext
from toolcards.tools._common.batch import short_reason
from toolcards.tools._common.fusion import VectorLink, VectorSync
from toolcards.tools._common.vector_api import GRAPH_COLLECTION
from toolcards.tools.knowledge_graph import graph as engine
from toolcards.tools.knowledge_graph.graph import (
    ENTITY,
    RELATION,
    Graph,
    SearchResult,
    entity_text,
    relation_text,
    text_size,
)
from toolcards.tools.knowledge_graph.models import (
    Entity,
    Relation,
)

if TYPE_CHECKING:
    from toolcards.stores.base import StateNamespace

logger = logging.getLogger(__name__)

ACTOR_NAME = "#KnowledgeGraphTool"
COLLECTION = GRAPH_COLLECTION

Item = TypeVar("Item", Entity, Relation)


def _entity(key: str, value: Any) -> Entity:
    entity = Entity.model_validate(value)
    if ENTITY + entity.name != key:
        raise ValueError(f"it names the entity {entity.name!r}")
    return entity


def _relation(key: str, value: Any) -> Relation:
    relation = Relation.model_validate(value)
    if RELATION + relation.key != key:
        raise ValueError(f"it holds the relation {relation.key!r}")
    return relation


def _read(
    state: StateNamespace,
    prefix: str,
    what: str,
    cap: int,
    room: int,
    parse: Callable[[str, Any], Item],
) -> tuple[list[Item], int]:
    """The valid rows under ``prefix`` (skipped ones logged by key), read a batch at a time
    up to ``cap`` rows or ``room`` characters of text, and the room left; what the caps
    leave out is counted in one log line."""
    items: list[Item] = []
    read = 0
    full = ""
    for key, value in state.iter_items(prefix):
        if read == cap:
            full = f"{cap} {what}"
            break
        try:
            item = parse(key, value)
        except ValueError as exc:
            logger.warning("%s: skipped stored row %r: %s", ACTOR_NAME, key, short_reason(exc))
            read += 1
            continue
        if text_size(item) > room:
            full = f"{engine.MAX_GRAPH_TEXT} characters of text"
            break
        room -= text_size(item)
        read += 1
        items.append(item)
    if full:
        left = state.count(prefix) - read
        logger.warning(
            "%s: %d stored %s past the cap of %s were not loaded", ACTOR_NAME, left, what, full
        )
    return items, room


def load_graph(state: StateNamespace) -> Graph:
    """The stored graph as a start loads it: at most the caps of the graph
    (:data:`~toolcards.tools.knowledge_graph.graph.MAX_ENTITIES`, ``MAX_RELATIONS``,
    ``MAX_GRAPH_TEXT``) read, a batch at a time (a million rows written around the tool were
    all read and indexed first: the actor did not start in 30 s). A row that is no valid item
    of its key is skipped, and so is a relation whose ends were not loaded: one row of wrong
    types kept the actor, and every member's graph tools, from starting."""
    room = engine.MAX_GRAPH_TEXT
    entities, room = _read(state, ENTITY, "entities", engine.MAX_ENTITIES, room, _entity)
    relations, _ = _read(state, RELATION, "relations", engine.MAX_RELATIONS, room, _relation)
    names = {e.name for e in entities}
    ends = [r for r in relations if r.from_entity in names and r.to_entity in names]
    if len(ends) < len(relations):
        logger.warning(
            "%s: %d stored relations whose ends were not loaded were not loaded",
            ACTOR_NAME,
            len(relations) - len(ends),
        )
    return Graph(entities, ends)


class GraphConfig(BaseModel):
    """What makes two bindings of the graph the same actor."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vector_store: str | None = None
    """The vector store actor's name, or None for keyword-only search."""


class KnowledgeGraphActor(ToolActor):
    """Owns the team's graph; every method runs on the actor's own thread, one at a time."""

    config_type = GraphConfig

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        super().__init__(ctx, config)
        self.settings = config if isinstance(config, GraphConfig) else GraphConfig()
        self.graph = Graph()
        self.vectors: VectorSync | None = None

    def on_start(self) -> None:
        state = self.ctx.state
        self.graph = load_graph(state)
        if self.settings.vector_store is not None:
            link = VectorLink(self.ctx.team, self.settings.vector_store, timeout=2.0)
            cap = engine.MAX_ENTITIES + engine.MAX_RELATIONS
            self.vectors = VectorSync(link, COLLECTION, state, cap=cap)
            docs = {ENTITY + e.name: entity_text(e) for e in self.graph.entities.values()}
            docs.update({RELATION + k: relation_text(r) for k, r in self.graph.relations.items()})
            self.vectors.load(docs)

    def update(self, /, *args: Any, sender: str | None = None, **kwargs: Any) -> str:
        """Apply a batch; what failed is reported in one RetriableError after the rest applied.

        Takes the arguments of :meth:`Graph.apply` (create_entities, update_entities,
        delete_entities, create_relations, delete_relations) and passes them on; ``sender``
        (who writes) is recorded on the change's event. Rows and vectors change in the order
        the graph applied the batch (removals, then entities, then relations), so an entity
        deleted and created again in one batch is stored and embedded as created.
        """
        change, errors = self.graph.apply(*args, **kwargs)
        state = self.ctx.state
        sync = self.vectors
        if not change.is_empty:
            removed = [RELATION + r.key for r in change.relations_removed]
            removed += [ENTITY + name for name in change.entities_removed]
            written: list[tuple[str, Entity | Relation, str]] = [
                (ENTITY + e.name, e, entity_text(e))
                for e in (*change.entities_added, *change.entities_modified)
            ]
            written += [(RELATION + r.key, r, relation_text(r)) for r in change.relations_added]
            with state.batch():
                for key in removed:
                    state.delete(key)
                    if sync is not None:
                        sync.removed(key)
                for key, item, text in written:
                    state.put(key, item.model_dump())
                    if sync is not None:
                        sync.changed(key, text)
                if sync is not None:
                    sync.flush()
                self.ctx.emit(change.payload(), sender=sender)
        done = (
            f"entities: {len(change.entities_added)} created, {len(change.entities_modified)} "
            f"updated, {len(change.entities_removed)} deleted; relations: "
            f"{len(change.relations_added)} created, {len(change.relations_removed)} deleted"
        )
        if errors:
            raise RetriableError(f"applied {done}. Errors: " + "; ".join(errors))
        return done

    def vector_store(self) -> str | None:
        """The name of the vector store this graph's vectors live in, or None (keyword only)."""
        return self.settings.vector_store

    def search(self, *args: Any, **kwargs: Any) -> SearchResult:
        """Ranked entities and relations with the requested graph context.

        Takes the arguments of :meth:`Graph.search` (query, mode, top_k, vector_hits,
        include_neighbors, include_edges, find_paths, rrf_k, weights, fusion, exhaustive) and
        passes them on.
        """
        if self.vectors is not None and self.vectors.pending:
            with self.ctx.state.batch():  # the store came up after this actor: catch it up
                self.vectors.flush()
        return self.graph.search(*args, **kwargs)

    def entity(self, name: str, max_relations: int) -> tuple[Entity, list[Relation], int] | None:
        """Entity ``name`` read by its key, its first ``max_relations`` relations (by key) and
        how many more it has; None when there is none. A keyword search missed a name of
        stopwords or punctuation, or one outranked by others."""
        found = self.graph.entities.get(name)
        if found is None:
            return None
        relations = self.graph.edges_of(name)
        return found, relations[:max_relations], max(0, len(relations) - max_relations)

    def summary(self, max_roots: int) -> dict[str, Any]:
        """Counts, entity types and root entities (kept up to date on every change)."""
        found = self.graph.summary(max_roots)
        return {field.name: getattr(found, field.name) for field in dataclasses.fields(found)}

    def apply_changes(self, upserts: Sequence[tuple[str, Any]], deleted: Sequence[str]) -> bool:
        """Take in the rows another process changed since this copy's version (called by the
        runtime, instead of a reload of the whole graph); False, changing nothing, when they
        are not only entities and relations (the copy is then reloaded whole)."""
        if self.vectors is not None:
            return False  # the vector fingerprints are reloaded with the graph
        entities: list[Entity] = []
        relations: list[Relation] = []
        try:
            for key, value in upserts:
                if key.startswith(ENTITY):
                    entities.append(Entity.model_validate(value))
                    if ENTITY + entities[-1].name != key:
                        return False
                elif key.startswith(RELATION):
                    relations.append(Relation.model_validate(value))
                    if RELATION + relations[-1].key != key:
                        return False
                else:
                    return False
        except ValueError:  # a row the graph would not load either
            return False
        if any(not key.startswith((ENTITY, RELATION)) for key in deleted):
            return False
        self.graph.merge(
            entities,
            relations,
            [key[len(ENTITY) :] for key in deleted if key.startswith(ENTITY)],
            [key[len(RELATION) :] for key in deleted if key.startswith(RELATION)],
        )
        return True
