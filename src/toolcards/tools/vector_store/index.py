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


def kmeans(
    matrix: Matrix,
    rows: int,
    cells: int,
    *,
    iterations: int = 8,
    sample: int | None = None,
    seed: int = 0,
) -> Matrix:
    """Spherical k-means centroids (unit rows) of a sample of ``matrix[:rows]``."""
    np = require("numpy")
    if rows < cells or cells < 1:
        raise ValueError(f"cannot train {cells} cells over {rows} vectors")
    rng = np.random.default_rng(seed)
    sample = sample or max(10_000, 32 * cells)  # ~32 points per cell is plenty
    pick = rng.choice(rows, size=min(rows, max(sample, cells)), replace=False)
    data = np.array(matrix[np.sort(pick)], dtype=np.float32)
    centroids = data[rng.choice(data.shape[0], size=cells, replace=False)].copy()
    for _ in range(max(1, iterations)):
        labels = (data @ centroids.T).argmax(axis=1)
        sums = np.zeros_like(centroids)
        np.add.at(sums, labels, data)
        empty = np.bincount(labels, minlength=cells) == 0
        sums[empty] = data[rng.choice(data.shape[0], size=int(empty.sum()))]
        norms = np.linalg.norm(sums, axis=1, keepdims=True)
        centroids = (sums / np.maximum(norms, 1e-12)).astype(np.float32)
    out: Matrix = np.ascontiguousarray(centroids)
    return out


def nearest_cells(matrix: Matrix, centroids: Matrix) -> Any:
    """The index of the most similar centroid for each row (int32)."""
    np = require("numpy")
    out = np.empty(matrix.shape[0], dtype=np.int32)
    for start in range(0, matrix.shape[0], 8192):
        out[start : start + 8192] = (matrix[start : start + 8192] @ centroids.T).argmax(axis=1)
    return out


def default_cells(rows: int) -> int:
    return max(1, int(rows**0.5))


class RowIndex:
    """What the in-process indexes share: the id of each row (None: a tombstone), the row of
    each id, and the ids changed since a snapshot (while a rebuild runs elsewhere)."""

    def __init__(self, dimension: int) -> None:
        if dimension < 1:
            raise ValueError("dimension must be >= 1")
        self._dimension = dimension
        self._ids: list[str | None] = []
        self._row: dict[str, int] = {}
        self._changed: set[str] | None = None

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

    def track_changes(self) -> None:
        """Record from now on the ids added, replaced, moved or removed."""
        if self._changed is None:
            self._changed = set()

    def take_changes(self) -> set[str]:
        """Ids added, replaced, moved or removed since tracking started (tracking stops)."""
        changed, self._changed = self._changed or set(), None
        return changed


