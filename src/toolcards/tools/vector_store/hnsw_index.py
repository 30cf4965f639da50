"""``HnswIndex``: a faiss HNSW graph (inner product) behind the ``VectorIndex`` protocol.

faiss (PyPI ``faiss-cpu``, extra ``toolcards[hnsw]``) is imported when an index is made. Rows
are faiss's sequential ids; a removed or replaced id leaves a tombstone that searches skip
(through a bitmap selector) until the next rebuild. The graph is built once, off the actor's
thread, by :func:`build_graph`; later adds join it incrementally.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolcards.tools.vector_store.base import VectorExtraMissing, require, usable_cpus
from toolcards.tools.vector_store.calibration import ProbeSet, Search
from toolcards.tools.vector_store.index import RowIndex, check_matrix
from toolcards.tools.vector_store.ranking import Hit, top_hits

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix

HNSW_HINT = "install the extra: pip install 'toolcards[hnsw]'"
EF_STEPS = (16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)


def faiss_module() -> Any:
    """The faiss module, or :class:`VectorExtraMissing` naming ``toolcards[hnsw]``."""
    try:
        import faiss  # lazy: extra hnsw (faiss)
    except ImportError as exc:
        raise VectorExtraMissing(f"faiss is not installed; {HNSW_HINT}") from exc
    return faiss


HNSW_SWITCH = "TOOLCARDS_HNSW"
"""``TOOLCARDS_HNSW=off`` (or ``0``, ``false``, ``no``): faiss counts as absent (exact search
or the inverted file, as without the extra)."""


def hnsw_available() -> bool:
    """True when faiss can be imported (without importing it) and is not switched off by
    ``TOOLCARDS_HNSW``."""
    if os.environ.get(HNSW_SWITCH, "").strip().lower() in ("off", "0", "false", "no"):
        return False
    return importlib.util.find_spec("faiss") is not None


def build_graph(matrix: Matrix, *, m: int = 16, ef_construction: int = 64, threads: int = 0) -> Any:
    """A faiss ``IndexHNSWFlat`` over the rows of ``matrix`` (row i gets faiss id i).

    Runs on the calling thread with ``threads`` OpenMP threads (0: every usable CPU); the
    slow part of an HNSW index, meant for a worker thread. The rows go in one call: faiss
    then inserts them level by level, which gives a better graph than adding in chunks.
    """
    faiss = faiss_module()
    np = require("numpy")
    graph = faiss.IndexHNSWFlat(int(matrix.shape[1]), m, faiss.METRIC_INNER_PRODUCT)
    graph.hnsw.efConstruction = ef_construction
    faiss.omp_set_num_threads(threads or usable_cpus())  # this thread's parallel regions only
    graph.add(np.ascontiguousarray(matrix, dtype=np.float32))
    return graph


class HnswIndex(RowIndex):
    """Approximate top-k over an HNSW graph; ``search_batch(..., exact=True)`` scans every row.

    Not thread-safe: the owning actor serialises access. ``ef_search`` trades speed for recall
    (see :meth:`calibrate`).
    """

    trained = True
    """Searches are approximate (``VectorStoreActor.info`` lists such collections)."""

    def __init__(
        self,
        dimension: int,
        *,
        m: int = 16,
        ef_construction: int = 64,
        ef_search: int = 64,
        graph: Any = None,
        labels: Sequence[str | None] = (),
    ) -> None:
        """An empty index, or one over ``graph`` whose row i holds ``labels[i]`` (None: a
        tombstone), as :func:`build_graph` or :meth:`load` give."""
        super().__init__(dimension)
        faiss = faiss_module()
        self._np = require("numpy")
        self._faiss = faiss
        if graph is None:
            graph = faiss.IndexHNSWFlat(dimension, m, faiss.METRIC_INNER_PRODUCT)
            graph.hnsw.efConstruction = ef_construction
        if graph.d != dimension or graph.ntotal != len(labels):
            raise ValueError("the graph does not match the dimension or the ids")
        self._graph = graph
        self._ids = list(labels)
        self._row = {label: row for row, label in enumerate(self._ids) if label is not None}
        self._bitmap: Any = self._np.full(max(1, -(-len(labels) // 8)), 0xFF, self._np.uint8)
        self._selector: Any = None
        self._params: tuple[int, Any, Any] | None = None
        """The last search parameters: (candidates, selector, faiss parameters)."""
        self._dead = 0
        self._bury_rows([row for row, label in enumerate(self._ids) if label is None])
        if len(self._row) + self._dead != len(self._ids):
            raise ValueError("duplicate ids")
        self.ef_search = ef_search
        self.tuned_at = 0
        """Live vectors when ``ef_search`` was last calibrated or measured (0: never)."""
        self.cost_ms = math.nan
        """CPU milliseconds a probe query cost when ``ef_search`` was calibrated."""

    @property
    def dead(self) -> int:
        """Tombstones (removed or replaced rows) waiting for a rebuild."""
        return self._dead

    def _stored(self) -> Matrix:
        """A view of every row of the graph's storage (valid until the next add)."""
        flat = self._faiss.downcast_index(self._graph.storage)
        rows = int(self._graph.ntotal)
        if rows == 0:
            empty: Matrix = self._np.zeros((0, self._dimension), dtype=self._np.float32)
            return empty
        data = self._faiss.rev_swig_ptr(flat.get_xb(), rows * self._dimension)
        view: Matrix = data.reshape(rows, self._dimension)
        return view

    def vectors(self, ids: Sequence[str]) -> Matrix:
        """Copies of the stored vectors of ``ids`` (each must be indexed), one row each."""
        found: Matrix = self._stored()[self.rows_of(ids)]
        return found

    # ---- writes -------------------------------------------------------------------------------

    def add(self, ids: Sequence[str], vectors: Matrix) -> None:
        """Insert, or replace (tombstone + new row), the vectors of ``ids``."""
        matrix = check_matrix(vectors, self._dimension, len(ids))
        latest = {item: n for n, item in enumerate(ids)}  # the last row of a repeated id wins
        if not latest:
            return
        self._bury([item for item in latest if item in self._row])
        start = len(self._ids)
        unique = matrix if len(latest) == len(ids) else matrix[list(latest.values())]
        self._graph.add(self._np.ascontiguousarray(unique))
        for offset, item in enumerate(latest):
            self._row[item] = start + offset
            self._ids.append(item)
        self._grow_bitmap(len(self._ids))
        if self._changed is not None:
            self._changed.update(latest)

    def remove(self, ids: Sequence[str]) -> int:
        present = [item for item in dict.fromkeys(ids) if item in self._row]
        self._bury(present)
        if self._changed is not None:
            self._changed.update(present)
        return len(present)

    def _bury(self, ids: Sequence[str]) -> None:
        self._bury_rows([self._row.pop(item) for item in ids])

    def _bury_rows(self, rows: Sequence[int]) -> None:
        for row in rows:
            self._ids[row] = None
            self._bitmap[row >> 3] &= ~(1 << (row & 7)) & 0xFF
        self._dead += len(rows)
        if rows and self._selector is None:
            self._new_selector()

    def _grow_bitmap(self, rows: int) -> None:
        need = -(-rows // 8)
        if need > self._bitmap.shape[0]:
            grown = self._np.full(max(need, 2 * self._bitmap.shape[0]), 0xFF, self._np.uint8)
            grown[: self._bitmap.shape[0]] = self._bitmap
            self._bitmap = grown
            if self._selector is not None:
                self._new_selector()

    def _new_selector(self) -> None:
        # The selector reads the bitmap through a raw pointer: keep both together.
        ptr = self._faiss.swig_ptr(self._bitmap)
        self._selector = self._faiss.IDSelectorBitmap(self._bitmap.shape[0] * 8, ptr)

    # ---- search -------------------------------------------------------------------------------

    def search(self, vector: Matrix, top_k: int) -> list[Hit]:
        return self.search_batch(check_matrix(vector, self._dimension, 1), top_k)[0]

    def search_batch(
        self, vectors: Matrix, top_k: int, *, exact: bool | None = None, ef: int | None = None
    ) -> list[list[Hit]]:
        """Top-k per query row (approximate unless ``exact=True``), best first."""
        queries = check_matrix(vectors, self._dimension)
        k = min(max(0, int(top_k)), len(self._row))
        if k == 0:
            return [[] for _ in range(queries.shape[0])]
        if exact:
            return self._exact(queries, k)
        pool = max(k, int(ef or self.ef_search))
        # The whole candidate pool comes back (it costs no more exploration), so equal
        # scores at the k-th place are cut by label as in the exact search.
        scores, rows = self._graph.search(queries, pool, params=self._search_params(pool))
        found = rows >= 0
        return [
            top_hits(scores[q][found[q]], k, self._ids, rows[q][found[q]])
            for q in range(queries.shape[0])
        ]

    def _search_params(self, pool: int) -> Any:
        """faiss search parameters for ``pool`` candidates, skipping the tombstones (made
        again only when either changes: setting them costs as much as a small search)."""
        selector = self._selector if self._dead else None
        last = self._params
        if last is None or last[0] != pool or last[1] is not selector:
            params = self._faiss.SearchParametersHNSW()
            params.efSearch = pool
            if selector is not None:
                params.sel = selector
            last = self._params = (pool, selector, params)
        return last[2]

    def _exact(self, queries: Matrix, k: int) -> list[list[Hit]]:
        scores = queries @ self._stored().T
        if self._dead:
            dead = self._np.array([label is None for label in self._ids], dtype=bool)
            scores[:, dead] = -self._np.inf
        return [top_hits(scores[q], k, self._ids) for q in range(queries.shape[0])]

    def probes(self, samples: int = 200, seed: int = 0) -> ProbeSet | None:
        """Sample queries near the stored vectors, for :meth:`calibrate` (None: too few)."""
        np = self._np
        alive = np.array([r for r, label in enumerate(self._ids) if label is not None])
        if alive.size <= 11:
            return None
        picked = np.random.default_rng(seed).choice(alive, min(samples, alive.size), False)
        base = np.ascontiguousarray(self._stored()[picked])
        return ProbeSet.near(base, self._exact, seed=seed)

    def at(self, ef: int) -> Search:
        """The top-10 of each query row at ``ef_search=ef``."""
        return lambda queries: self.search_batch(queries, 10, ef=ef)

    def calibrate(self, target: float = 0.98, samples: int = 200, seed: int = 0) -> float:
        """Set ``ef_search`` to the smallest of :data:`EF_STEPS` whose recall@10 reaches
        ``target`` on sample queries near the stored vectors (:class:`ProbeSet`), or where a
        larger step stops improving it, and return that recall; measures :attr:`cost_ms`."""
        self.tuned_at = self.count()
        probe = self.probes(samples, seed)
        if probe is None:
            return 1.0
        self.ef_search, recall = probe.calibrate(EF_STEPS, self.at, target)
        self.cost_ms = probe.cost_ms(lambda query: self.search(query, 10))
        return recall

    def measure(self, samples: int = 200, seed: int = 0) -> float:
        """Recall@10 at the current ``ef_search`` against exact search, on the sample queries
        :meth:`calibrate` uses; measures :attr:`cost_ms`."""
        self.tuned_at = self.count()
        probe = self.probes(samples, seed)
        if probe is None:
            return 1.0
        self.cost_ms = probe.cost_ms(lambda query: self.search(query, 10))
        return probe.recall(self.at(self.ef_search))

    # ---- rebuilds and persistence -----------------------------------------------------------

    def needs_rebuild(self) -> bool:
        """True when tombstones exceed a quarter of the live rows (and 1,000)."""
        return self._dead > max(1000, len(self._row) // 4)

    def needs_tuning(self) -> bool:
        """True when the graph has doubled since ``ef_search`` was last tuned (a larger graph
        needs a larger ``ef_search`` for the same recall)."""
        return len(self._row) >= 2 * max(1, self.tuned_at)

    def copy(self) -> HnswIndex:
        """An independent copy (graph, ids, tombstones, ``ef_search``), to calibrate on
        elsewhere while this one keeps serving."""
        twin = HnswIndex(
            self._dimension, graph=self._faiss.clone_index(self._graph), labels=self._ids
        )
        twin.ef_search, twin.tuned_at, twin.cost_ms = self.ef_search, self.tuned_at, self.cost_ms
        return twin

    def snapshot(self) -> tuple[list[str | None], Matrix]:
        """The live ids and a copy of their vectors, for a rebuild elsewhere; changes from now
        on are tracked (:meth:`take_changes`)."""
        rows = [r for r, label in enumerate(self._ids) if label is not None]
        matrix: Matrix = self._stored()[self._np.array(rows, dtype=self._np.int64)]
        self._changed = set()
        return [self._ids[r] for r in rows], matrix

    def differences(self, labels: Sequence[str | None], matrix: Matrix) -> set[str]:
        """Ids whose vector here differs from their row of ``matrix`` (row i holds
        ``labels[i]``), or that only one side holds."""
        np = self._np
        want = {label: row for row, label in enumerate(labels) if label is not None}
        differ = set(want).symmetric_difference(self._row)
        common = [item for item in want if item in self._row]
        stored = self._stored()
        for start in range(0, len(common), 65_536):
            part = common[start : start + 65_536]
            here = stored[np.array([self._row[i] for i in part], dtype=np.int64)]
            there = matrix[np.array([want[i] for i in part], dtype=np.int64)]
            unequal = np.flatnonzero((here != there).any(axis=1))
            differ.update(part[int(j)] for j in unequal)
        return differ

    def save(self, path: Path) -> None:
        """Write the graph (with tombstones) and the ids next to it, atomically."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        self._faiss.write_index(self._graph, str(tmp))
        labels = path.with_name(path.name + ".ids.json")
        labels_tmp = labels.with_name(labels.name + ".tmp")
        meta = {
            "dimension": self._dimension,
            "ef_search": self.ef_search,
            "tuned_at": self.tuned_at,
            "ids": self._ids,
        }
        labels_tmp.write_text(json.dumps(meta), encoding="utf-8")
        os.replace(labels_tmp, labels)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, dimension: int) -> HnswIndex:
        """An index written by :meth:`save` (ValueError when it does not match)."""
        faiss = faiss_module()
        meta = json.loads(path.with_name(path.name + ".ids.json").read_text(encoding="utf-8"))
        if meta.get("dimension") != dimension:
            raise ValueError(f"saved index has dimension {meta.get('dimension')}")
        graph = faiss.read_index(str(path))
        index = cls(dimension, graph=graph, labels=meta["ids"])
        index.ef_search = int(meta.get("ef_search") or 64)
        index.tuned_at = int(meta.get("tuned_at") or index.count())
        return index
