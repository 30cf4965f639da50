"""``IvfIndex``: a k-means inverted file in numpy behind the ``VectorIndex`` protocol.

The vectors are partitioned into cells by spherical k-means; each cell keeps its vectors in one
growable float32 array, so a search scores the ``nprobe`` cells whose centroids are nearest to
the query with one matrix product each, and an add or a removal touches one cell (a removal
moves the cell's last vector into the hole). Scores are exact inner products: equal scores are
cut by label as in the exact search. Built by :meth:`IvfIndex.build` off the owner's thread.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolcards.tools.vector_store.base import require
from toolcards.tools.vector_store.calibration import ProbeSet, Search
from toolcards.tools.vector_store.index import ChangeLog, check_matrix
from toolcards.tools.vector_store.ranking import Hit, top_hits

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix

NPROBE_STEPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512)


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
    """The index of the most similar centroid for each row (int64)."""
    np = require("numpy")
    out = np.empty(matrix.shape[0], dtype=np.int64)
    for start in range(0, matrix.shape[0], 8192):
        out[start : start + 8192] = (matrix[start : start + 8192] @ centroids.T).argmax(axis=1)
    return out


def default_cells(rows: int) -> int:
    """About the square root of ``rows``: as many cells as vectors per cell."""
    return max(1, math.isqrt(rows))


class IvfIndex(ChangeLog):
    """Approximate top-k over an inverted file; ``search_batch(..., exact=True)`` scans every
    cell. Not thread-safe: the owner serialises access (:meth:`copy` makes one to calibrate
    elsewhere)."""

    def __init__(self, centroids: Matrix, *, nprobe: int = 1) -> None:
        np = require("numpy")
        self._np = np
        self._centroids: Matrix = check_matrix(centroids, int(centroids.shape[1]))
        self._dimension = int(self._centroids.shape[1])
        cells = self._centroids.shape[0]
        self._blocks: list[Matrix] = [np.zeros((0, self._dimension), np.float32)] * cells
        self._labels: list[list[str]] = [[] for _ in range(cells)]
        self._where: dict[str, tuple[int, int]] = {}
        self.nprobe = max(1, min(cells, nprobe))
        self.trained_at = 0
        """Vectors the cells were trained on."""
        self.tuned_at = 0
        """Vectors when ``nprobe`` was last calibrated (0: never)."""
        self.cost_ms = math.nan
        """CPU milliseconds a probe query cost at the calibrated ``nprobe``."""

    @classmethod
    def build(cls, labels: Sequence[str | None], matrix: Matrix, *, seed: int = 0) -> IvfIndex:
        """An index over the rows of ``matrix`` whose label is not None (row i holds
        ``labels[i]``), with about sqrt(n) cells trained on them."""
        np = require("numpy")
        live = np.array([r for r, label in enumerate(labels) if label is not None], np.int64)
        picked = matrix if len(live) == len(labels) else matrix[live]  # no copy when all live
        rows = np.ascontiguousarray(picked, dtype=np.float32)
        index = cls(kmeans(rows, rows.shape[0], default_cells(rows.shape[0]), seed=seed))
        index.add([label for label in labels if label is not None], rows)
        index.trained_at = index.count()
        return index

    # ---- the VectorIndex protocol -----------------------------------------------------------

    @property
    def dimension(self) -> int:
        return self._dimension

    @property
    def cells(self) -> int:
        return int(self._centroids.shape[0])

    def count(self) -> int:
        return len(self._where)

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, item: object) -> bool:
        return item in self._where

    def add(self, ids: Sequence[str], vectors: Matrix) -> None:
        """Insert or replace the vectors of ``ids`` (the last of a repeated id wins)."""
        np = self._np
        matrix = check_matrix(vectors, self._dimension, len(ids))
        latest = {item: n for n, item in enumerate(ids)}
        if not latest:
            return
        self._drop([item for item in latest if item in self._where])
        rows = np.fromiter(latest.values(), dtype=np.int64, count=len(latest))
        items = list(latest)
        cells = nearest_cells(matrix[rows], self._centroids)
        order = np.argsort(cells, kind="stable")
        bounds = np.flatnonzero(np.diff(cells[order])) + 1
        for part in np.split(order, bounds):
            self._append(int(cells[part[0]]), [items[int(i)] for i in part], matrix[rows[part]])
        if self._changed is not None:
            self._changed.update(latest)

    def _append(self, cell: int, items: list[str], block: Matrix) -> None:
        labels = self._labels[cell]
        start, end = len(labels), len(labels) + len(items)
        stored = self._blocks[cell]
        if end > stored.shape[0]:
            grown = self._np.zeros((max(end, 2 * stored.shape[0], 16), self._dimension), "f4")
            grown[:start] = stored[:start]
            self._blocks[cell] = stored = grown
        stored[start:end] = block
        labels.extend(items)
        for offset, item in enumerate(items):
            self._where[item] = (cell, start + offset)

    def remove(self, ids: Sequence[str]) -> int:
        present = [item for item in dict.fromkeys(ids) if item in self._where]
        self._drop(present)
        if self._changed is not None:
            self._changed.update(present)
        return len(present)

    def _drop(self, ids: Sequence[str]) -> None:
        for item in ids:
            cell, at = self._where.pop(item)
            labels, stored = self._labels[cell], self._blocks[cell]
            last = len(labels) - 1
            if at != last:  # the cell's last vector fills the hole
                stored[at] = stored[last]
                labels[at] = labels[last]
                self._where[labels[at]] = (cell, at)
            labels.pop()

    def vectors(self, ids: Sequence[str]) -> Matrix:
        """Copies of the stored vectors of ``ids`` (each must be indexed), one row each."""
        out: Matrix = self._np.empty((len(ids), self._dimension), self._np.float32)
        for n, item in enumerate(ids):
            cell, at = self._where[item]
            out[n] = self._blocks[cell][at]
        return out

    def search(self, vector: Matrix, top_k: int) -> list[Hit]:
        return self.search_batch(check_matrix(vector, self._dimension, 1), top_k)[0]

    def search_batch(
        self,
        vectors: Matrix,
        top_k: int,
        *,
        exact: bool | None = None,
        nprobe: int | None = None,
    ) -> list[list[Hit]]:
        """Top-k per query row over its ``nprobe`` nearest cells (every cell with
        ``exact=True``), best first, equal scores by label."""
        np = self._np
        queries = check_matrix(vectors, self._dimension)
        k = min(max(0, int(top_k)), len(self._where))
        if k == 0:
            return [[] for _ in range(queries.shape[0])]
        if exact:
            return self._scan(queries, range(self.cells), k)
        probes = max(1, min(self.cells, int(nprobe or self.nprobe)))
        near = queries @ self._centroids.T
        if probes < self.cells:
            near = np.argpartition(-near, probes - 1, axis=1)[:, :probes]
        else:
            near = np.broadcast_to(np.arange(self.cells), near.shape)
        found = []
        for query, cells in zip(queries, near, strict=True):
            hits = self._scan(query[None, :], cells, k)[0]
            if len(hits) < k:  # too few vectors in the nearest cells
                hits = self._scan(query[None, :], range(self.cells), k)[0]
            found.append(hits)
        return found

    def _scan(self, queries: Matrix, cells: Any, k: int) -> list[list[Hit]]:
        np = self._np
        labels: list[str] = []
        scores = []
        for cell in cells:
            members = self._labels[int(cell)]
            if members:
                labels += members
                scores.append(queries @ self._blocks[int(cell)][: len(members)].T)
        if not scores:
            return [[] for _ in range(queries.shape[0])]
        joined = np.concatenate(scores, axis=1)
        return [top_hits(row, k, labels) for row in joined]

    # ---- calibration, growth, builds elsewhere ------------------------------------------------

    def probes(self, samples: int = 200, seed: int = 0) -> ProbeSet | None:
        """Sample queries near the stored vectors, for :meth:`calibrate` (None: too few)."""
        if len(self._where) <= 11:
            return None
        rng = self._np.random.default_rng(seed)
        items = list(self._where)
        picked = rng.choice(len(items), size=min(samples, len(items)), replace=False)
        base = self.vectors([items[int(i)] for i in picked])
        return ProbeSet.near(base, lambda q, k: self.search_batch(q, k, exact=True), seed=seed)

    def at(self, nprobe: int) -> Search:
        """The top-10 of each query row at ``nprobe`` cells."""
        return lambda queries: self.search_batch(queries, 10, nprobe=nprobe)

    def calibrate(self, target: float = 0.98, samples: int = 200, seed: int = 0) -> float:
        """Set ``nprobe`` to the smallest step whose recall@10 reaches ``target`` on sample
        queries (up to a quarter of the cells: past that the inverted file saves little), and
        return that recall; measures :attr:`cost_ms` there."""
        self.tuned_at = self.count()
        probe = self.probes(samples, seed)
        if probe is None:
            return 1.0
        steps = [s for s in NPROBE_STEPS if s <= max(1, self.cells // 4)]
        self.nprobe, recall = probe.calibrate(steps, self.at, target, saturates=False)
        self.cost_ms = probe.cost_ms(lambda query: self.search(query, 10))
        return recall

    def needs_rebuild(self) -> bool:
        """True when the index holds four times the vectors its cells were trained on (a cell
        then holds about four times what it should)."""
        return len(self._where) >= 4 * max(1, self.trained_at)

    def needs_tuning(self) -> bool:
        """True when the index has doubled since ``nprobe`` was last calibrated."""
        return len(self._where) >= 2 * max(1, self.tuned_at)

    def copy(self) -> IvfIndex:
        """An independent copy, to calibrate elsewhere while this one keeps serving."""
        twin = IvfIndex(self._centroids, nprobe=self.nprobe)
        twin._blocks = [block.copy() for block in self._blocks]
        twin._labels = [list(labels) for labels in self._labels]
        twin._where = dict(self._where)
        twin.trained_at, twin.tuned_at, twin.cost_ms = self.trained_at, self.tuned_at, self.cost_ms
        return twin

    def snapshot(self) -> tuple[list[str | None], Matrix]:
        """The ids and a copy of their vectors, for a build elsewhere; changes from now on are
        tracked (:meth:`take_changes`)."""
        labels: list[str | None] = [item for members in self._labels for item in members]
        blocks = [self._blocks[c][: len(m)] for c, m in enumerate(self._labels) if m]
        empty = self._np.zeros((0, self._dimension), self._np.float32)
        matrix: Matrix = self._np.concatenate(blocks) if blocks else empty
        self._changed = set()
        return labels, matrix
