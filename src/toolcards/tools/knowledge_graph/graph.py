"""The knowledge-graph engine: batch updates with collected errors, and hybrid search.

Pure logic with no threads: the tool actor owns one graph and persists what it reports.
"""

from __future__ import annotations

import bisect
import itertools
from collections import Counter, deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from toolcards.tools._common.fusion import rrf_fuse
from toolcards.tools._common.keyword_index import KeywordIndex
from toolcards.tools._common.score_fusion import score_fuse
from toolcards.tools.knowledge_graph.models import (
    MAX_ENTITY_TEXT,
    MAX_EVENT_ITEMS,
    MAX_EVENT_OBSERVATIONS,
    MAX_EVENT_TEXT,
    MAX_OBSERVATIONS,
    Entity,
    EntityChange,
    EntityCreate,
    EntityUpdate,
    GraphDelta,
    Relation,
    RelationCreate,
    RelationName,
    RelationRef,
    SearchMode,
    relation_key,
)

ENTITY = "e:"
RELATION = "r:"
MAX_PATH_HOPS = 4
MAX_PATH_VISITS = 5_000
"""Relations one search's path finding looks at, at most: up to 10 searches for a path
through a hub's thousands of relations each went through the whole graph."""
MAX_CONTEXT = 50
"""Neighbours, and edges, a search shows at most (a hub's thousands are counted)."""
MAX_TYPES = 30
"""Entity types a summary names at most (types are model-made labels: the rest are counted)."""
MAX_ENTITIES = 50_000
"""Entities a graph holds at most: a model creates them freely, call after call, and every
one is kept in memory, indexed and loaded on each start; creates past it are refused."""
MAX_RELATIONS = 100_000
"""Relations a graph holds at most (as :data:`MAX_ENTITIES`, for relations)."""
MAX_GRAPH_TEXT = 10_000_000
"""Characters of text a graph holds at most, entities and relations together (see
:func:`text_size`); what would grow it past is refused. The counts alone let ~2.1 GB in, and
a start rebuilds the whole graph and its keyword index before the actor answers, which is
waited for 30 s. On a 2-core machine that costs ~0.3 s of CPU per million characters of prose,
~0.65 s of all-distinct words, plus ~3 s for the 150,000 items of the count caps: ~10 s at
most (a restart at this cap, all-distinct words: 6 s of CPU, 13 s with the machine busy)."""


def entity_text(entity: Entity) -> str:
    """The text a semantic index embeds for an entity."""
    parts = [f"{entity.name} ({entity.entity_type})", entity.description, *entity.observations]
    return "\n".join(p for p in parts if p)


def relation_text(relation: Relation) -> str:
    """The text a semantic index embeds for a relation."""
    head = f"{relation.from_entity} {relation.relation_type} {relation.to_entity}"
    return f"{head}: {relation.description}" if relation.description else head


def text_size(item: Entity | Relation) -> int:
    """The characters of ``item`` counted against :data:`MAX_GRAPH_TEXT`: all its text."""
    if isinstance(item, Entity):
        return len(item.name) + len(item.entity_type) + _own_text(item)
    ends = len(item.from_entity) + len(item.to_entity)
    return ends + len(item.relation_type) + len(item.description)


def _own_text(entity: Entity) -> int:
    """The characters of ``entity`` counted against :data:`MAX_ENTITY_TEXT`."""
    return len(entity.description) + sum(map(len, entity.observations))


def _too_long(what: str, entity: Entity, old: Entity | None = None) -> str | None:
    """The error of ``entity`` (replacing ``old``) past :data:`MAX_ENTITY_TEXT`, or None: one
    stored before the cap may keep its size or shrink."""
    size = _own_text(entity)
    if size <= MAX_ENTITY_TEXT or (old is not None and size <= _own_text(old)):
        return None
    return (
        f"{what}: {entity.name!r} would hold {size:,} characters of description and "
        f"observations, at most {MAX_ENTITY_TEXT:,}: shorten them"
    )


def _past_caps(full: Counter[tuple[str, str]]) -> list[str]:
    """The errors of the items refused because the graph is full, by argument and cap."""
    return [
        f"{what}: {count} not {'applied' if what == 'update_entities' else 'created'}, "
        f"the graph holds at most {cap}: delete some first"
        for (what, cap), count in full.items()
    ]


