"""KnowledgeGraphTool: a team-shared graph of entities and relations with hybrid search."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, TypeAdapter

from toolcards.core.actors import ActorHandle
from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.channels import Channels
from toolcards.core.context import ContextState
from toolcards.core.errors import RetriableError
from toolcards.core.params import BaseToolParam
from toolcards.core.spec import annotate
from toolcards.tools._common.batch import parse_batch
from toolcards.tools._common.caller import writer_of
from toolcards.tools._common.fusion import (
    KEYWORD_ONLY_NOTICE,
    StoreRef,
    VectorLink,
    store_actor_name,
    tool_actor_with_link,
)
from toolcards.tools.knowledge_graph.actor import (
    ACTOR_NAME,
    COLLECTION,
    GraphConfig,
    KnowledgeGraphActor,
)
from toolcards.tools.knowledge_graph.graph import SearchResult
from toolcards.tools.knowledge_graph.models import (
    EntityCreate,
    EntityUpdate,
    Name,
    RelationCreate,
    RelationRef,
    SearchMode,
)
from toolcards.tools.knowledge_graph.render import entity_line, graph_summary, search_text
from toolcards.tools.knowledge_graph.views import VIEWS

MAX_BATCH = 200
MAX_QUERY = 1000
_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    "create_entities": TypeAdapter(list[EntityCreate]),
    "update_entities": TypeAdapter(list[EntityUpdate]),
    "delete_entities": TypeAdapter(list[Name]),
    "create_relations": TypeAdapter(list[RelationCreate]),
    "delete_relations": TypeAdapter(list[RelationRef]),
}


class GetGraph(BaseToolParam):
    """The graph summary: counts, entity types, root entities and a hint line."""

    expose: set[Channels] = Field(
        default_factory=lambda: {Channels.SYSTEM_PROMPT, Channels.COMMAND, Channels.RESOURCE}
    )
    max_roots: int = Field(default=20, ge=0, le=500)
    """At most this many root entities are listed."""


class UpdateGraph(BaseToolParam):
    """``update_graph(...)``: one batch of entity and relation changes."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL})


