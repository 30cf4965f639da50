"""Vector indexes: the ``VectorIndex`` protocol and the numpy brute-force ``InMemoryIndex``.

Vectors are expected L2-normalised, so the inner product is the cosine similarity. Indexes are
pure search structures; durability lives in :mod:`toolcards.tools.vector_store.records`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from toolcards.tools.vector_store.embeddings import require

if TYPE_CHECKING:
    from toolcards.tools.vector_store.embeddings import Matrix

Hit = tuple[str, float]


class VectorIndex(Protocol):
    """What the store needs from a backend."""

    @property
    def dimension(self) -> int: ...

    def add(self, ids: Sequence[str], vectors: Matrix) -> None:
        """Insert or replace the vectors of ``ids`` (one row each)."""
        ...

    def remove(self, ids: Sequence[str]) -> int:
        """Delete ``ids`` (unknown ids are ignored); returns how many were present."""
        ...

    def search(self, vector: Matrix, top_k: int) -> list[Hit]:
        """The ``top_k`` most similar ids, best first, as ``(id, cosine)``."""
        ...

    def search_batch(self, vectors: Matrix, top_k: int) -> list[list[Hit]]:
        """:meth:`search` for each row of ``vectors``."""
        ...

    def count(self) -> int: ...

    def __contains__(self, item: object) -> bool: ...


def check_matrix(vectors: Any, dimension: int, rows: int | None = None) -> Matrix:
    """``vectors`` as a C-contiguous float32 ``(n, dimension)`` matrix, or ValueError."""
    np = require("numpy")
    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    if matrix.ndim != 2 or matrix.shape[1] != dimension:
        raise ValueError(f"expected vectors of dimension {dimension}, got shape {matrix.shape}")
    if rows is not None and matrix.shape[0] != rows:
        raise ValueError(f"expected {rows} vectors, got {matrix.shape[0]}")
    if not np.isfinite(matrix).all():
        raise ValueError("vectors contain NaN or infinity")
    out: Matrix = np.ascontiguousarray(matrix)
    return out


class InMemoryIndex:
    """A float32 matrix with amortised O(1) add/remove and exact top-k by ``argpartition``.

    Rows live in a growing buffer; a removal moves the last row into the hole. Not thread-safe:
    the owning actor serialises access.
    """

    def __init__(self, dimension: int, *, capacity: int = 1024) -> None:
        if dimension < 1:
            raise ValueError("dimension must be >= 1")
        np = require("numpy")
        self._dimension = dimension
        self._matrix: Matrix = np.zeros((max(16, capacity), dimension), dtype=np.float32)
        self._ids: list[str] = []
        self._row: dict[str, int] = {}

    @property
    def dimension(self) -> int:
        return self._dimension

    def count(self) -> int:
        return len(self._ids)

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, item: object) -> bool:
        return item in self._row

    def ids(self) -> list[str]:
        """The indexed ids, in storage order."""
        return list(self._ids)

    def vector(self, item: str) -> Matrix | None:
        """A copy of the stored vector of ``item``."""
        row = self._row.get(item)
        return None if row is None else self._matrix[row].copy()

    def add(self, ids: Sequence[str], vectors: Matrix) -> None:
        np = require("numpy")
        matrix = check_matrix(vectors, self._dimension, len(ids))
        need = len(self._ids) + len(ids)
        if need > self._matrix.shape[0]:
            grown = np.zeros((max(need, self._matrix.shape[0] * 2), self._dimension), np.float32)
            grown[: len(self._ids)] = self._matrix[: len(self._ids)]
            self._matrix = grown
        for item, vec in zip(ids, matrix, strict=True):
            row = self._row.get(item)
            if row is None:
                row = len(self._ids)
                self._row[item] = row
                self._ids.append(item)
            self._matrix[row] = vec

    def remove(self, ids: Sequence[str]) -> int:
        removed = 0
        for item in ids:
            row = self._row.pop(item, None)
            if row is None:
                continue
            removed += 1
            last = len(self._ids) - 1
            if row != last:
                moved = self._ids[last]
                self._matrix[row] = self._matrix[last]
                self._ids[row] = moved
                self._row[moved] = row
            self._ids.pop()
        return removed

    def search(self, vector: Matrix, top_k: int) -> list[Hit]:
        return self.search_batch(check_matrix(vector, self._dimension, 1), top_k)[0]

    def search_batch(self, vectors: Matrix, top_k: int) -> list[list[Hit]]:
        np = require("numpy")
        queries = check_matrix(vectors, self._dimension)
        n = len(self._ids)
        k = min(max(0, int(top_k)), n)
        if k == 0:
            return [[] for _ in range(queries.shape[0])]
        scores = queries @ self._matrix[:n].T
        if k < n:
            part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        else:
            part = np.broadcast_to(np.arange(n), (queries.shape[0], n))
        results: list[list[Hit]] = []
        for q in range(queries.shape[0]):
            rows = part[q]
            best = rows[np.argsort(-scores[q, rows], kind="stable")]
            results.append([(self._ids[int(r)], float(scores[q, int(r)])) for r in best])
        return results