_DELTA_LISTS = (  # the lists of a GraphChange, in the order an event fills them
    "entities_added",
    "entities_modified",
    "entities_removed",
    "relations_added",
    "relations_removed",
)


@dataclass
class GraphChange:
    """What one batch did."""

    entities_added: list[Entity] = field(default_factory=list)
    entities_modified: list[Entity] = field(default_factory=list)
    entities_before: list[Entity] = field(default_factory=list)
    """The modified entities as they were, in the order of ``entities_modified``."""
    entities_removed: list[str] = field(default_factory=list)
    relations_added: list[Relation] = field(default_factory=list)
    relations_removed: list[Relation] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (
            self.entities_added
            or self.entities_modified
            or self.entities_removed
            or self.relations_added
            or self.relations_removed
        )

    def payload(self) -> GraphDelta:
        """The delta as the ``#KnowledgeGraphTool`` event payload: what changed, by name, for
        the first :data:`MAX_EVENT_ITEMS` items; the rest counted (see :class:`GraphDelta`)."""
        counts = {name: len(getattr(self, name)) for name in _DELTA_LISTS}
        shown = dict(zip(counts, _first(list(counts.values()), MAX_EVENT_ITEMS), strict=True))
        added, modified, removed, new, gone = (getattr(self, n)[: shown[n]] for n in counts)
        before = self.entities_before[: len(modified)]
        return GraphDelta(
            entities_added=[_told(e) for e in added],
            entities_modified=[_told(e, b) for e, b in zip(modified, before, strict=True)],
            entities_removed=removed,
            relations_added=[_named(r) for r in new],
            relations_removed=[_named(r) for r in gone],
            more={name: n - shown[name] for name, n in counts.items() if n > shown[name]},
        )


def _first(counts: Sequence[int], room: int) -> list[int]:
    """How many of each list fit in ``room`` items, the lists taken in order."""
    taken: list[int] = []
    for count in counts:
        taken.append(min(count, room))
        room -= taken[-1]
    return taken


def _told(entity: Entity, before: Entity | None = None) -> EntityChange:
    """What an event tells of ``entity``, created (no ``before``) or changed."""
    old = before.observations if before is not None else []
    had, has = set(old), set(entity.observations)
    added = [o for o in entity.observations if o not in had]
    removed = [o for o in old if o not in has]
    fields = ("entity_type", "description", "observations", "is_root")
    return EntityChange(
        name=entity.name,
        entity_type=entity.entity_type,
        changed=[
            f for f in fields if before is not None and getattr(before, f) != getattr(entity, f)
        ],
        observations_added=[_cut(o) for o in added[:MAX_EVENT_OBSERVATIONS]],
        observations_removed=[_cut(o) for o in removed[:MAX_EVENT_OBSERVATIONS]],
        more_observations=sum(max(0, len(o) - MAX_EVENT_OBSERVATIONS) for o in (added, removed)),
    )


def _cut(text: str) -> str:
    return text if len(text) <= MAX_EVENT_TEXT else text[: MAX_EVENT_TEXT - 1] + "…"


def _named(relation: Relation) -> RelationName:
    return RelationName(
        from_entity=relation.from_entity,
        to_entity=relation.to_entity,
        relation_type=relation.relation_type,
    )


@dataclass
class SearchResult:
    """Ranked hits plus the requested graph context."""

    entities: list[tuple[Entity, float]] = field(default_factory=list)
    relations: list[tuple[Relation, float]] = field(default_factory=list)
    neighbors: list[Entity] = field(default_factory=list)
    edges: list[Relation] = field(default_factory=list)
    paths: list[list[str]] = field(default_factory=list)
    more_neighbors: int = 0
    """Neighbours past :data:`MAX_CONTEXT` left out."""
    more_edges: int = 0
    """Edges past :data:`MAX_CONTEXT` left out."""


@dataclass
class GraphSummary:
    """Counts, the most common entity types and the first root entities."""

    entities: int
    relations: int
    types: list[tuple[str, int]]
    roots: list[Entity]
    more_roots: int
    more_types: int = 0


