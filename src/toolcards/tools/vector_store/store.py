"""``VectorStore``: named collections of texts -> vectors, durable, with a query cache.

The plain-Python core of the ``#VectorStore`` actor, usable on its own (tests, benchmarks,
scripts). It never embeds by itself except in :meth:`upsert_now` / :meth:`query_now`: the
actor splits every write into *plan* (which texts changed) -> *embed* (off its thread) ->
*apply* (only if the text is still the wanted one), so a slow embedding never blocks it and a
late result never overwrites a newer text.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from toolcards.tools._common.vector_api import CARD_COLLECTIONS
from toolcards.tools.vector_store.base import EmbeddingProvider, require
from toolcards.tools.vector_store.index import InMemoryIndex, VectorIndex, check_matrix
from toolcards.tools.vector_store.ranking import Hit
from toolcards.tools.vector_store.records import (
    Record,
    RecordStore,
    StateStore,
    check_collection,
    check_id,
    text_hash,
    valid_pair,
)

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix

logger = logging.getLogger(__name__)

IndexFactory = Callable[[str, int], VectorIndex]
Pending = tuple[str, str, str]
"""``(id, text, hash)`` of a text that needs embedding."""

MAX_TOP_K = 1000
MAX_COLLECTIONS = 256
"""Collections a store holds at most, besides those other cards fill (a model with
``vector_add`` names collections freely; each one keeps an index and is listed)."""
MAX_RECORDS = 50_000
"""Records a store holds at most, besides those in the collections other cards fill (each
card bounds its own: the graph's 50,000 entities, the board's 10,000 tasks). A model adds
them with ``vector_add`` freely, call after call, and each one keeps its text and vector in
memory and a row in the team's store: new ids past it are refused."""


def inmemory_factory(collection: str, dimension: int) -> VectorIndex:
    return InMemoryIndex(dimension)


class _RestoreCaps:
    """Which stored rows restore loads: :data:`MAX_COLLECTIONS` and :data:`MAX_RECORDS` (the
    rows :meth:`RecordStore.load` reads) hold for stored rows too (rows written around the
    tools made an index per name they held, and a record per id); it says what it left."""

    def __init__(self) -> None:
        self.kept: set[str] = set()
        self.skipped: set[str] = set()

    def admit(self, collection: str) -> bool:
        if collection in CARD_COLLECTIONS or collection in self.kept:
            return True
        if len(self.kept) >= MAX_COLLECTIONS:
            self.skipped.add(collection)
            return False
        self.kept.add(collection)
        return True

    def report(self, left_out: int) -> None:
        if self.skipped:
            logger.warning(
                "vector store: %d stored collections past the cap of %d were not loaded",
                len(self.skipped),
                MAX_COLLECTIONS,
            )
        if left_out:
            logger.warning(
                "vector store: %d stored records past the cap of %d were not loaded",
                left_out,
                MAX_RECORDS,
            )


