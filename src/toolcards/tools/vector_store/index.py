"""Vector indexes: the ``VectorIndex`` protocol and the numpy brute-force ``InMemoryIndex``.

Vectors are expected L2-normalised, so the inner product is the cosine similarity. Indexes are
pure search structures; durability lives in :mod:`toolcards.tools.vector_store.records`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from toolcards.tools.vector_store.base import require
from toolcards.tools.vector_store.ranking import Hit, top_hits

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix


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


class ChangeLog:
    """The ids changed since a snapshot, while a build made from it runs elsewhere."""

    _changed: set[str] | None = None

    def track_changes(self) -> None:
        """Record from now on the ids added, replaced, moved or removed."""
        if self._changed is None:
            self._changed = set()

    def take_changes(self) -> set[str]:
        """Ids added, replaced, moved or removed since tracking started (tracking stops)."""
        changed, self._changed = self._changed or set(), None
        return changed


class RowIndex(ChangeLog):
    """What the exact index and the graph share: the id of each row (None: a tombstone), the
    row of each id, and the ids changed since a snapshot (while a rebuild runs elsewhere)."""

    def __init__(self, dimension: int) -> None:
        if dimension < 1:
            raise ValueError("dimension must be >= 1")
        self._dimension = dimension
        self._ids: list[str | None] = []
        self._row: dict[str, int] = {}

    @property
    def dimension(self) -> int:
        return self._dimension

    def count(self) -> int:
        return len(self._row)

    def __len__(self) -> int:
        return len(self._row)

    def __contains__(self, item: object) -> bool:
        return item in self._row

    def ids(self) -> list[str]:
        """The indexed ids, in row order."""
        return [i for i in self._ids if i is not None]

    def rows_of(self, ids: Sequence[str]) -> Any:
        """The rows of ``ids`` (each must be indexed), as an int64 array."""
        np = require("numpy")
        return np.fromiter((self._row[i] for i in ids), dtype=np.int64, count=len(ids))


SPARSE_SHARE = 4
"""A query whose non-zero components are at most 1/SPARSE_SHARE of the dimension (a hashed
embedding of a few words) is scored on those components' rows only."""


class InMemoryIndex(RowIndex):
    """A float32 matrix with amortised O(1) add/remove and exact top-k by ``partition``.

    Not thread-safe: the owning actor serialises access. The matrix is stored one row per
    dimension (a column per vector, a growing buffer; a removal moves the last column into the
    hole), so that a sparse query reads only the rows of its non-zero components: a hashed
    embedding of a few words touches a few percent of the matrix instead of all of it.
    """

    def __init__(self, dimension: int, *, capacity: int = 1024) -> None:
        super().__init__(dimension)
        np = require("numpy")
        self._columns: Matrix = np.zeros((dimension, max(16, capacity)), dtype=np.float32)

    def vectors(self, ids: Sequence[str]) -> Matrix:
        """Copies of the stored vectors of ``ids`` (each must be indexed), one row each."""
        np = require("numpy")
        found: Matrix = np.ascontiguousarray(self._columns[:, self.rows_of(ids)].T)
        return found

    def add(self, ids: Sequence[str], vectors: Matrix) -> None:
        np = require("numpy")
        matrix = check_matrix(vectors, self._dimension, len(ids))
        need = len(self._ids) + len(ids)
        if need > self._columns.shape[1]:
            used = len(self._ids)
            size = max(need, self._columns.shape[1] * 2)
            grown = np.zeros((self._dimension, size), np.float32)
            grown[:, :used] = self._columns[:, :used]
            self._columns = grown
        latest = {item: n for n, item in enumerate(ids)}  # a repeated id: its last vector
        rows = np.empty(len(latest), dtype=np.int64)
        for n, item in enumerate(latest):
            row = self._row.get(item)
            if row is None:
                row = len(self._ids)
                self._row[item] = row
                self._ids.append(item)
            rows[n] = row
        picked = matrix if len(latest) == len(ids) else matrix[list(latest.values())]
        self._columns[:, rows] = picked.T
        if self._changed is not None:
            self._changed.update(ids)

    def remove(self, ids: Sequence[str]) -> int:
        removed = 0
        for item in ids:
            row = self._row.pop(item, None)
            if row is None:
                continue
            removed += 1
            if self._changed is not None:
                self._changed.add(item)
            last = len(self._ids) - 1
            if row != last:  # the last column fills the hole
                moved = self._ids[last]
                self._columns[:, row] = self._columns[:, last]
                self._ids[row] = moved
                if moved is not None:
                    self._row[moved] = row
                    if self._changed is not None:
                        self._changed.add(moved)
            self._ids.pop()
        return removed

    def search(self, vector: Matrix, top_k: int) -> list[Hit]:
        return self.search_batch(check_matrix(vector, self._dimension, 1), top_k)[0]

    def search_batch(self, vectors: Matrix, top_k: int) -> list[list[Hit]]:
        """The exact top-k of each query row, best first, equal scores by label."""
        queries = check_matrix(vectors, self._dimension)
        k = min(max(0, int(top_k)), len(self._row))
        if k == 0:
            return [[] for _ in range(queries.shape[0])]
        scores = self.scores(queries)
        return [top_hits(scores[q], k, self._ids) for q in range(queries.shape[0])]

    def scores(self, queries: Matrix) -> Matrix:
        """The inner product of each query row with every stored row (tombstone-free: one
        column per row of ``ids``): over the components some query uses, when they are few."""
        np = require("numpy")
        matrix = self._columns[:, : len(self._ids)]
        used = np.flatnonzero(queries.any(axis=0))
        if used.size * SPARSE_SHARE <= self._dimension:  # the other components add zeros
            found: Matrix = queries[:, used] @ matrix[used]
        else:
            found = queries @ matrix
        return found

    def snapshot(self) -> tuple[list[str | None], Matrix]:
        """The ids by row and a view of their vectors (one row each), for a build elsewhere
        (a worker thread). Ids written or moved from now on are tracked
        (:meth:`take_changes`): their rows in the view may change under the reader."""
        self._changed = set()  # a new snapshot: earlier changes are in it
        view: Matrix = self._columns[:, : len(self._ids)].T
        return list(self._ids), view