class Graph:
    """Entities by name, relations by key, adjacency, and a keyword index over both.

    Each entity keeps the position it took in ``entities`` (its ``seq``); counts per type and
    the root entities are kept sorted by it on every change, so :meth:`summary` costs what it
    shows (and the number of types), not the size of the graph. The characters of all its
    text (``text``) are kept up to date the same way, for :data:`MAX_GRAPH_TEXT`.
    """

    def __init__(self, entities: Iterable[Entity] = (), relations: Iterable[Relation] = ()):
        self.entities: dict[str, Entity] = {}
        self.relations: dict[str, Relation] = {}
        self._adjacent: dict[str, set[str]] = {}
        self._ordered: dict[str, list[str]] = {}
        """Entity -> its relation keys sorted, until one of them changes (see :meth:`_keys_of`)."""
        self._index = KeywordIndex(("name", "kind", "body"), weights=(3.0, 1.0, 1.0))
        self._seq: dict[str, int] = {}
        self._next_seq = 0
        self._types: dict[str, list[int]] = {}
        """Entity type -> sorted seqs of its entities (count and first appearance)."""
        self._roots: list[tuple[int, str]] = []
        self._type_order: list[tuple[str, int]] | None = None
        self.text = 0
        """The characters of all the graph's text (:func:`text_size` of every item)."""
        with_docs = [(ENTITY + e.name, self._put_entity(e)) for e in entities]
        with_docs += [(RELATION + r.key, self._put_relation(r)) for r in relations]
        self._index.upsert_many(with_docs)

    # ---- storage ------------------------------------------------------------------------------

    def _put_entity(self, entity: Entity) -> tuple[str, str, str]:
        old = self.entities.get(entity.name)
        if old is None:
            self._seq[entity.name] = self._next_seq
            self._next_seq += 1
        else:
            self._tally(old, -1)
            self.text -= text_size(old)
        self.entities[entity.name] = entity
        self.text += text_size(entity)
        self._tally(entity, +1)
        self._adjacent.setdefault(entity.name, set())
        return (
            entity.name,
            entity.entity_type,
            "\n".join([entity.description, *entity.observations]),
        )

    def _put_relation(self, relation: Relation) -> tuple[str, str, str]:
        old = self.relations.get(relation.key)
        self.text += text_size(relation) - (text_size(old) if old is not None else 0)
        self.relations[relation.key] = relation
        for end in (relation.from_entity, relation.to_entity):
            self._adjacent.setdefault(end, set()).add(relation.key)
            self._ordered.pop(end, None)
        names = f"{relation.from_entity} {relation.to_entity}"
        return (names, relation.relation_type, relation.description)

    def _drop_entity(self, name: str) -> None:
        entity = self.entities.pop(name)
        self._tally(entity, -1)
        self.text -= text_size(entity)
        del self._seq[name]
        self._adjacent.pop(name, None)
        self._ordered.pop(name, None)
        self._index.remove(ENTITY + name)

    def _tally(self, entity: Entity, sign: int) -> None:
        """Add (``sign`` 1) or withdraw (-1) ``entity`` from the type counts and the roots."""
        seq = self._seq[entity.name]
        seqs = self._types.setdefault(entity.entity_type, [])
        if sign > 0:
            bisect.insort(seqs, seq)
        else:
            del seqs[bisect.bisect_left(seqs, seq)]
            if not seqs:
                del self._types[entity.entity_type]
        self._type_order = None
        if entity.is_root:
            if sign > 0:
                bisect.insort(self._roots, (seq, entity.name))
            else:
                del self._roots[bisect.bisect_left(self._roots, (seq, entity.name))]

    def summary(self, max_roots: int) -> GraphSummary:
        """Counts, the first :data:`MAX_TYPES` entity types with their counts (most common
        first, ties in order of first appearance) and the first ``max_roots`` root entities."""
        if self._type_order is None:
            ranked = sorted(self._types.items(), key=lambda item: (-len(item[1]), item[1][0]))
            self._type_order = [(name, len(seqs)) for name, seqs in ranked]
        shown = self._roots[: max(0, max_roots)]
        return GraphSummary(
            entities=len(self.entities),
            relations=len(self.relations),
            types=self._type_order[:MAX_TYPES],
            roots=[self.entities[name] for _, name in shown],
            more_roots=max(0, len(self._roots) - max_roots),
            more_types=max(0, len(self._type_order) - MAX_TYPES),
        )

    def _index_entity(self, entity: Entity) -> None:
        self._index.upsert(ENTITY + entity.name, *self._put_entity(entity))

    def _drop_relation(self, key: str) -> Relation:
        relation = self.relations.pop(key)
        self.text -= text_size(relation)
        for end in (relation.from_entity, relation.to_entity):
            self._adjacent.get(end, set()).discard(key)
            self._ordered.pop(end, None)
        self._index.remove(RELATION + key)
        return relation

    def edges_of(self, name: str) -> list[Relation]:
        """Relations touching entity ``name``, by key."""
        return [self.relations[k] for k in self._keys_of(name)]

    def _keys_of(self, name: str) -> list[str]:
        """The keys of the relations touching ``name``, sorted once per change of them: a
        search visiting a hub sorted its up to 100,000 keys at each visit."""
        keys = self._ordered.get(name)
        if keys is None:
            keys = self._ordered[name] = sorted(self._adjacent.get(name, ()))
        return keys

    # ---- updates ------------------------------------------------------------------------------

    def _fits(self, item: Entity | Relation, old: Entity | None = None) -> bool:
        """Whether the graph's text stays within :data:`MAX_GRAPH_TEXT` with ``item`` put in
        place of ``old`` (an item that does not grow it always fits)."""
        grown = text_size(item) - (text_size(old) if old is not None else 0)
        return grown <= 0 or self.text + grown <= MAX_GRAPH_TEXT

    def apply(
        self,
        create_entities: Sequence[EntityCreate] = (),
        update_entities: Sequence[EntityUpdate] = (),
        delete_entities: Sequence[str] = (),
        create_relations: Sequence[RelationCreate] = (),
        delete_relations: Sequence[RelationRef] = (),
    ) -> tuple[GraphChange, list[str]]:
        """Apply what can be applied, in a fixed order, and report every error.

        Order: delete relations, delete entities (with their relations), create entities,
        update entities, create relations. A failing item is skipped whole; the rest apply.
        """
        change = GraphChange()
        errors: list[str] = []
        full: Counter[tuple[str, str]] = Counter()  # items refused past a cap: (argument, cap)
        text_cap = f"{MAX_GRAPH_TEXT:,} characters of text"
        for ref in delete_relations:
            key = relation_key(ref.from_entity, ref.relation_type, ref.to_entity)
            if key not in self.relations:
                errors.append(
                    f"delete_relations: no relation {ref.from_entity} -{ref.relation_type}-> "
                    f"{ref.to_entity}"
                )
                continue
            change.relations_removed.append(self._drop_relation(key))
        for name in delete_entities:  # exact: the name the policy decided on
            if name not in self.entities:
                errors.append(f"delete_entities: no entity named {name!r}")
                continue
            for key in sorted(self._adjacent.get(name, ())):
                change.relations_removed.append(self._drop_relation(key))
            self._drop_entity(name)
            change.entities_removed.append(name)
        for new in create_entities:
            if new.name in self.entities:
                errors.append(f"create_entities: {new.name!r} already exists (use update_entities)")
                continue
            if len(self.entities) >= MAX_ENTITIES:
                full["create_entities", f"{MAX_ENTITIES} entities"] += 1
                continue
            entity = Entity(
                name=new.name,
                entity_type=new.entity_type,
                description=new.description,
                observations=list(dict.fromkeys(new.observations)),
                is_root=new.is_root,
            )
            if error := _too_long("create_entities", entity):
                errors.append(error)
                continue
            if not self._fits(entity):
                full["create_entities", text_cap] += 1
                continue
            self._index_entity(entity)
            change.entities_added.append(entity)
        for upd in update_entities:
            old = self.entities.get(upd.name)
            if old is None:
                errors.append(f"update_entities: no entity named {upd.name!r}")
                continue
            missing = [o for o in upd.remove_observations if o not in old.observations]
            if missing:  # the whole item fails: none of its changes apply
                errors.append(f"update_entities: {upd.name!r} has no observation {missing[0]!r}")
                continue
            kept = [o for o in old.observations if o not in set(upd.remove_observations)]
            observations = list(dict.fromkeys([*kept, *upd.add_observations]))
            if len(observations) > MAX_OBSERVATIONS:
                errors.append(
                    f"update_entities: {upd.name!r} would exceed {MAX_OBSERVATIONS} observations"
                )
                continue
            fields: dict[str, Any] = {"observations": observations}
            for attr in ("description", "entity_type", "is_root"):
                value = getattr(upd, attr)
                if value is not None:
                    fields[attr] = value
            entity = old.model_copy(update=fields)
            if error := _too_long("update_entities", entity, old):
                errors.append(error)
                continue
            if not self._fits(entity, old):
                full["update_entities", text_cap] += 1
                continue
            if entity != old:
                self._index_entity(entity)
                change.entities_modified.append(entity)
                change.entities_before.append(old)
        for rel in create_relations:
            absent = [n for n in (rel.from_entity, rel.to_entity) if n not in self.entities]
            if absent:
                errors.append(
                    f"create_relations: unknown entit{'ies' if len(absent) > 1 else 'y'} "
                    + ", ".join(repr(n) for n in absent)
                )
                continue
            relation = Relation(**rel.model_dump())
            if relation.key in self.relations:
                errors.append(
                    f"create_relations: {rel.from_entity} -{rel.relation_type}-> "
                    f"{rel.to_entity} already exists"
                )
                continue
            if len(self.relations) >= MAX_RELATIONS:
                full["create_relations", f"{MAX_RELATIONS} relations"] += 1
                continue
            if not self._fits(relation):
                full["create_relations", text_cap] += 1
                continue
            self._index.upsert(RELATION + relation.key, *self._put_relation(relation))
            change.relations_added.append(relation)
        errors += _past_caps(full)
        return change, errors

    def merge(
        self,
        entities: Iterable[Entity],
        relations: Iterable[Relation],
        removed_entities: Iterable[str] = (),
        removed_relations: Iterable[str] = (),
    ) -> None:
        """Take in rows another copy of the graph wrote: the relations and entities removed
        (an entity with its relations), then the entities and relations as they are now,
        each replacing the one of its name or key. What was already gone is skipped."""
        for key in removed_relations:
            if key in self.relations:
                self._drop_relation(key)
        for name in removed_entities:
            if name in self.entities:
                for key in sorted(self._adjacent.get(name, ())):
                    self._drop_relation(key)
                self._drop_entity(name)
        for entity in entities:
            self._index_entity(entity)
        for relation in relations:
            self._index.upsert(RELATION + relation.key, *self._put_relation(relation))

    # ---- search -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        mode: SearchMode,
        top_k: int,
        vector_hits: Sequence[tuple[str, float]] | None = None,
        include_neighbors: bool = False,
        include_edges: bool = False,
        find_paths: bool = False,
        rrf_k: float = 10.0,
        weights: tuple[float, float] = (1.0, 1.0),
        fusion: Literal["scores", "rrf"] = "scores",
        exhaustive: bool = False,
    ) -> SearchResult:
        """Rank entities and relations; ``vector_hits`` are ``(doc_id, cosine)`` pairs.

        ``hybrid`` adds the BM25 score scaled by the query's own maximum to the cosine
        (:func:`score_fuse`); ``fusion="rrf"`` fuses the ranks alone (reciprocal-rank fusion
        with ``rrf_k``), as before. ``exhaustive`` scores every keyword match instead of
        pruning (the same ranking: the baseline the pruned index is measured against)."""
        pool = max(top_k * 3, 30)
        keyword = [] if mode == "vector" else self._index.search(query, pool, exhaustive=exhaustive)
        hits = vector_hits or ()
        if mode == "keyword" or vector_hits is None:
            ranked: Sequence[tuple[str, float]] = keyword
        elif mode == "vector":
            ranked = hits
        elif fusion == "rrf":  # ranks: a hit the graph no longer holds must not take one
            known = [h for h in hits if self._resolve(h[0]) is not None]
            ranked = rrf_fuse([keyword, known], k=rrf_k, weights=weights)
        else:
            bound = self._index.score_bound(query)
            ranked = score_fuse(keyword, hits, bound, weights=weights)
        result = SearchResult()
        # A vector hit the graph no longer holds (the store lags a removal) is passed over here,
        # where only the hits shown are looked up, not every hit before ranking.
        for doc_id, score in ranked:
            if len(result.entities) + len(result.relations) >= top_k:
                break
            found = self._resolve(doc_id)
            if isinstance(found, Entity):
                result.entities.append((found, score))
            elif isinstance(found, Relation):
                result.relations.append((found, score))
        names = [e.name for e, _ in result.entities]
        if include_neighbors:  # at most MAX_CONTEXT of them, the rest counted
            seen = set(names)
            for name in names:
                for rel in self.edges_of(name):
                    other = rel.to_entity if rel.from_entity == name else rel.from_entity
                    neighbor = self.entities.get(other)  # None: a row loaded without its end
                    if neighbor is not None and other not in seen:
                        seen.add(other)
                        if len(result.neighbors) < MAX_CONTEXT:
                            result.neighbors.append(neighbor)
            result.more_neighbors = len(seen) - len(names) - len(result.neighbors)
        if include_edges:
            keys: dict[str, Relation] = {}
            for name in names:
                keys.update((r.key, r) for r in self.edges_of(name))
            result.edges = list(itertools.islice(keys.values(), MAX_CONTEXT))
            result.more_edges = len(keys) - len(result.edges)
        if find_paths:
            result.paths = self._paths(names[:5], max_pairs=10)
        return result

    def _resolve(self, doc_id: str) -> Entity | Relation | None:
        if doc_id.startswith(ENTITY):
            return self.entities.get(doc_id[len(ENTITY) :])
        if doc_id.startswith(RELATION):
            return self.relations.get(doc_id[len(RELATION) :])
        return None

    def _paths(self, names: Sequence[str], max_pairs: int) -> list[list[str]]:
        """Shortest paths between pairs of ``names``, looking at :data:`MAX_PATH_VISITS`
        relations at most in all (a pair whose path is not found within them has none)."""
        paths: list[list[str]] = []
        budget = MAX_PATH_VISITS
        for start, goal in itertools.islice(itertools.combinations(names, 2), max_pairs):
            path, looked = self._path(start, goal, budget)
            budget -= looked
            if path:
                paths.append(path)
        return paths

    def shortest_path(self, start: str, goal: str) -> list[str]:
        """Entity names and relation types along a shortest undirected path (BFS), or [] (none
        within :data:`MAX_PATH_HOPS` hops, or none found among the first
        :data:`MAX_PATH_VISITS` relations looked at)."""
        return self._path(start, goal, MAX_PATH_VISITS)[0]

    def _path(self, start: str, goal: str, budget: int) -> tuple[list[str], int]:
        """:meth:`shortest_path` looking at ``budget`` relations at most, and how many it
        looked at. Each entity's relations are taken by key: the same graph, the same path."""
        previous: dict[str, tuple[str, Relation] | None] = {start: None}
        queue = deque([(start, 0)])
        looked = 0
        while queue and goal not in previous:
            node, hops = queue.popleft()
            if hops >= MAX_PATH_HOPS:
                break  # the queue holds no fewer hops after it
            for key in self._keys_of(node):
                if looked >= budget:
                    return [], looked
                looked += 1
                rel = self.relations[key]
                other = rel.to_entity if rel.from_entity == node else rel.from_entity
                if other not in previous:
                    previous[other] = (node, rel)
                    if other == goal:
                        break
                    queue.append((other, hops + 1))
        if goal not in previous:
            return [], looked
        steps: list[str] = [goal]
        node = goal
        while (link := previous[node]) is not None:
            prior, rel = link
            arrow = (
                f"-{rel.relation_type}->" if rel.from_entity == prior else f"<-{rel.relation_type}-"
            )
            steps[:0] = [prior, arrow]
            node = prior
        return steps, looked
