"""Approximate indexes for large collections: :class:`AutoIndex` decides when a collection
leaves exact search, builds its approximate indexes off the owner's thread, catches them up
with what changed meanwhile, and serves the cheaper one.

A collection starts exact (an :class:`InMemoryIndex`). Once it holds ``approximate_above``
vectors, the :class:`AutoIndex` snapshots it and has the store's :class:`IndexBuilder` build,
on its own thread, the candidates its ``index=`` setting names: for ``"auto"`` a k-means
inverted file (numpy, built in seconds) and then, with faiss, an HNSW graph. Each is
calibrated on sample queries near the stored vectors (``nprobe``, ``ef_search``) until its
recall@10 against exact search reaches ``hnsw_target_recall``, and the CPU time a query then
costs is measured; exact search answers until the first candidate is ready, and the cheaper of
the two is served. A candidate that misses the target is not installed (a warning and
``note`` say so; with none left, exact search stays until the collection has doubled);
``auto`` without faiss logs a one-line hint once. The builder applies what was written since
the snapshot; the owner installs the result at its next call, re-applying the last few writes.
A served index that has doubled since it was calibrated is calibrated again (on a copy, on the
builder's thread); an inverted file grown four times over is trained anew (and the graph tried
again); a graph with too many tombstones is rebuilt. A rebuild that misses the target keeps
the served index, not rebuilt again until its vectors (a graph: its tombstones) have doubled.
With ``index_dir`` set, graphs are saved when the store stops and reloaded at start (checked
against the stored vectors, differences re-applied) instead of being rebuilt.
"""

from __future__ import annotations

import collections
import functools
import hashlib
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
from toolcards.tools.vector_store.index import InMemoryIndex
from toolcards.tools.vector_store.ivf_index import IvfIndex

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix
    from toolcards.tools.vector_store.models import VectorStoreConfig
    from toolcards.tools.vector_store.ranking import Hit

logger = logging.getLogger(__name__)

_hinted: set[str] = set()

Approximate = HnswIndex | IvfIndex
NAMES = {"hnsw": "HNSW graph", "ivf": "inverted file"}


def approximate_kinds(config: VectorStoreConfig) -> tuple[str, ...]:
    """The approximate indexes a collection past ``approximate_above`` may get, in the order
    they are built: ``auto`` the inverted file, then (with faiss) the HNSW graph; ``hnsw`` the
    graph (the inverted file without faiss); ``ivf`` the inverted file; ``exact``, another
    backend or no threshold: none."""
    if config.approximate_above is None or config.backend != "inmemory":
        return ()
    graph = ("hnsw",) if hnsw_available() else ()
    found = {"exact": (), "ivf": ("ivf",), "hnsw": graph or ("ivf",), "auto": ("ivf", *graph)}
    return found[config.index]


def kind_of(index: object) -> str:
    """``hnsw``, ``ivf`` or ``exact``."""
    if isinstance(index, HnswIndex):
        return "hnsw"
    return "ivf" if isinstance(index, IvfIndex) else "exact"


WORN = {"hnsw": "removed vectors", "ivf": "vectors"}
"""What :func:`wear` counts, by kind."""


def wear(index: Approximate) -> int:
    """What makes ``index`` due for a rebuild: a graph's tombstones, an inverted file's
    vectors (see their ``needs_rebuild``)."""
    return index.dead if isinstance(index, HnswIndex) else index.count()


def tune(built: Approximate, config: VectorStoreConfig) -> float:
    """Calibrate ``built`` (its ``nprobe`` or ``ef_search``) and return its recall@10 against
    exact search on sample queries: to ``hnsw_target_recall``, or for a graph the configured
    ``hnsw_ef_search``, raised (with a warning) when it misses the target."""
    target = config.hnsw_target_recall
    if isinstance(built, IvfIndex) or config.hnsw_ef_search is None:
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


def checked_file(
    config: VectorStoreConfig, labels: list[str | None], matrix: Matrix
) -> tuple[IvfIndex | None, float]:
    """:func:`checked_graph` for the inverted file (``nprobe`` calibrated)."""
    built = IvfIndex.build(labels, matrix)
    recall = tune(built, config)
    return (built if recall >= config.hnsw_target_recall else None), recall


Delta = tuple[list[str], list[str], "Matrix | None"]
"""Ids changed since a snapshot, those of them still present, and their current vectors."""

CATCH_UP_ROUNDS = 8
SMALL_DELTA = 512
"""A delta this small is applied by the owner itself when it installs the index."""
Refusal = tuple[str, int, float]
"""A candidate that missed the recall target: its kind, its size and its recall."""
Built = tuple[Approximate | None, Refusal | None]


def take_delta(source: InMemoryIndex | Approximate, *, keep_tracking: bool) -> Delta:
    """What changed in ``source`` since its snapshot, with the current vectors (copies)."""
    changed = sorted(source.take_changes())
    if keep_tracking:
        source.track_changes()
    present = [i for i in changed if i in source]
    return changed, present, source.vectors(present) if present else None