class InMemoryIndex(RowIndex):
    """A float32 matrix with amortised O(1) add/remove and exact top-k by ``argpartition``.

    Not thread-safe: the owning actor serialises access. Untrained, rows fill a growing buffer
    and a removal moves the last row into the hole. :meth:`train` switches on approximate
    search for large collections, where the exact scan is memory-bound: rows are partitioned
    by spherical k-means and stored contiguously per cell, a query scans only its ``nprobe``
    nearest cells plus the rows added since (the tail); removed rows become tombstones until
    the next re-sort.
    """

    def __init__(self, dimension: int, *, capacity: int = 1024) -> None:
        super().__init__(dimension)
        np = require("numpy")
        self._matrix: Matrix = np.zeros((max(16, capacity), dimension), dtype=np.float32)
        self._centroids: Matrix | None = None
        self._assign: Any = None  # int32 cell of each row, once trained
        self._tomb: Any = None  # bool per row, once trained
        self._touched: set[int] | None = None  # rows written since a training snapshot
        self._bounds: Any = None  # rows of cell c: bounds[c]:bounds[c+1] (sorted region)
        self._sorted = 0  # rows [0, _sorted) are ordered by cell
        self._dead = 0
        self.nprobe = 0

    def vectors(self, ids: Sequence[str]) -> Matrix:
        """Copies of the stored vectors of ``ids`` (each must be indexed), one row each."""
        found: Matrix = self._matrix[self.rows_of(ids)]
        return found

    # ---- writes -------------------------------------------------------------------------------

    def _grow(self, need: int) -> None:
        np = require("numpy")
        if need <= self._matrix.shape[0]:
            return
        used = len(self._ids)
        grown = np.zeros((max(need, self._matrix.shape[0] * 2), self._dimension), np.float32)
        grown[:used] = self._matrix[:used]
        self._matrix = grown
        if self._assign is not None:
            assign = np.full(grown.shape[0], -1, dtype=np.int32)
            assign[:used] = self._assign[:used]
            self._assign = assign
            tomb = np.zeros(grown.shape[0], dtype=bool)
            tomb[:used] = self._tomb[:used]
            self._tomb = tomb

    def add(self, ids: Sequence[str], vectors: Matrix) -> None:
        matrix = check_matrix(vectors, self._dimension, len(ids))
        self._grow(len(self._ids) + len(ids))
        cells = None if self._centroids is None else self._nearest_cell(matrix)
        for n, (item, vec) in enumerate(zip(ids, matrix, strict=True)):
            row = self._row.get(item)
            if (
                cells is not None
                and row is not None
                and row < self._sorted
                and self._assign[row] != cells[n]
            ):  # the new vector belongs to another cell: re-add it at the tail
                self._bury(row)
                row = None
            if row is None:
                row = len(self._ids)
                self._row[item] = row
                self._ids.append(item)
            self._matrix[row] = vec
            if self._touched is not None:
                self._touched.add(row)
            if cells is not None:
                self._assign[row] = cells[n]
        if self._changed is not None:
            self._changed.update(ids)
        if self._centroids is not None and self._needs_resort():
            self._reorder()

    def _bury(self, row: int) -> None:
        item = self._ids[row]
        if item is not None:
            self._row.pop(item, None)
        self._ids[row] = None
        self._matrix[row] = 0.0
        self._tomb[row] = True
        self._dead += 1

    def remove(self, ids: Sequence[str]) -> int:
        removed = 0
        for item in ids:
            row = self._row.get(item)
            if row is None:
                continue
            removed += 1
            if self._changed is not None:
                self._changed.add(item)
            if row < self._sorted:
                self._bury(row)
                continue
            del self._row[item]
            last = len(self._ids) - 1
            if row != last:
                moved = self._ids[last]
                self._matrix[row] = self._matrix[last]
                if self._touched is not None:
                    self._touched.add(row)
                if self._assign is not None:
                    self._assign[row] = self._assign[last]
                self._ids[row] = moved
                if moved is not None:
                    self._row[moved] = row
                    if self._changed is not None:
                        self._changed.add(moved)
            self._ids.pop()
        if self._centroids is not None and self._needs_resort():
            self._reorder()
        return removed

    # ---- search -------------------------------------------------------------------------------

    def search(self, vector: Matrix, top_k: int) -> list[Hit]:
        return self.search_batch(check_matrix(vector, self._dimension, 1), top_k)[0]

    def search_batch(
        self, vectors: Matrix, top_k: int, *, exact: bool | None = None
    ) -> list[list[Hit]]:
        """Top-k per query row; approximate once trained unless ``exact=True``."""
        np = require("numpy")
        queries = check_matrix(vectors, self._dimension)
        k = min(max(0, int(top_k)), len(self._row))
        if k == 0:
            return [[] for _ in range(queries.shape[0])]
        if self._centroids is not None and not exact:
            return [self._probe(q, k) for q in queries]
        used = len(self._ids)
        scores = queries @ self._matrix[:used].T
        if self._dead:
            scores[:, self._tomb[:used]] = -np.inf
        return [self._top(scores[q], k, None) for q in range(queries.shape[0])]

    def _top(self, scores: Any, k: int, rows: Any) -> list[Hit]:
        return top_hits(scores, k, self._ids, rows)

    def _probe(self, query: Matrix, k: int) -> list[Hit]:
        np = require("numpy")
        assert self._centroids is not None
        probe = np.argpartition(-(self._centroids @ query), self.nprobe - 1)[: self.nprobe]
        spans = [(int(self._bounds[c]), int(self._bounds[c + 1])) for c in np.sort(probe)]
        spans.append((self._sorted, len(self._ids)))
        spans = [(a, b) for a, b in spans if b > a]
        if sum(b - a for a, b in spans) < k + self._dead:
            return self.search_batch(query[None, :], k, exact=True)[0]
        scores = np.concatenate([self._matrix[a:b] @ query for a, b in spans])
        rows = np.concatenate([np.arange(a, b) for a, b in spans])
        if self._dead:
            scores[self._tomb[rows]] = -np.inf
        return self._top(scores, k, rows)

    # ---- the inverted-file partition -------------------------------------------------------------

    def _nearest_cell(self, matrix: Matrix) -> Any:
        assert self._centroids is not None
        return nearest_cells(matrix, self._centroids)

    def _needs_resort(self) -> bool:
        tail = len(self._ids) - self._sorted
        return max(tail, self._dead) > max(1000, len(self._ids) // 8)

    def _compact(self) -> None:
        np = require("numpy")
        if not self._dead:
            return
        keep = np.array([i is not None for i in self._ids], dtype=bool)
        alive = int(keep.sum())
        self._matrix[:alive] = self._matrix[: len(self._ids)][keep]
        if self._assign is not None:
            self._assign[:alive] = self._assign[: len(self._ids)][keep]
        self._ids = [i for i in self._ids if i is not None]
        self._row = {item: row for row, item in enumerate(self._ids) if item is not None}
        self._tomb[:] = False
        self._dead = 0
        self._sorted = 0

    def _reorder(self) -> None:
        """Drop tombstones and store the rows contiguously per cell."""
        np = require("numpy")
        assert self._centroids is not None
        self._compact()
        n = len(self._ids)
        order = np.argsort(self._assign[:n], kind="stable")
        self._matrix[:n] = self._matrix[order]
        self._assign[:n] = self._assign[order]
        self._ids = [self._ids[int(i)] for i in order]
        self._row = {item: row for row, item in enumerate(self._ids) if item is not None}
        cells = self._centroids.shape[0]
        self._bounds = np.searchsorted(self._assign[:n], np.arange(cells + 1))
        self._sorted = n

    @property
    def trained(self) -> bool:
        return self._centroids is not None

    @property
    def cells(self) -> int:
        """Number of k-means cells (0 when untrained: exact search)."""
        return 0 if self._centroids is None else int(self._centroids.shape[0])

    def train(
        self,
        *,
        cells: int | None = None,
        nprobe: int | None = None,
        iterations: int = 8,
        sample: int | None = None,
        seed: int = 0,
    ) -> None:
        """Partition the rows into ``cells`` (default ~sqrt(n)) by spherical k-means.

        Later searches scan the ``nprobe`` cells nearest to the query (default 1/8 of them)
        and the rows added since: recall below 1, a fraction of the memory traffic. Rows added
        later join their nearest cell at the next automatic re-sort.
        """
        self.untrain()
        matrix, rows = self.training_snapshot()
        cells = cells or default_cells(rows)
        centroids = kmeans(matrix, rows, cells, iterations=iterations, sample=sample, seed=seed)
        self.install(centroids, nearest_cells(matrix[:rows], centroids), rows, nprobe=nprobe)

    def training_snapshot(self) -> tuple[Matrix, int]:
        """The live matrix and its row count, for :func:`kmeans` / :func:`nearest_cells` run
        elsewhere (a worker thread). Rows written from now on are tracked, so
        :meth:`install` recomputes their cells; the index stays usable meanwhile."""
        if self._centroids is not None:
            raise ValueError("the index is already trained")
        self._touched = set()
        return self._matrix, len(self._ids)

    def snapshot(self) -> tuple[list[str | None], Matrix]:
        """The ids by row (None: a tombstone) and a view of their rows, for a graph built
        elsewhere (a worker thread). Ids written or moved from now on are tracked
        (:meth:`take_changes`): their rows in the view may change under the reader."""
        self._changed = set()  # a new snapshot: earlier changes are in it
        return list(self._ids), self._matrix[: len(self._ids)]

    def abandon_training(self) -> None:
        self._touched = None

    def install(
        self, centroids: Matrix, assign: Any, rows: int, *, nprobe: int | None = None
    ) -> None:
        """Adopt ``centroids`` and the cells of the first ``rows`` rows of the snapshot."""
        np = require("numpy")
        centroids = check_matrix(centroids, self._dimension)
        touched, self._touched = self._touched or set(), None
        n = len(self._ids)
        known = min(rows, n)
        cells = np.full(self._matrix.shape[0], -1, dtype=np.int32)
        cells[:known] = np.asarray(assign, dtype=np.int32)[:known]
        redo = np.array(sorted({r for r in touched if r < known} | set(range(known, n))), int)
        if redo.size:
            cells[redo] = nearest_cells(self._matrix[redo], centroids)
        self._centroids = centroids
        self._assign = cells
        self._tomb = np.zeros(self._matrix.shape[0], dtype=bool)
        self._reorder()
        count = centroids.shape[0]
        self.nprobe = max(1, min(count, nprobe or -(-count // 8)))

    def untrain(self) -> None:
        """Back to exact search (tombstones are dropped)."""
        self._compact()
        self._touched = None
        self._centroids = None
        self._assign = None
        self._tomb = None
        self._bounds = None
        self._sorted = 0
        self.nprobe = 0
