"""``QdrantIndex``: one qdrant collection behind the ``VectorIndex`` protocol.

``location=":memory:"`` or ``path=...`` uses qdrant-client's local mode (no server);
``url=...`` talks to a qdrant server. String ids map to deterministic UUIDs; the original id
travels in the point payload.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx

from toolcards.core.errors import ToolcardsError
from toolcards.core.tls import default_verify
from toolcards.tools.vector_store.base import read_capped, require
from toolcards.tools.vector_store.index import check_matrix
from toolcards.tools.vector_store.ranking import Hit, best_first

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix

_NAMESPACE = uuid.UUID("6f0c3f5e-8a0e-4b7e-9a51-2f3c1f0d7a11")
TIMEOUT_S = 10
"""Seconds one request to a qdrant server may take in all: httpx's timeout bounds each read
only, and a server sending a byte every few seconds held a call for as long as it liked."""
MAX_ANSWER_BYTES = 16 << 20
"""Bytes a qdrant server's answer may hold: the largest the store asks for are a search for
``MAX_TOP_K`` (1,000) hits whose ids of up to 1,024 characters may come ``\\u``-escaped (about
6 MB) and the lookup of ``MAX_RECORDS`` (50,000) points a removal makes (about 5 MB)."""


class QdrantAnswerRefused(ToolcardsError):
    """A qdrant server's answer came encoded or larger than :data:`MAX_ANSWER_BYTES`."""


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
        # no version check: it is a plain httpx.get, outside these bounds; no proxy from the
        # environment: httpx would send through its own transport, not the bounded one
        return QdrantClient(
            url=url,
            api_key=api_key,
            timeout=TIMEOUT_S,
            check_compatibility=False,
            transport=_BoundedTransport(),
            trust_env=False,
        )
    if path:
        return QdrantClient(path=path)
    return QdrantClient(":memory:")


class _BoundedTransport(httpx.BaseTransport):
    """Reads each answer of a qdrant server whole, within bounds, before qdrant-client sees it.

    qdrant-client asked for gzip and read an answer whole, inflated: 1 MB of gzip cost 13 s
    and 4 GiB. Here answers are asked for unencoded (an encoded one is refused), capped at
    :data:`MAX_ANSWER_BYTES` and read within :data:`TIMEOUT_S` of the request."""

    def __init__(self) -> None:
        self._inner = httpx.HTTPTransport(verify=default_verify(httpx))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = time.monotonic() + TIMEOUT_S
        request.headers["Accept-Encoding"] = "identity"
        response = self._inner.handle_request(request)
        try:
            body = read_capped(
                response, MAX_ANSWER_BYTES, deadline, "qdrant answer", QdrantAnswerRefused
            )
        finally:
            response.close()
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            content=body,
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._inner.close()


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
