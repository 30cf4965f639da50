"""Vector indexes: the ``VectorIndex`` protocol and the numpy brute-force ``InMemoryIndex``.

Vectors are expected L2-normalised, so the inner product is the cosine similarity. Indexes are
pure search structures; durability lives in :mod:`toolcards.tools.vector_store.records`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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
COPY_STEP = 256
"""Vectors transposed into or out of a block at a time (a whole block at once is ~5x slower)."""


class InMemoryIndex(RowIndex):
    """Exact top-k over float32 vectors: amortised O(1) add/remove, top-k by ``partition``.

    Not thread-safe: the owning actor serialises access. The vectors live in blocks of up to
    ``block`` vectors, each block one row per dimension (a column per vector), so a sparse
    query reads only the rows of its non-zero components: a hashed embedding of a few words
    touches a few percent of the matrix instead of all of it. The first block grows by
    doubling from ``capacity``; past ``block`` vectors whole blocks are added (nothing is
    copied, at most one block stands empty). A removal moves the last vector into the hole.
    """

    def __init__(self, dimension: int, *, capacity: int = 1024, block: int = 131072) -> None:
        super().__init__(dimension)
        self._capacity = max(16, capacity)
        self._block = max(16, block)
        self._blocks: list[Matrix] = []

    def vectors(self, ids: Sequence[str]) -> Matrix:
        """Copies of the stored vectors of ``ids`` (each must be indexed), one row each."""
        return self._read(self.rows_of(ids))

    def add(self, ids: Sequence[str], vectors: Matrix) -> None:
        np = require("numpy")
        matrix = check_matrix(vectors, self._dimension, len(ids))
        latest = {item: n for n, item in enumerate(ids)}  # a repeated id: its last vector
        rows = np.empty(len(latest), dtype=np.int64)
        for n, item in enumerate(latest):
            row = self._row.get(item)
            if row is None:
                row = len(self._ids)
                self._row[item] = row
                self._ids.append(item)
            rows[n] = row
        self._reserve(len(self._ids))
        self._write(rows, matrix if len(latest) == len(ids) else matrix[list(latest.values())])
        if self._changed is not None:
            self._changed.update(ids)

    def remove(self, ids: Sequence[str]) -> int:
        np = require("numpy")
        removed = 0
        moves: dict[int, int] = {}
        """Row filled -> the row its vector comes from (every source is past the final count)."""
        for item in ids:
            row = self._row.pop(item, None)
            if row is None:
                continue
            removed += 1
            if self._changed is not None:
                self._changed.add(item)
            last = len(self._ids) - 1
            source = moves.pop(last, last)
            if row != last:  # the last vector fills the hole
                moves[row] = source
                moved = self._ids[last]
                self._ids[row] = moved
                if moved is not None:
                    self._row[moved] = row
                    if self._changed is not None:
                        self._changed.add(moved)
            self._ids.pop()
        if moves:  # the vectors move once, together
            filled = np.fromiter(moves, dtype=np.int64, count=len(moves))
            sources = np.fromiter(moves.values(), dtype=np.int64, count=len(moves))
            self._write(filled, self._read(sources))
        del self._blocks[-(-len(self._ids) // self._block) + 1 :]  # one spare block kept
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
        """The inner product of each query row with every stored vector, in row order:
        summed over the components some query uses, row by row, when they are few (the others
        add 0; gathering those rows into a matrix first copied more than the product read)."""
        np = require("numpy")
        count, size = len(self._ids), self._block
        sparse = np.count_nonzero(queries.any(axis=0)) * SPARSE_SHARE <= self._dimension
        found: Matrix = (np.zeros if sparse else np.empty)(
            (queries.shape[0], count), dtype=np.float32
        )
        for first in range(0, count, size):
            block = self._blocks[first // size][:, : min(size, count - first)]
            part = found[:, first : first + block.shape[1]]
            if not sparse:
                part[:] = queries @ block
                continue
            for query, row in zip(queries, part, strict=True):
                for d in np.flatnonzero(query).tolist():
                    row += query[d] * block[d]
        return found

    def snapshot(self) -> tuple[list[str | None], Matrix]:
        """The ids by row and a copy of their vectors, for a build elsewhere (a worker
        thread); ids written or moved from now on are tracked (:meth:`take_changes`)."""
        np = require("numpy")
        self._changed = set()  # a new snapshot: earlier changes are in it
        return list(self._ids), self._read(np.arange(len(self._ids)))

    def _reserve(self, count: int) -> None:
        """Room for ``count`` vectors: the first block doubled (up to ``block``), then blocks."""
        np = require("numpy")
        size, dimension = self._block, self._dimension
        while sum(block.shape[1] for block in self._blocks) < count:
            if not self._blocks:
                width = min(size, max(count, self._capacity))
                self._blocks.append(np.zeros((dimension, width), dtype=np.float32))
            elif (width := self._blocks[0].shape[1]) < size:
                grown = np.zeros((dimension, min(size, max(count, 2 * width))), dtype=np.float32)
                grown[:, :width] = self._blocks[0]
                self._blocks[0] = grown
            else:
                self._blocks.append(np.zeros((dimension, size), dtype=np.float32))

    def _read(self, rows: Any) -> Matrix:
        """The vectors of ``rows`` (int64 array), one row each (a copy)."""
        np = require("numpy")
        out: Matrix = np.empty((len(rows), self._dimension), dtype=np.float32)
        for block, cols, at in self._spans(rows):
            out[at] = block[:, cols].T
        return out

    def _write(self, rows: Any, matrix: Matrix) -> None:
        """Store the rows of ``matrix`` as the vectors of ``rows`` (int64 array, distinct)."""
        for block, cols, at in self._spans(rows):
            block[:, cols] = matrix[at].T

    def _spans(self, rows: Any) -> Iterator[tuple[Matrix, Any, Any]]:
        """``rows`` in pieces of at most :data:`COPY_STEP` within one block: the block, the
        columns there and the positions in ``rows`` (slices when both are consecutive, as
        appended or snapshotted vectors are)."""
        np = require("numpy")
        blocks = rows // self._block
        for b in np.unique(blocks).tolist():
            found = np.flatnonzero(blocks == b)
            columns = rows[found] - b * self._block
            for step in range(0, len(found), COPY_STEP):
                at, cols = found[step : step + COPY_STEP], columns[step : step + COPY_STEP]
                if consecutive(at) and consecutive(cols):
                    yield self._blocks[b], slice(cols[0], cols[-1] + 1), slice(at[0], at[-1] + 1)
                else:
                    yield self._blocks[b], cols, at


def consecutive(values: Any) -> bool:
    """True for an int array ``n, n + 1, n + 2, ...``."""
    return bool(values[-1] - values[0] == len(values) - 1 and (values[1:] > values[:-1]).all())
