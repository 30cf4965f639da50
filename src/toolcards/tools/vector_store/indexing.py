"""Approximate indexes for large collections: :class:`AutoIndex` decides when a collection
leaves exact search, builds its graph off the owner's thread, and catches it up with what
changed meanwhile.

A collection starts exact (an :class:`InMemoryIndex`). Once it holds ``approximate_above``
vectors, the :class:`AutoIndex` snapshots it and has the store's :class:`IndexBuilder` build,
on its own thread, an HNSW graph (``index="auto"`` or ``"hnsw"``, faiss) or a k-means
partition (``"ivf"``, numpy); exact search keeps answering meanwhile. The builder applies what
was written since the snapshot to the graph, and the owner installs it at its next call,
re-applying the last few writes. A graph whose recall@10 against exact search stays below
``hnsw_target_recall`` is not installed (exact search stays, and a warning says so);
``auto`` without faiss stays exact and logs a one-line hint once. A served graph whose size has
doubled since its ``ef_search`` was calibrated is calibrated again (on a copy, on the builder's
thread); one with too many tombstones is rebuilt like the first. With ``index_dir`` set, graphs
are saved when the store stops and reloaded at start (checked against the stored vectors,
differences re-applied) instead of being rebuilt.
"""

from __future__ import annotations

import collections
import functools
import logging
import queue
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolcards.core.threads import background_thread
from toolcards.tools.vector_store.hnsw_index import (
    HNSW_HINT,
    HnswIndex,
    build_graph,
    hnsw_available,
)
from toolcards.tools.vector_store.index import (
    InMemoryIndex,
    default_cells,
    kmeans,
    nearest_cells,
)

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix
    from toolcards.tools.vector_store.models import VectorStoreConfig
    from toolcards.tools.vector_store.ranking import Hit

logger = logging.getLogger(__name__)

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


def tune(built: HnswIndex, config: VectorStoreConfig) -> float:
    """Set ``built.ef_search`` as ``config`` says and return its recall@10 against exact search
    on sample queries: calibrated to ``hnsw_target_recall``, or the configured value, raised
    (with a warning) when it misses the target."""
    target = config.hnsw_target_recall
    if config.hnsw_ef_search is None:
        return built.calibrate(target)
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
    return recall


def checked_graph(
    config: VectorStoreConfig, dimension: int, labels: list[str | None], matrix: Matrix
) -> tuple[HnswIndex | None, float]:
    """An HNSW graph over ``matrix`` and its recall@10 against exact search on sample queries;
    the graph is None when that recall stays below ``hnsw_target_recall`` (after raising
    ``ef_search`` as far as it helps)."""
    graph = build_graph(matrix, m=config.hnsw_m, ef_construction=config.hnsw_ef_construction)
    built = HnswIndex(dimension, graph=graph, labels=labels)
    recall = tune(built, config)
    return (built if recall >= config.hnsw_target_recall else None), recall


Delta = tuple[list[str], list[str], "Matrix | None"]
"""Ids changed since a snapshot, those of them still present, and their current vectors."""

CATCH_UP_ROUNDS = 8
SMALL_DELTA = 512
"""A delta this small is applied by the owner itself when it installs the graph."""
Built = tuple[HnswIndex | None, tuple[int, float] | None]
"""A built graph (None: none), and when it missed the recall target, its size and recall."""


def take_delta(source: InMemoryIndex | HnswIndex, *, keep_tracking: bool) -> Delta:
    """What changed in ``source`` since its snapshot, with the current vectors (copies)."""
    changed = sorted(source.take_changes())
    if keep_tracking:
        source.track_changes()
    present = [i for i in changed if i in source]
    return changed, present, source.vectors(present) if present else None


def apply_delta(built: HnswIndex, delta: Delta) -> int:
    """Drop the changed ids from ``built`` and add back the present ones; returns how many
    ids changed."""
    changed, present, vectors = delta
    built.remove(changed)
    if present and vectors is not None:
        built.add(present, vectors)
    return len(changed)


