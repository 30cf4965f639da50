"""Approximate indexes for large collections: when to build one, building it off the actor's
thread, and catching it up with what changed meanwhile.

A collection starts exact (:class:`InMemoryIndex`). Once it holds ``approximate_above``
vectors, the :class:`IndexBuilder` snapshots it and builds, on its own thread, an HNSW graph
(``index="auto"`` or ``"hnsw"``, faiss) or a k-means partition (``"ivf"``, numpy); exact
search keeps answering meanwhile. A graph whose recall@10 against exact search stays below
``hnsw_target_recall`` is not installed (exact search stays, and a warning says so); ``auto``
without faiss stays exact and logs a one-line hint once. The actor then installs the
result, re-applying every id written or removed since the snapshot. An HNSW index with too
many tombstones is rebuilt the same way; with ``index_dir`` set, graphs are saved when the
store stops and reloaded at start (checked against the stored vectors, differences
re-applied) instead of being rebuilt.
"""

from __future__ import annotations

import functools
import logging
import queue
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolcards.core.threads import background_thread
from toolcards.tools.vector_store.base import require
from toolcards.tools.vector_store.hnsw_index import (
    HNSW_HINT,
    HnswIndex,
    build_graph,
    hnsw_available,
)
from toolcards.tools.vector_store.index import (
    InMemoryIndex,
    VectorIndex,
    default_cells,
    kmeans,
    nearest_cells,
)

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix
    from toolcards.tools.vector_store.models import VectorStoreConfig

logger = logging.getLogger(__name__)

Tell = Callable[..., None]
"""``tell(method, *args)`` to the owning actor (from a worker thread)."""
Ask = Callable[..., Any]
"""``ask(method, *args)`` of the owning actor (from a worker thread), with a timeout."""


_hinted: set[str] = set()


def approximate_kind(config: VectorStoreConfig) -> str | None:
    """``hnsw``, ``ivf`` or None (always exact) for this configuration on this machine."""
    if config.approximate_above is None or config.backend != "inmemory":
        return None
    if config.index in ("exact", "ivf"):
        return None if config.index == "exact" else "ivf"
    if hnsw_available():
        return "hnsw"
    return "ivf" if config.index == "hnsw" else None


def planned_kind(config: VectorStoreConfig, count: int) -> str:
    """The index a collection of ``count`` vectors gets: ``exact``, ``hnsw`` or ``ivf``."""
    limit = config.approximate_above
    kind = approximate_kind(config)
    return "exact" if kind is None or limit is None or count < limit else kind


def checked_graph(
    config: VectorStoreConfig, dimension: int, labels: list[str | None], matrix: Matrix
) -> tuple[HnswIndex | None, float]:
    """An HNSW graph over ``matrix`` and its recall@10 against exact search on sample queries;
    the graph is None when that recall stays below ``hnsw_target_recall`` (after raising
    ``ef_search`` as far as it helps)."""
    graph = build_graph(matrix, m=config.hnsw_m, ef_construction=config.hnsw_ef_construction)
    built = HnswIndex(dimension, graph=graph, labels=labels)
    target = config.hnsw_target_recall
    if config.hnsw_ef_search is None:
        recall = built.calibrate(target)
    else:
        built.ef_search = config.hnsw_ef_search
        recall = built.measure()
        if recall < target:
            logger.warning(
                "HNSW recall@10 %.3f at ef_search=%d is below the target %.2f: raising ef_search",
                recall,
                config.hnsw_ef_search,
                target,
            )
            recall = built.calibrate(target)
    return (built if recall >= target else None), recall


Delta = tuple[list[str], list[str], "Matrix | None"]
"""Ids changed since a snapshot, those of them still present, and their current vectors."""

CATCH_UP_ROUNDS = 8
SMALL_DELTA = 512
"""A delta this small is applied by the actor itself when it installs the graph."""


def take_delta(source: InMemoryIndex | HnswIndex, *, keep_tracking: bool) -> Delta:
    """What changed in ``source`` since its snapshot, with the current vectors (copies)."""
    np = require("numpy")
    changed = sorted(source.take_changes())
    if keep_tracking:
        source.track_changes()
    present = [i for i in changed if i in source]
    vectors = np.stack([source.vector(i) for i in present]) if present else None
    return changed, present, vectors