def apply_delta(built: Approximate, delta: Delta) -> int:
    """Drop the changed ids from ``built`` and add back the present ones; returns how many
    ids changed."""
    changed, present, vectors = delta
    built.remove(changed)
    if present and vectors is not None:
        built.add(present, vectors)
    return len(changed)


def storage_name(*parts: str) -> str:
    """One folder or collection name per distinct ``parts`` (a team, a store, a collection):
    readable (other characters than letters, digits, ``_`` and ``-`` replaced) and made
    distinct by a digest of the exact parts (``acme.prod`` and ``acme_prod``, or a team and
    a store whose names shift an ``_`` between them, shared one index before)."""
    slug = re.sub(r"[^A-Za-z0-9_-]", "_", "_".join(parts))[:80]
    digest = hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{slug}-{digest}"


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
        slug = storage_name(team_id, name.lstrip("#"))
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

    Exact below ``approximate_above`` vectors; from there the candidates of
    :func:`approximate_kinds`, built by ``builder`` from a snapshot while the served index
    answers, the cheaper one that reaches the recall target served. Every method is called
    from one owner thread (the store actor's); the builder's thread reads the served index
    only under a lock the owner holds while it writes, and hands each result back to run on
    the owner thread at its next call (a search, a write, :attr:`kind`, :attr:`building`).
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
        self.kinds = approximate_kinds(config)
        self.collection = collection
        self.store = store
        self.served: InMemoryIndex | Approximate = InMemoryIndex(dimension)
        self.note: str | None = None
        """Why the collection is served as it is: exact past the threshold (a candidate missed
        the recall target, or no graph without faiss), or one candidate rather than the
        other."""
        self._building = False
        self._todo: list[str] = []
        """Candidates still to build and compare in this round."""
        self._declined = 0
        """Size when every candidate missed the recall target (the next try is at twice)."""
        self._rebuild_declined = 0
        """:func:`wear` of the served index when its rebuild missed the recall target (the
        next rebuild waits for twice that: it started again at every call of the owner)."""
        self._builder = builder
        self._lock = threading.Lock()
        self._inbox: collections.deque[Callable[[], None]] = collections.deque()
        saved = builder.saved_path(collection)
        self._saved = saved if saved is not None and "hnsw" in self.kinds else None

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
        """``exact``, ``ivf`` or ``hnsw``: how a search is answered now."""
        self._settle()
        return kind_of(self.served)

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
        """Run what the builder handed back (installs, calibrations)."""
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
        if "hnsw" not in self.kinds:
            self._hint()
        if not self.kinds or served.count() < 2 * self._declined:
            return  # every candidate missed the recall target: try again at twice the size
        if isinstance(served, InMemoryIndex):
            if not self._todo and self._saved is not None and self._saved.exists():
                self._start(self._load_job, self._saved, *served.snapshot())
                return
            self._todo = self._todo or list(self.kinds)
            self._start(self._build_job, self._todo.pop(0), *served.snapshot())
        elif served.needs_rebuild() and wear(served) >= 2 * self._rebuild_declined:
            # a fresh one of its kind, compared again
            self._todo = [kind for kind in self.kinds if kind != kind_of(served)]
            self._start(self._build_job, kind_of(served), *served.snapshot())
        elif served.needs_tuning():
            self._start(self._tune_job, served)
        elif self._todo:  # a candidate still to compare with the served one
            self._start(self._build_job, self._todo.pop(0), *served.snapshot())

    def _hint(self) -> None:
        """``index="auto"`` past the threshold without faiss: say how to get a graph, once."""
        if self.cfg.index != "auto" or self.note is not None:
            return
        self.note = f"{self.count():,} vectors: for a graph index: {HNSW_HINT}"
        if self.store not in _hinted:  # once per store, however many collections grow
            _hinted.add(self.store)
            logger.warning("%s: %s", self._name, self.note)

    def _install(self, found: Built, reloading: bool) -> None:
        self._building = False
        built, refused = found
        served = self.served
        if refused is not None:
            self._refuse(*refused)
        if built is None:
            served.take_changes()
            if reloading and refused is None:
                self._saved = None  # the saved graph is unusable: build instead
            self._consider()
            return
        if isinstance(served, HnswIndex | IvfIndex) and kind_of(served) != kind_of(built):
            cheaper = served.cost_ms <= built.cost_ms
            kept, dropped = (served, built) if cheaper else (built, served)
            self.note = (
                f"{NAMES[kind_of(kept)]} chosen: {kept.cost_ms:.3f} ms of CPU per query "
                f"against {dropped.cost_ms:.3f} ms for the {NAMES[kind_of(dropped)]}, at "
                f"recall@10 >= {self.cfg.hnsw_target_recall:.2f}"
            )
            if kept is served:
                served.take_changes()
                self._consider()
                return
        elif refused is None:
            self.note = None
        self._declined = self._rebuild_declined = 0
        with self._lock:
            apply_delta(built, take_delta(served, keep_tracking=False))
        self.served = built
        self._consider()

    def _refuse(self, kind: str, rows: int, recall: float) -> None:
        note = (
            f"{NAMES[kind]} recall@10 {recall:.3f} below the target "
            f"{self.cfg.hnsw_target_recall:.2f}"
        )
        served = self.served
        if isinstance(served, InMemoryIndex):
            if not self._todo:
                self._declined = rows
                note += f": exact search kept (next try at {2 * rows:,} vectors)"
        elif kind == kind_of(served):  # its rebuild missed: keep it until it has doubled
            self._rebuild_declined = wear(served)
            note += f": the served one kept (next rebuild at {2 * wear(served):,} {WORN[kind]})"
        logger.warning("%s: %s", self._name, note)
        if self.cfg.index == "auto" and "hnsw" not in self.kinds:  # logged once, by _hint
            note += f"; for a graph index: {HNSW_HINT}"
        self.note = note

    def _install_tuning(self, served: Approximate, twin: Approximate | None) -> None:
        self._building = False
        if twin is None:  # the calibration failed: not again before the next doubling
            served.tuned_at = served.count()
        if twin is None or served is not self.served:
            return
        if isinstance(served, HnswIndex) and isinstance(twin, HnswIndex):
            served.ef_search = twin.ef_search
        elif isinstance(served, IvfIndex) and isinstance(twin, IvfIndex):
            served.nprobe = twin.nprobe
        served.tuned_at, served.cost_ms = twin.tuned_at, twin.cost_ms

    # ---- index thread -------------------------------------------------------------------------

    def _build(self, kind: str, labels: list[str | None], matrix: Matrix) -> Built:
        built: Approximate | None
        if kind == "hnsw":
            built, recall = checked_graph(self.cfg, self.dimension, labels, matrix)
        else:
            built, recall = checked_file(self.cfg, labels, matrix)
        if built is None:
            return None, (kind, sum(label is not None for label in labels), recall)
        return self._catch_up(built)

    def _catch_up(self, built: Approximate) -> Built:
        """Apply, here, what changed in the served index while ``built`` was made, until what
        is left is small enough for the owner to apply when it installs the index; calibrate
        again if the index has doubled meanwhile."""
        for _ in range(CATCH_UP_ROUNDS):
            with self._lock:
                delta = take_delta(self.served, keep_tracking=True)
            if apply_delta(built, delta) < SMALL_DELTA:
                break
        if built.needs_tuning():
            recall = tune(built, self.cfg)
            if recall < self.cfg.hnsw_target_recall:
                return None, (kind_of(built), built.count(), recall)
        return built, None

    def _build_job(self, kind: str, labels: list[str | None], matrix: Matrix) -> None:
        found: Built = None, None
        try:
            found = self._build(kind, labels, matrix)
        except Exception as exc:
            logger.warning("%s: building the %s failed: %s", self._name, NAMES[kind], exc)
        self._post(functools.partial(self._install, found, False))

    def _load_job(self, path: Path, labels: list[str | None], matrix: Matrix) -> None:
        found: Built = None, None
        try:
            loaded = HnswIndex.load(path, self.dimension)
            differ = sorted(loaded.differences(labels, matrix))
            if len(differ) > max(1000, loaded.count() // 4):  # too stale: build afresh
                found = self._build("hnsw", labels, matrix)
            else:  # bring the saved graph to the snapshot: the records are the truth
                rows = {label: row for row, label in enumerate(labels) if label is not None}
                present = [i for i in differ if i in rows]
                vectors = matrix[[rows[i] for i in present]] if present else None
                apply_delta(loaded, (differ, present, vectors))
                found = self._catch_up(loaded)
        except Exception as exc:
            logger.warning("%s: could not reload the graph from %s: %s", self._name, path, exc)
        self._post(functools.partial(self._install, found, True))

    def _tune_job(self, served: Approximate) -> None:
        twin: Approximate | None = None
        try:
            with self._lock:  # the owner's writes wait for the copy; its searches do not
                twin = served.copy()
            recall = tune(twin, self.cfg)
            if recall < self.cfg.hnsw_target_recall:
                logger.warning(
                    "%s: %s recall@10 %.3f at %d vectors is below the target %.2f (the best found)",
                    self._name,
                    NAMES[kind_of(twin)],
                    recall,
                    twin.tuned_at,
                    self.cfg.hnsw_target_recall,
                )
        except Exception as exc:
            logger.warning("%s: calibrating the index failed: %s", self._name, exc)
            twin = None
        self._post(functools.partial(self._install_tuning, served, twin))