class IndexBuilder:
    """The index thread of one store: runs the build jobs of its collections one at a time
    (started with the first job; a daemon, so an interpreter exit does not wait for a long
    build)."""

    def __init__(self, name: str, *, folder: Path | None = None) -> None:
        self.name = f"{name}-index"
        self.folder = folder
        """Where graphs are saved (``index_dir``), or None."""
        self._stopped = threading.Event()
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @classmethod
    def for_store(cls, config: VectorStoreConfig, team_id: str, name: str) -> IndexBuilder:
        """The builder of the store actor ``name`` of team ``team_id``."""
        slug = re.sub(r"[^A-Za-z0-9_-]", "_", f"{team_id}_{name.lstrip('#')}")
        folder = None if config.index_dir is None else Path(config.index_dir) / slug
        return cls(f"{team_id}/{name}", folder=folder)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def saved_path(self, collection: str) -> Path | None:
        return None if self.folder is None else self.folder / f"{collection}.faiss"

    def submit(self, job: Callable[[], None]) -> None:
        self._jobs.put(job)
        with self._lock:
            if self._thread is None and not self._stopped.is_set():
                self._thread = background_thread(self._run, name=self.name)
                self._thread.start()

    def stop(self) -> None:
        """No new jobs; a running one finishes on its own and its result is dropped."""
        self._stopped.set()
        self._jobs.put(None)

    def _run(self) -> None:  # the index thread
        while not self._stopped.is_set():
            job = self._jobs.get()
            if job is None or self._stopped.is_set():
                return
            try:
                job()
            except Exception:  # a job reports its own failures; this is the last net
                logger.exception("%s: index job failed", self.name)
            job = None  # its snapshot goes now, not when the next job comes