class VectorStore:
    """Collections of ``id -> (text hash, vector)`` over one embedding model and one backend."""

    def __init__(
        self,
        *,
        model: str,
        dimension: int,
        state: StateStore,
        index_factory: IndexFactory = inmemory_factory,
        max_text_chars: int = 8_000,
        query_cache_size: int = 1024,
    ) -> None:
        self.model = model
        self.dimension = dimension
        self.records = RecordStore(state, max_text_chars=max_text_chars)
        self.max_text_chars = max_text_chars
        self._index_factory = index_factory
        self._indexes: dict[str, VectorIndex] = {}
        self._hashes: dict[str, dict[str, str]] = {}
        """Hash of the text each stored vector was embedded from."""
        self._texts: dict[str, dict[str, str]] = {}
        self._wanted: dict[str, dict[str, str]] = {}
        """Hash of the newest text asked for, while its embedding is in flight."""
        self._cache: OrderedDict[str, Matrix] = OrderedDict()
        self._cache_size = max(0, query_cache_size)

    # ---- lifecycle ----------------------------------------------------------------------------

    def restore(self) -> list[tuple[str, list[Pending]]]:
        """Load every stored vector; returns what must be re-embedded (model changed)."""
        meta = self.records.meta()
        current = {"model": self.model, "dimension": self.dimension}
        same = meta is not None and all(meta.get(k) == v for k, v in current.items())
        stale: dict[str, list[Pending]] = {}
        loaded: dict[str, tuple[list[str], list[Matrix]]] = {}
        caps = _RestoreCaps()
        for collection, rec in self.records.load(self.dimension if same else None, MAX_RECORDS):
            if rec is None or not caps.admit(collection):
                continue
            if same:
                ids, vecs = loaded.setdefault(collection, ([], []))
                ids.append(rec.id)
                vecs.append(rec.vector)
                self._hashes.setdefault(collection, {})[rec.id] = rec.hash
                self._texts.setdefault(collection, {})[rec.id] = rec.text
            else:
                stale.setdefault(collection, []).append((rec.id, rec.text, rec.hash))
                self._wanted.setdefault(collection, {})[rec.id] = rec.hash
        caps.report(self.records.left_out)
        np = require("numpy")
        for collection, (ids, vecs) in loaded.items():
            index = self.index(collection)
            if index.count() == len(ids) and all(
                i in index for i in ids[:: max(1, len(ids) // 16)]
            ):
                continue  # a durable backend (a qdrant server or path) kept them already
            index.add(ids, np.stack(vecs))
        if not same:
            if meta is not None:
                logger.warning(
                    "vector store model changed (%s -> %s): re-embedding %d texts",
                    meta.get("model"),
                    self.model,
                    sum(len(v) for v in stale.values()),
                )
            self.records.set_meta(current)
        return sorted(stale.items())

    # ---- collections --------------------------------------------------------------------------

    def index(self, collection: str) -> VectorIndex:
        found = self._indexes.get(collection)
        if found is None:
            found = self._index_factory(check_collection(collection), self.dimension)
            self._indexes[collection] = found
            self._hashes.setdefault(collection, {})
            self._texts.setdefault(collection, {})
        return found

    def collections(self) -> dict[str, int]:
        """Collection name -> number of indexed vectors."""
        return {name: index.count() for name, index in sorted(self._indexes.items())}

    def count(self, collection: str) -> int:
        index = self._indexes.get(check_collection(collection))
        return 0 if index is None else index.count()

    def text(self, collection: str, item: str) -> str | None:
        """The (bounded) text an id was embedded from."""
        return self._texts.get(collection, {}).get(item)

    def pending(self) -> int:
        """Texts waiting for their embedding."""
        return sum(len(v) for v in self._wanted.values())

    # ---- writes -------------------------------------------------------------------------------

    def plan_upsert(self, collection: str, items: Sequence[tuple[str, str]]) -> list[Pending]:
        """Validate ``items`` and return those whose text changed (to embed, then apply)."""
        self._check_room(collection)
        if not isinstance(items, (list, tuple)):
            raise TypeError("items must be a list of (id, text) pairs")
        latest: dict[str, str] = {}
        for pair in items:
            item, text = valid_pair(pair)
            latest[item] = text[: self.max_text_chars]
        self._check_records(collection, latest)
        stored = self._hashes.get(collection, {})
        wanted = self._wanted.setdefault(collection, {})
        todo: list[Pending] = []
        for item, text in latest.items():
            digest = text_hash(text)
            if wanted.get(item) == digest:
                continue  # already in flight
            if item not in wanted and stored.get(item) == digest:
                continue  # unchanged
            wanted[item] = digest
            todo.append((item, text, digest))
        return todo

    def _check_room(self, collection: str) -> None:
        """ValueError for an invalid name, or a new collection past :data:`MAX_COLLECTIONS`."""
        check_collection(collection)
        held = (self._indexes.keys() | self._wanted.keys()) - CARD_COLLECTIONS.keys()
        new = collection not in held and collection not in CARD_COLLECTIONS
        if new and len(held) >= MAX_COLLECTIONS:
            raise ValueError(
                f"the store holds at most {MAX_COLLECTIONS} collections: use an existing one"
            )

    def _check_records(self, collection: str, items: Iterable[str]) -> None:
        """ValueError when the new ids among ``items`` would pass :data:`MAX_RECORDS` (ids
        stored or in flight outside the collections other cards fill, which bound their own)."""
        if collection in CARD_COLLECTIONS:
            return
        stored, wanted = self._hashes.get(collection, {}), self._wanted.get(collection, {})
        new = sum(i not in stored and i not in wanted for i in items)
        if new == 0:
            return
        held = 0
        for name in (self._hashes.keys() | self._wanted.keys()) - CARD_COLLECTIONS.keys():
            stored, wanted = self._hashes.get(name, {}), self._wanted.get(name, {})
            held += len(stored) + sum(i not in stored for i in wanted)
        if held + new > MAX_RECORDS:
            raise ValueError(
                f"the store holds at most {MAX_RECORDS} records: store under an existing id"
            )

    def apply(self, collection: str, batch: Sequence[Pending], vectors: Matrix) -> list[str]:
        """Store the vectors of ``batch`` whose text is still the wanted one; returns their ids."""
        matrix = check_matrix(vectors, self.dimension, len(batch))
        wanted = self._wanted.get(collection, {})
        keep = [i for i, (item, _, digest) in enumerate(batch) if wanted.get(item) == digest]
        if not keep:
            return []
        ids = [batch[i][0] for i in keep]
        rows = matrix[keep]
        self.index(collection).add(ids, rows)
        self.records.put_many(
            collection,
            (Record(batch[i][0], batch[i][2], batch[i][1], rows[n]) for n, i in enumerate(keep)),
        )
        hashes, texts = self._hashes[collection], self._texts[collection]
        for i in keep:
            item, text, digest = batch[i]
            hashes[item] = digest
            texts[item] = text
            del wanted[item]
        return ids

    def fail(self, collection: str, batch: Sequence[Pending]) -> None:
        """Forget in-flight texts whose embedding failed (a later upsert retries them)."""
        wanted = self._wanted.get(collection, {})
        for item, _, digest in batch:
            if wanted.get(item) == digest:
                del wanted[item]

    def remove(self, collection: str, ids: Sequence[str]) -> list[str]:
        """Delete ``ids`` (and cancel their in-flight embeddings); returns those that existed."""
        check_collection(collection)
        if not isinstance(ids, (list, tuple)):
            raise TypeError("ids must be a list of strings")
        wanted = self._wanted.get(collection, {})
        hashes = self._hashes.get(collection, {})
        gone: list[str] = []
        for item in dict.fromkeys(check_id(i) for i in ids):
            wanted.pop(item, None)
            if hashes.pop(item, None) is not None:
                self._texts[collection].pop(item, None)
                gone.append(item)
        if gone:
            self.index(collection).remove(gone)
            self.records.delete_many(collection, gone)
        return gone

    # ---- reads --------------------------------------------------------------------------------

    def cached_query(self, text: str) -> Matrix | None:
        found = self._cache.get(text)
        if found is not None:
            self._cache.move_to_end(text)
        return found

    def cache_query(self, text: str, vector: Matrix) -> None:
        if self._cache_size == 0:
            return
        self._cache[text] = check_matrix(vector, self.dimension, 1)[0]
        self._cache.move_to_end(text)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    @staticmethod
    def check_search(collection: str, top_k: int) -> None:
        """ValueError for an invalid collection name or ``top_k``."""
        check_collection(collection)
        if not isinstance(top_k, int) or isinstance(top_k, bool) or top_k < 0:
            raise ValueError("top_k must be a non-negative integer")

    def search(self, collection: str, vector: Matrix, top_k: int) -> list[Hit]:
        """Best ``top_k`` ``(id, cosine)`` in ``collection`` (empty for an unknown one)."""
        self.check_search(collection, top_k)
        index = self._indexes.get(collection)
        if index is None:
            return []
        return index.search(vector, min(top_k, MAX_TOP_K))

    # ---- synchronous helpers (no actor) --------------------------------------------------------

    def upsert_now(
        self, provider: EmbeddingProvider, collection: str, items: Sequence[tuple[str, str]]
    ) -> list[str]:
        """Plan, embed in the calling thread, and apply; returns the ids (re-)embedded."""
        todo = self.plan_upsert(collection, items)
        if not todo:
            return []
        try:
            vectors = provider.embed([text for _, text, _ in todo])
        except BaseException:
            self.fail(collection, todo)
            raise
        return self.apply(collection, todo, vectors)

    def query_now(
        self, provider: EmbeddingProvider, collection: str, text: str, top_k: int
    ) -> list[Hit]:
        """Embed ``text`` (cached) in the calling thread and search."""
        if not isinstance(text, str):
            raise TypeError("query text must be a string")
        text = text[: self.max_text_chars]
        vector = self.cached_query(text)
        if vector is None:
            vector = provider.embed([text])[0]
            self.cache_query(text, vector)
        return self.search(collection, vector, top_k)

    def info(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "dimension": self.dimension,
            "collections": self.collections(),
            "pending": self.pending(),
            "cached_queries": len(self._cache),
        }
