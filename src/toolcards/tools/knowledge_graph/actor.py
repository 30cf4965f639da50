"""The ``#KnowledgeGraphTool`` team actor: one graph per team, persisted item by item."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from toolcards.core.errors import RetriableError
from toolcards.runtime import ToolActor, ToolActorContext
from toolcards.tools._common.fusion import VectorLink, VectorSync
from toolcards.tools._common.vector_api import GRAPH_COLLECTION
from toolcards.tools.knowledge_graph.graph import (
    ENTITY,
    RELATION,
    Graph,
    SearchResult,
    entity_text,
    relation_text,
)
from toolcards.tools.knowledge_graph.models import (
    Entity,
    Relation,
)

ACTOR_NAME = "#KnowledgeGraphTool"
COLLECTION = GRAPH_COLLECTION


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
        entities = [Entity.model_validate(v) for _, v in state.items(ENTITY)]
        relations = [Relation.model_validate(v) for _, v in state.items(RELATION)]
        self.graph = Graph(entities, relations)
        if self.settings.vector_store is not None:
            link = VectorLink(self.ctx.team, self.settings.vector_store, timeout=2.0)
            self.vectors = VectorSync(link, COLLECTION, state)
            docs = {ENTITY + e.name: entity_text(e) for e in entities}
            docs.update({RELATION + r.key: relation_text(r) for r in relations})
            self.vectors.load(docs)
            with state.batch():
                self.vectors.flush()

    def update(self, /, *args: Any, sender: str | None = None, **kwargs: Any) -> str:
        """Apply a batch; what failed is reported in one RetriableError after the rest applied.

        Takes the arguments of :meth:`Graph.apply` (create_entities, update_entities,
        delete_entities, create_relations, delete_relations) and passes them on; ``sender``
        (who writes) is recorded on the change's event.
        """
        change, errors = self.graph.apply(*args, **kwargs)
        state = self.ctx.state
        sync = self.vectors
        if not change.is_empty:
            with state.batch():
                for entity in (*change.entities_added, *change.entities_modified):
                    state.put(ENTITY + entity.name, entity.model_dump())
                    if sync is not None:
                        sync.changed(ENTITY + entity.name, entity_text(entity))
                for name in change.entities_removed:
                    state.delete(ENTITY + name)
                    if sync is not None:
                        sync.removed(ENTITY + name)
                for relation in change.relations_removed:
                    state.delete(RELATION + relation.key)
                    if sync is not None:
                        sync.removed(RELATION + relation.key)
                for relation in change.relations_added:
                    state.put(RELATION + relation.key, relation.model_dump())
                    if sync is not None:
                        sync.changed(RELATION + relation.key, relation_text(relation))
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
