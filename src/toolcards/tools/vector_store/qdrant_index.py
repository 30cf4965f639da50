"""``QdrantIndex``: one qdrant collection behind the ``VectorIndex`` protocol.

``location=":memory:"`` or ``path=...`` uses qdrant-client's local mode (no server);
``url=...`` talks to a qdrant server. String ids map to deterministic UUIDs; the original id
travels in the point payload.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolcards.tools.vector_store.base import require
from toolcards.tools.vector_store.index import check_matrix
from toolcards.tools.vector_store.ranking import Hit, best_first

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix

_NAMESPACE = uuid.UUID("6f0c3f5e-8a0e-4b7e-9a51-2f3c1f0d7a11")


def point_id(item: str) -> str:
    """The qdrant point id (a UUID string) of a store id."""
    return str(uuid.uuid5(_NAMESPACE, item))


def make_client(
    *, url: str | None = None, path: str | None = None, api_key: str | None = None
) -> Any:
    """A ``QdrantClient``: server at ``url``, local files at ``path``, else in memory."""
    require("qdrant_client")
    # lazy: extra vector (qdrant-client takes seconds to import)
    from qdrant_client import QdrantClient

    if url:
        return QdrantClient(url=url, api_key=api_key, timeout=10)
    if path:
        return QdrantClient(path=path)
    return QdrantClient(":memory:")


class QdrantIndex:
    """A qdrant collection with cosine distance; created when missing, dimension checked."""

    def __init__(self, client: Any, collection: str, dimension: int) -> None:
        require("qdrant_client")
        # lazy: extra vector (qdrant-client takes seconds to import)
        from qdrant_client import models

        if dimension < 1:
            raise ValueError("dimension must be >= 1")
        self._client = client
        self._models = models
        self.collection = collection
        self._dimension = dimension
        if client.collection_exists(collection):
            info = client.get_collection(collection)
            size = _vector_size(info)
            if size is not None and size != dimension:
                raise ValueError(
                    f"qdrant collection {collection!r} has dimension {size}, not {dimension}"
                )
        else:
            client.create_collection(
                collection,
                vectors_config=models.VectorParams(size=dimension, distance=models.Distance.COSINE),
            )

    @property
    def dimension(self) -> int:
        return self._dimension

    def count(self) -> int:
        return int(self._client.count(self.collection, exact=True).count)

    def __contains__(self, item: object) -> bool:
        if not isinstance(item, str):
            return False
        found = self._client.retrieve(self.collection, [point_id(item)], with_payload=False)
        return bool(found)

    def add(self, ids: Sequence[str], vectors: Matrix) -> None:
        matrix = check_matrix(vectors, self._dimension, len(ids))
        if not ids:
            return
        points = [
            self._models.PointStruct(id=point_id(item), vector=vec.tolist(), payload={"id": item})
            for item, vec in zip(ids, matrix, strict=True)
        ]
        self._client.upsert(self.collection, points=points, wait=True)

    def remove(self, ids: Sequence[str]) -> int:
        if not ids:
            return 0
        keys: list[Any] = [point_id(i) for i in ids]
        present = len(self._client.retrieve(self.collection, keys, with_payload=False))
        self._client.delete(
            self.collection, points_selector=self._models.PointIdsList(points=keys), wait=True
        )
        return present

    def search(self, vector: Matrix, top_k: int) -> list[Hit]:
        return self.search_batch(check_matrix(vector, self._dimension, 1), top_k)[0]

    def search_batch(self, vectors: Matrix, top_k: int) -> list[list[Hit]]:
        queries = check_matrix(vectors, self._dimension)
        k = max(0, int(top_k))
        if k == 0:
            return [[] for _ in range(queries.shape[0])]
        results: list[list[Hit]] = []
        for row in queries:
            answer = self._client.query_points(
                self.collection, query=row.tolist(), limit=k, with_payload=True
            )
            hits = ((str(p.payload["id"]), float(p.score)) for p in answer.points)
            results.append(best_first(hits))
        return results

    def drop(self) -> None:
        """Delete the whole collection."""
        self._client.delete_collection(self.collection)


def _vector_size(info: Any) -> int | None:
    vectors = getattr(getattr(info.config, "params", None), "vectors", None)
    size = getattr(vectors, "size", None)
    return int(size) if size is not None else None