class AutoIndex:
    """The index of one in-memory collection, as ``index=`` configures it (a ``VectorIndex``).

    Exact below ``approximate_above`` vectors; from there a graph or an inverted file, built by
    ``builder`` from a snapshot while exact search answers. Every method is called from one
    owner thread (the store actor's); the builder's thread reads the served index only under a
    lock the owner holds while it writes, and hands each result back to run on the owner
    thread at its next call (a search, a write, :attr:`kind`).
    """

    def __init__(
        self,
        config: VectorStoreConfig,
        dimension: int,
        builder: IndexBuilder,
        *,
        collection: str = "default",
        store: str = "vector store",
    ) -> None:
        self.cfg = config
        self.approximate = approximate_kind(config)
        self.collection = collection
        self.store = store
        self.served: InMemoryIndex | HnswIndex = InMemoryIndex(dimension)
        self._building = False
        self.note: str | None = None
        """Why this collection, past the threshold, is still searched exactly."""
        self._builder = builder
        self._lock = threading.Lock()
        self._inbox: collections.deque[Callable[[], None]] = collections.deque()
        self._declined = 0
        """Size of the last graph that missed the recall target (the next try is at twice)."""
        saved = builder.saved_path(collection)
        self._saved = saved if saved is not None and self.approximate == "hnsw" else None

    # ---- the VectorIndex protocol (owner thread) ---------------------------------------------

    @property
    def dimension(self) -> int:
        return self.served.dimension

    def count(self) -> int:
        return self.served.count()

    def __contains__(self, item: object) -> bool:
        return item in self.served

    def add(self, ids: Sequence[str], vectors: Matrix) -> None:
        self._settle()
        with self._lock:
            self.served.add(ids, vectors)
        self._consider()

    def remove(self, ids: Sequence[str]) -> int:
        self._settle()
        with self._lock:
            removed = self.served.remove(ids)
        if removed:
            self._consider()
        return removed

    def search(self, vector: Matrix, top_k: int) -> list[Hit]:
        self._settle()
        return self.served.search(vector, top_k)

    def search_batch(self, vectors: Matrix, top_k: int) -> list[list[Hit]]:
        self._settle()
        return self.served.search_batch(vectors, top_k)

    @property
    def building(self) -> bool:
        """A build, reload or calibration of this collection is under way."""
        self._settle()
        return self._building

    @property
    def kind(self) -> str:
        """``exact``, ``hnsw`` or ``ivf``: how a search is answered now."""
        self._settle()
        if isinstance(self.served, HnswIndex):
            return "hnsw"
        return "ivf" if self.served.trained else "exact"

    def save(self) -> None:
        """Write the graph to ``index_dir``, if there is one of each (on stop)."""
        self._settle()
        if self._saved is None or not isinstance(self.served, HnswIndex):
            return
        try:
            self.served.save(self._saved)
        except OSError as exc:
            logger.warning("could not save the %s index to %s: %s", self._name, self._saved, exc)

    # ---- owner thread -------------------------------------------------------------------------

    @property
    def _name(self) -> str:
        return f"{self.store}: collection {self.collection!r}"

    def _settle(self) -> None:
        """Run what the builder handed back (installs, new ``ef_search`` values)."""
        while self._inbox:
            result = self._inbox.popleft()
            try:
                result()
            except Exception:  # the served index stays as it was; the caller's call goes on
                self._building = False
                logger.exception("%s: installing the index failed", self._name)

    def _post(self, result: Callable[[], None]) -> None:  # index thread
        if not self._builder.stopped:
            self._inbox.append(result)

    def _start(self, job: Callable[..., None], *args: Any) -> None:
        self._building = True
        self._builder.submit(functools.partial(job, *args))

    def _consider(self) -> None:
        """Start a build, a reload, a rebuild or a calibration when one is due."""
        limit = self.cfg.approximate_above
        served = self.served
        if limit is None or self._building or served.count() < limit:
            return
        if self.approximate is None:
            self._hint()
            return
        if served.count() < 2 * self._declined:
            return  # the last graph missed the recall target: try again at twice the size
        if isinstance(served, HnswIndex):
            if served.needs_rebuild():
                self._start(self._graph_job, *served.snapshot())
            elif served.needs_tuning():
                self._start(self._tune_job, served)
        elif served.trained:
            return
        elif self.approximate == "ivf":
            self._start(self._train_job, *served.training_snapshot())
        elif self._saved is not None and self._saved.exists():
            self._start(self._load_job, self._saved, *served.snapshot())
        else:
            self._start(self._graph_job, *served.snapshot())

    def _hint(self) -> None:
        """``index="auto"`` past the threshold without faiss: say how to get a graph, once."""
        if self.cfg.index != "auto" or self.note is not None:
            return
        self.note = f"{self.count():,} vectors searched exactly; for a graph index: {HNSW_HINT}"
        if self.store not in _hinted:  # once per store, however many collections grow
            _hinted.add(self.store)
            logger.warning("%s: %s", self._name, self.note)

    def _install_graph(self, found: Built, reloading: bool) -> None:
        self._building = False
        built, refused = found
        if refused is not None:
            self._refuse(*refused)
        if built is None:
            self.served.take_changes()
            if reloading and refused is None:
                self._saved = None  # the saved graph is unusable: build instead
                self._consider()
            return
        self._declined, self.note = 0, None
        with self._lock:
            apply_delta(built, take_delta(self.served, keep_tracking=False))
        self.served = built

    def _refuse(self, rows: int, recall: float) -> None:
        self._declined = rows
        self.note = (
            f"HNSW recall@10 {recall:.3f} below the target {self.cfg.hnsw_target_recall:.2f}"
            f": exact search kept (next try at {2 * rows:,} vectors)"
        )
        logger.warning("%s: %s", self._name, self.note)

    def _install_cells(self, centroids: Matrix | None, assign: Any, rows: int) -> None:
        self._building = False
        if not isinstance(self.served, InMemoryIndex):
            return
        with self._lock:
            if centroids is None:
                self.served.abandon_training()
            else:
                self.served.install(centroids, assign, rows)

    def _install_tuning(self, served: HnswIndex, ef_search: int, tuned_at: int) -> None:
        self._building = False
        if served is self.served:
            served.ef_search, served.tuned_at = ef_search, tuned_at

    # ---- index thread -------------------------------------------------------------------------

    def _graph(self, labels: list[str | None], matrix: Matrix) -> Built:
        built, recall = checked_graph(self.cfg, self.dimension, labels, matrix)
        if built is None:
            return None, (sum(label is not None for label in labels), recall)
        return self._catch_up(built)

    def _catch_up(self, built: HnswIndex) -> Built:
        """Apply, here, what changed in the served index while ``built`` was made, until what
        is left is small enough for the owner to apply when it installs the graph; calibrate
        again if the graph has doubled meanwhile."""
        for _ in range(CATCH_UP_ROUNDS):
            with self._lock:
                delta = take_delta(self.served, keep_tracking=True)
            if apply_delta(built, delta) < SMALL_DELTA:
                break
        if built.needs_tuning():
            recall = tune(built, self.cfg)
            if recall < self.cfg.hnsw_target_recall:
                return None, (built.count(), recall)
        return built, None

    def _graph_job(self, labels: list[str | None], matrix: Matrix) -> None:
        found: Built = None, None
        try:
            found = self._graph(labels, matrix)
        except Exception as exc:
            logger.warning("%s: building the graph failed: %s", self._name, exc)
        self._post(functools.partial(self._install_graph, found, False))

    def _load_job(self, path: Path, labels: list[str | None], matrix: Matrix) -> None:
        found: Built = None, None
        try:
            loaded = HnswIndex.load(path, self.dimension)
            differ = sorted(loaded.differences(labels, matrix))
            if len(differ) > max(1000, loaded.count() // 4):  # too stale: build afresh
                found = self._graph(labels, matrix)
            else:  # bring the saved graph to the snapshot: the records are the truth
                rows = {label: row for row, label in enumerate(labels) if label is not None}
                present = [i for i in differ if i in rows]
                vectors = matrix[[rows[i] for i in present]] if present else None
                apply_delta(loaded, (differ, present, vectors))
                found = self._catch_up(loaded)
        except Exception as exc:
            logger.warning("%s: could not reload the graph from %s: %s", self._name, path, exc)
        self._post(functools.partial(self._install_graph, found, True))

    def _tune_job(self, served: HnswIndex) -> None:
        ef_search, tuned_at = served.ef_search, served.count()  # on failure: as it is
        try:
            with self._lock:  # the owner's writes wait for the copy; its searches do not
                twin = served.copy()
            recall = tune(twin, self.cfg)
            ef_search, tuned_at = twin.ef_search, twin.tuned_at
            if recall < self.cfg.hnsw_target_recall:
                logger.warning(
                    "%s: HNSW recall@10 %.3f at %d vectors is below the target %.2f "
                    "(ef_search %d, the best found)",
                    self._name,
                    recall,
                    tuned_at,
                    self.cfg.hnsw_target_recall,
                    ef_search,
                )
        except Exception as exc:
            logger.warning("%s: calibrating the graph failed: %s", self._name, exc)
        self._post(functools.partial(self._install_tuning, served, ef_search, tuned_at))

    def _train_job(self, matrix: Matrix, rows: int) -> None:
        centroids: Matrix | None = None
        assign: Any = None
        try:
            centroids = kmeans(matrix, rows, default_cells(rows))
            assign = nearest_cells(matrix[:rows], centroids)
        except Exception as exc:
            logger.warning("%s: training the inverted file failed: %s", self._name, exc)
            centroids = assign = None
        self._post(functools.partial(self._install_cells, centroids, assign, rows))