class SearchGraph(BaseToolParam):
    """``search_graph(query, mode, ...)``: keyword (BM25), vector, or both fused."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.TOOL_CALL, Channels.COMMAND})
    top_k: int = Field(default=10, ge=1, le=100)
    """Default number of hits."""
    score_threshold: float = Field(default=0.3, ge=-1.0, le=1.0)
    """Default minimum cosine similarity of a semantic hit."""
    fusion: Literal["scores", "rrf"] = "scores"
    """How ``hybrid`` fuses: ``scores`` adds the BM25 score, scaled by the most the query
    could score, to the cosine; ``rrf``: reciprocal-rank fusion of the ranks alone."""
    rrf_k: float = Field(default=10.0, gt=0)
    """The reciprocal-rank fusion constant (with ``fusion="rrf"``)."""
    keyword_weight: float = Field(default=1.0, ge=0)
    vector_weight: float = Field(default=1.0, ge=0)


class KnowledgeGraphTool(ToolCard):
    """A knowledge graph shared by the whole team: entities, observations and relations."""

    vector_store: StoreRef = True
    """True: the team's ``#VectorStore``; a name: that store; False: keyword search only."""
    get_graph: bool | GetGraph = True
    update_graph: bool | UpdateGraph = True
    search_graph: bool | SearchGraph = True

    run_state: ClassVar[frozenset[str]] = ToolCard.run_state | {"_handle", "_link"}

    _handle: ActorHandle[KnowledgeGraphActor] | None = PrivateAttr(default=None)
    _link: VectorLink | None = PrivateAttr(default=None)

    @property
    def optional_depends_on(self) -> list[str]:
        return ["VectorStoreTool"] if self.vector_store else []

    def _actor(self) -> ActorHandle[KnowledgeGraphActor]:
        if self._handle is None:
            config = GraphConfig(vector_store=store_actor_name(self.vector_store))
            self._handle, self._link = tool_actor_with_link(
                self, ACTOR_NAME, KnowledgeGraphActor, config
            )
        return self._handle

    def get_tools(self) -> list[ToolFunc]:
        self._actor()  # bound now: another vector_store setting for the actor fails the bind
        return super().get_tools()

    def _summary(self, param: GetGraph) -> str:
        tools = [f for f in ("search_graph", "update_graph") if self.exposed(f, Channels.TOOL_CALL)]
        return graph_summary(self._actor().ask(KnowledgeGraphActor.summary, param.max_roots), tools)

    # ---- capabilities -------------------------------------------------------------------------

    def _update_graph(self, param: UpdateGraph) -> ToolFunc:
        def update_graph(
            create_entities: list[EntityCreate] | None = None,
            update_entities: list[EntityUpdate] | None = None,
            delete_entities: list[str] | None = None,
            create_relations: list[RelationCreate] | None = None,
            delete_relations: list[RelationRef] | None = None,
        ) -> str:
            """Change the team's knowledge graph in one batch.

            Applied in this order: delete_relations, delete_entities (their relations go too),
            create_entities, update_entities, create_relations. Items that fail are reported
            together after the others were applied; fix only those and call again.

            Args:
                create_entities: New entities: unique name, entity_type, description,
                    observations (short facts), is_root.
                update_entities: Changes by name: description, entity_type,
                    add_observations, remove_observations, is_root.
                delete_entities: Names of entities to delete.
                create_relations: Directed relations: from_entity, to_entity, relation_type,
                    description.
                delete_relations: Relations to delete: from_entity, to_entity, relation_type.
            """
            given = {
                "create_entities": create_entities,
                "update_entities": update_entities,
                "delete_entities": delete_entities,
                "create_relations": create_relations,
                "delete_relations": delete_relations,
            }
            batch = {
                name: parse_batch(_ADAPTERS[name], value, name, MAX_BATCH)
                for name, value in given.items()
            }
            if not any(batch.values()):
                raise RetriableError("nothing to do: give at least one list of changes")
            result: str = self._actor().ask_once(  # a retry of a committed call writes nothing
                KnowledgeGraphActor.update, sender=writer_of(self), **batch
            )
            return result

        return annotate(update_graph)

    def _search_graph(self, param: SearchGraph) -> ToolFunc:
        def search_graph(
            query: str,
            mode: SearchMode = "hybrid",
            top_k: int | None = None,
            score_threshold: float | None = None,
            include_neighbors: bool = False,
            include_edges: bool = False,
            find_paths: bool = False,
        ) -> str:
            """Search entities and relations of the team's knowledge graph.

            Args:
                query: Words, names or a question.
                mode: "hybrid" (keywords and meaning, fused), "keyword" (BM25 only), or
                    "vector" (meaning only).
                top_k: Most hits to return (default from configuration).
                score_threshold: Minimum cosine similarity of a meaning match (0 to 1).
                include_neighbors: Also list entities one relation away from the hits.
                include_edges: Also list every relation touching the entity hits.
                find_paths: Also list shortest paths between the top entity hits.
            """
            if not isinstance(query, str) or not query.strip():
                raise RetriableError("query must be a non-empty string")
            if mode not in ("hybrid", "keyword", "vector"):
                raise RetriableError('mode must be "hybrid", "keyword" or "vector"')
            k = param.top_k if top_k is None else top_k
            if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 100:
                raise RetriableError("top_k must be an integer from 1 to 100")
            threshold = param.score_threshold if score_threshold is None else score_threshold
            if isinstance(threshold, bool) or not isinstance(threshold, int | float):
                raise RetriableError("score_threshold must be a number from 0 to 1")
            text = query.strip()[:MAX_QUERY]
            actor = self._actor()
            hits = None
            notice = ""
            if mode != "keyword" and self._link is not None:
                hits, notice = self._link.query_above(
                    COLLECTION, text, max(k * 3, 30), float(threshold)
                )
            elif mode != "keyword" and self.vector_store is False:
                notice = KEYWORD_ONLY_NOTICE if mode == "vector" else ""
            result: SearchResult = actor.ask(
                KnowledgeGraphActor.search,
                text,
                mode if hits is not None else "keyword",
                k,
                hits,
                bool(include_neighbors),
                bool(include_edges),
                bool(find_paths),
                param.rrf_k,
                (param.keyword_weight, param.vector_weight),
                param.fusion,
            )
            return search_text(result, notice)

        return annotate(search_graph, readonly=True, idempotent=True)

    # ---- hooks --------------------------------------------------------------------------------

    def _summary_prompt(self, param: GetGraph) -> Callable[[], str]:
        return lambda: self._summary(param)

    def _summary_command(self, param: GetGraph) -> ToolFunc:
        def get_graph() -> str:
            """Show the knowledge graph summary."""
            return self._summary(param)

        return get_graph

    def _context_state(self, param: GetGraph) -> Callable[[], ContextState]:
        def state() -> ContextState:
            summary = self._actor().ask(KnowledgeGraphActor.summary, param.max_roots)
            title = (
                f"Knowledge graph ({summary['entities']} entities, "
                f"{summary['relations']} relations); root entities"
            )
            items = {e.name: entity_line(e, with_observations=False) for e in summary["roots"]}
            return ContextState(key="knowledge_graph", title=title, items=items)

        return state

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "get_graph": CardCapability(
            system_prompt=_summary_prompt,
            context=_context_state,
            command=_summary_command,
            resource=lambda card, param: VIEWS,
        ),
        "update_graph": CardCapability(tool=_update_graph),
        "search_graph": CardCapability(tool=_search_graph, command=_search_graph),
    }