def apply_delta(built: HnswIndex, delta: Delta) -> int:
    """Drop the changed ids from ``built`` and add back the present ones; returns how many
    ids changed."""
    changed, present, vectors = delta
    built.remove(changed)
    if present and vectors is not None:
        built.add(present, vectors)
    return len(changed)


def install_graph(source: InMemoryIndex | HnswIndex, built: HnswIndex) -> HnswIndex:
    """``built`` caught up with ``source``: the ids changed since the last delta taken are
    dropped from it and re-added with their current vector, if they still exist."""
    apply_delta(built, take_delta(source, keep_tracking=False))
    return built


class IndexBuilder:
    """Decides, runs and reports the builds of one store actor (one build thread)."""

    def __init__(
        self,
        config: VectorStoreConfig,
        dimension: int,
        name: str,
        team_id: str,
        tell: Tell,
        ask: Ask,
    ) -> None:
        self.cfg = config
        self.kind = approximate_kind(config)
        self.dimension = dimension
        self._tell = tell
        self._ask = ask
        self._busy: set[str] = set()
        self._declined: dict[str, int] = {}
        """Collections whose graph missed the recall target, with their size then."""
        self.notes: dict[str, str] = {}
        """Why a collection past the threshold is still searched exactly."""
        self._stopped = threading.Event()
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._name = f"{name}-index"
        self._key = f"{team_id}/{name}"
        slug = re.sub(r"[^A-Za-z0-9_-]", "_", f"{team_id}_{name.lstrip('#')}")
        self.folder = None if config.index_dir is None else Path(config.index_dir) / slug

    def done(self, collection: str) -> None:
        self._busy.discard(collection)

    def building(self) -> list[str]:
        """Collections whose index is being built now."""
        return sorted(self._busy)

    def stop(self) -> None:
        """No new builds; a running one finishes on its own and is dropped (the thread is a
        daemon: an interpreter exit does not wait for a long build)."""
        self._stopped.set()
        self._jobs.put(None)

    def _submit(self, job: Callable[..., None], *args: Any) -> None:
        self._jobs.put(functools.partial(job, *args))
        if self._thread is None:
            self._thread = background_thread(self._run, name=self._name)
            self._thread.start()

    def _run(self) -> None:  # the build thread
        while not self._stopped.is_set():
            job = self._jobs.get()
            if job is None or self._stopped.is_set():
                return
            try:
                job()
            except Exception:  # a job reports its own failures; this is the last net
                logger.exception("%s: index job failed", self._name)

    def saved_path(self, collection: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{collection}.faiss"

    # ---- actor thread -------------------------------------------------------------------------

    def start(self, collection: str, index: VectorIndex) -> None:
        """At actor start: reload a saved graph when there is one, else :meth:`consider`."""
        path = self.saved_path(collection)
        if (
            self.kind == "hnsw"
            and path is not None
            and path.exists()
            and isinstance(index, InMemoryIndex)
            and not index.trained
        ):
            labels, matrix = index.snapshot()
            self._busy.add(collection)
            self._submit(self._load_job, collection, path, labels, matrix)
            return
        self.consider(collection, index)

    def consider(self, collection: str, index: VectorIndex) -> None:
        """Start a build when ``index`` has grown past the threshold or needs a rebuild."""
        limit = self.cfg.approximate_above
        if self.kind is None and limit is not None and index.count() >= limit:
            self._hint(collection, index.count())
        if self.kind is None or limit is None or collection in self._busy:
            return
        if index.count() < 2 * self._declined.get(collection, 0):
            return  # the last graph missed the recall target: try again at twice the size
        if isinstance(index, HnswIndex):
            if index.needs_rebuild():
                self._busy.add(collection)
                self._submit(self._graph_job, collection, *index.snapshot())
            return
        if not isinstance(index, InMemoryIndex) or index.trained or index.count() < limit:
            return
        self._busy.add(collection)
        if self.kind == "hnsw":
            self._submit(self._graph_job, collection, *index.snapshot())
        else:
            matrix, rows = index.training_snapshot()
            self._submit(self._train_job, collection, matrix, rows)

    def _hint(self, collection: str, count: int) -> None:
        """``index="auto"`` past the threshold without faiss: say how to get a graph, once."""
        if self.cfg.index != "auto" or self.cfg.backend != "inmemory":
            return
        note = f"{count:,} vectors searched exactly; for a graph index: {HNSW_HINT}"
        self.notes.setdefault(collection, note)
        if self._key not in _hinted:  # once per store, however many collections grow
            _hinted.add(self._key)
            logger.warning("%s: collection %r: %s", self._key, collection, note)

    def save(self, collection: str, index: VectorIndex) -> None:
        """Write ``index`` to ``index_dir`` when it is a graph (on stop)."""
        path = self.saved_path(collection)
        if path is None or not isinstance(index, HnswIndex):
            return
        try:
            index.save(path)
        except OSError as exc:
            logger.warning("could not save the %s index to %s: %s", collection, path, exc)

    # ---- build thread -------------------------------------------------------------------------

    def _report(self, method: str, *args: Any) -> None:
        if not self._stopped.is_set():  # a stopped actor takes no more messages
            self._tell(method, *args)

    def _graph(self, collection: str, labels: list[str | None], matrix: Matrix) -> HnswIndex:
        built, recall = checked_graph(self.cfg, self.dimension, labels, matrix)
        if built is None:
            rows = sum(label is not None for label in labels)
            self._declined[collection] = rows
            note = (
                f"HNSW recall@10 {recall:.3f} below the target {self.cfg.hnsw_target_recall:.2f}"
                f": exact search kept (next try at {2 * rows:,} vectors)"
            )
            self.notes[collection] = note
            raise ValueError(note)
        self._declined.pop(collection, None)
        self.notes.pop(collection, None)
        return built

    def _catch_up(self, collection: str, built: HnswIndex) -> None:
        """Apply, here, what changed in the served index while ``built`` was made, until
        what is left is small enough for the actor to apply when it installs the graph."""
        for _ in range(CATCH_UP_ROUNDS):
            if apply_delta(built, self._ask("worker_delta", collection)) < SMALL_DELTA:
                return

    def _graph_job(self, collection: str, labels: list[str | None], matrix: Matrix) -> None:
        built: HnswIndex | None = None
        try:
            built = self._graph(collection, labels, matrix)
            self._catch_up(collection, built)
        except Exception as exc:
            logger.warning("building the %s graph failed: %s", collection, exc)
            built = None
        self._report("worker_graph", collection, built)

    def _load_job(
        self, collection: str, path: Path, labels: list[str | None], matrix: Matrix
    ) -> None:
        loaded: HnswIndex | None = None
        try:
            loaded = HnswIndex.load(path, self.dimension)
            differ = sorted(loaded.differences(labels, matrix))
            if len(differ) > max(1000, loaded.count() // 4):  # too stale: build afresh
                loaded = self._graph(collection, labels, matrix)
            else:  # bring the saved graph to the snapshot: the records are the truth
                rows = {label: row for row, label in enumerate(labels) if label is not None}
                present = [i for i in differ if i in rows]
                vectors = matrix[[rows[i] for i in present]] if present else None
                apply_delta(loaded, (differ, present, vectors))
            self._catch_up(collection, loaded)
        except Exception as exc:
            logger.warning("could not reload the %s graph from %s: %s", collection, path, exc)
            loaded = None
        self._report("worker_graph", collection, loaded)

    def _train_job(self, collection: str, matrix: Matrix, rows: int) -> None:
        centroids: Matrix | None = None
        assign: Any = None
        try:
            centroids = kmeans(matrix, rows, default_cells(rows))
            assign = nearest_cells(matrix[:rows], centroids)
        except Exception as exc:
            logger.warning("training %s failed: %s", collection, exc)
            centroids = assign = None
        self._report("worker_trained", collection, centroids, assign, rows)
