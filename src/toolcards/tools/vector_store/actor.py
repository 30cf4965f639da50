"""``VectorStoreActor``: the team-singleton ``#VectorStore`` (or ``#<name>``).

Embedding never runs on the actor's thread. ``upsert`` plans on the actor, embeds the changed
texts on a worker thread, and the worker hands the vectors back with ``tell("worker_apply")``.
``query`` returns a ``concurrent.futures.Future``: resolved at once when the query's vector is
cached, else after a worker embedded it and the actor searched. A caller that gives up cancels
the Future and its query is not embedded; at most :data:`MAX_QUERIES` wait at once. Use
:func:`toolcards.tools.vector_store.client.query` for the one-call form.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from toolcards.core.actors import ActorHandle
from toolcards.core.errors import TransientError
from toolcards.core.threads import leave_signals_to_the_main_thread
from toolcards.runtime import ToolActor, ToolActorContext
from toolcards.tools.vector_store.base import EmbeddingProvider, VectorExtraMissing
from toolcards.tools.vector_store.index import VectorIndex
from toolcards.tools.vector_store.indexing import AutoIndex, IndexBuilder, storage_name
from toolcards.tools.vector_store.models import VectorStoreConfig
from toolcards.tools.vector_store.providers import make_provider
from toolcards.tools.vector_store.qdrant_index import QdrantIndex, make_client
from toolcards.tools.vector_store.ranking import Hit
from toolcards.tools.vector_store.records import check_collection, text_hash, valid_pair
from toolcards.tools.vector_store.store import IndexFactory, Pending, VectorStore

if TYPE_CHECKING:
    from toolcards.tools.vector_store.base import Matrix

logger = logging.getLogger(__name__)

JOB_TEXTS = 256
"""Texts per worker job: bounds the latency a query waits behind a bulk upsert."""
MAX_QUERIES = 64
"""Query embeddings waiting at once; past it ``query`` is refused: an unbounded queue let
callers that gave up keep the workers busy and delay every later search."""
MAX_FAILURES = 10_000
"""Failed embeddings remembered (per item, for :meth:`VectorStoreActor.check_stored`)."""

_warned: set[str] = set()


@functools.lru_cache(maxsize=8)
def provider_for(config: VectorStoreConfig) -> EmbeddingProvider:
    """One provider (one ONNX session / HTTP pool) per distinct config, per process."""
    return make_provider(
        config.provider,
        model=config.model,
        dimension=config.expected_dimension(),
        batch_size=config.batch_size,
        max_length=config.max_length,
        timeout_s=config.timeout_s,
        base_url=config.openai_base_url,
        api_key=config.api_key,
        azure_endpoint=config.azure_endpoint,
        azure_deployment=config.azure_deployment,
        azure_api_version=config.azure_api_version,
        transport=config._transport,  # noqa: SLF001 - its own config's in-code transport
    )


class VectorStoreActor(ToolActor):
    """Named collections of ``(id, text)`` searchable by meaning; durable in the team store.

    Methods for consumers (typed asks, ``VectorStoreApi`` for other cards): ``available``,
    ``info``, ``upsert``, ``remove``, ``query`` (a Future), ``search_vector``, ``count``,
    ``collections``, ``text``, ``flush`` (a Future resolved when every pending embedding was
    applied).
    """

    config_type = VectorStoreConfig

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        super().__init__(ctx, config)
        if config is None:
            config = VectorStoreConfig()
        if not isinstance(config, VectorStoreConfig):
            raise TypeError(f"expected VectorStoreConfig, got {type(config).__name__}")
        self.cfg = config
        self.reason: str | None = config.unavailable_reason()
        self.store: VectorStore | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._jobs = 0
        self._waiters: list[Future[None]] = []
        self._queries: set[Future[list[Hit]]] = set()
        self._builder: IndexBuilder | None = None
        self._qdrant: Any = None
        self.last_error: str | None = None
        self._failed: dict[tuple[str, str], tuple[str, str]] = {}
        """``(collection, id) -> (text hash, error)`` of embeddings that failed."""

    # ---- lifecycle ----------------------------------------------------------------------------

    def on_start(self) -> None:
        if self.reason is not None:
            if self.ctx.name not in _warned:
                _warned.add(self.ctx.name)
                logger.warning("%s: %s", self.ctx.name, self.reason)
            return
        self._builder = IndexBuilder.for_store(self.cfg, self.ctx.team_id, self.ctx.name)
        self.store = VectorStore(
            model=self.cfg.model_name(),
            dimension=self.cfg.expected_dimension(),
            state=self.ctx.state,
            index_factory=self._index_factory(),
            max_text_chars=self.cfg.max_text_chars,
            query_cache_size=self.cfg.query_cache_size,
        )
        self._pool = ThreadPoolExecutor(
            self.cfg.workers,
            thread_name_prefix=f"{self.ctx.name}-embed",
            initializer=leave_signals_to_the_main_thread,
        )
        if self.cfg.backend == "qdrant":
            self._pool.submit(importlib.import_module, "qdrant_client")
        for collection, todo in self.store.restore():  # a large collection starts its build
            self._submit(collection, todo)
        if self.cfg.provider == "local":  # load the model now, not on the first query
            self._pool.submit(_warm_up, self.cfg)

    def on_stop(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        if self._builder is not None:
            self._builder.stop()
        for index in self._auto_indexes().values():
            index.save()
        pending: list[Future[Any]] = [*self._waiters, *self._queries]
        for waiter in pending:
            _settle(waiter, error=RuntimeError(f"{self.ctx.name} stopped"))
        self._waiters.clear()
        self._queries.clear()
        if self._qdrant is not None:
            self._qdrant.close()

    def _index_factory(self) -> IndexFactory:
        if self.cfg.backend == "inmemory":
            builder, store = self._builder, f"{self.ctx.team_id}/{self.ctx.name}"
            assert builder is not None
            return lambda collection, dimension: AutoIndex(
                self.cfg, dimension, builder, collection=collection, store=store
            )
        team, store = self.ctx.team_id, self.ctx.name[1:]

        def factory(collection: str, dimension: int) -> VectorIndex:
            # qdrant_client takes seconds to import: a worker pre-imports it at start, and the
            # client is made on first use (at once only when restoring stored collections).
            if self._qdrant is None:
                self._qdrant = make_client(url=self.cfg.qdrant_url, path=self.cfg.qdrant_path)
            return QdrantIndex(self._qdrant, storage_name(team, store, collection), dimension)

        return factory

    def _require(self) -> VectorStore:
        if self.store is None:
            raise VectorExtraMissing(self.reason or f"{self.ctx.name} is not started")
        return self.store

    def _auto_indexes(self) -> dict[str, AutoIndex]:
        if self.store is None:
            return {}
        found = {name: self.store.index(name) for name in self.store.collections()}
        return {name: index for name, index in found.items() if isinstance(index, AutoIndex)}

    def _self(self) -> ActorHandle[VectorStoreActor]:
        deadline = time.monotonic() + 10.0
        while True:
            handle = self.ctx.team.actor(self.ctx.name)
            stopped = self._pool is None or not self.ctx.team.running
            if handle is not None or stopped or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        if handle is None:
            raise RuntimeError(f"{self.ctx.name} is not running")
        return handle

    # ---- consumer API -------------------------------------------------------------------------

    def available(self) -> bool:
        """True when texts can be embedded (the ``vector`` extra is installed)."""
        return self.store is not None

    def info(self) -> dict[str, Any]:
        """Provider, model, dimension, backend, collections and pending embeddings."""
        found: dict[str, Any] = {
            "available": self.store is not None,
            "provider": self.cfg.provider,
            "model": self.cfg.model_name(),
            "dimension": self.cfg.expected_dimension(),
            "backend": self.cfg.backend,
            "index": self.cfg.index,
            "approximate_above": self.cfg.approximate_above,
            "reason": self.reason,
            "last_error": self.last_error,
        }
        if self.store is not None:
            found.update(self.store.info())
            auto = self._auto_indexes()
            kinds = {
                name: auto[name].kind if name in auto else "exact" for name in found["collections"]
            }
            found["indexes"] = kinds
            found["approximate"] = sorted(name for name, kind in kinds.items() if kind != "exact")
            found["building"] = sorted(name for name, index in auto.items() if index.building)
            found["index_notes"] = {
                name: index.note for name, index in auto.items() if index.note is not None
            }
        return found

    def upsert(self, collection: str, items: list[tuple[str, str]]) -> None:
        """Index ``(id, text)`` pairs; only new or changed texts are embedded (off-thread).

        Invalid pairs are skipped and reported with one ``ValueError`` after the valid ones
        were queued (a ``tell`` caller loses only the bad pairs).
        """
        if self.store is None:
            return
        check_collection(collection)
        if not isinstance(items, (list, tuple)):
            raise TypeError("items must be a list of (id, text) pairs")
        good: list[tuple[str, str]] = []
        bad: list[str] = []
        for pair in items:
            try:
                good.append(valid_pair(pair))
            except (TypeError, ValueError) as exc:
                bad.append(str(exc))
        self._submit(collection, self.store.plan_upsert(collection, good))
        if bad:
            logger.warning("%s: skipped %d invalid items: %s", self.ctx.name, len(bad), bad[0])
            raise ValueError(f"skipped {len(bad)} invalid items; first: {bad[0]}")

    def remove(self, collection: str, ids: list[str]) -> None:
        """Delete ``ids`` from ``collection`` (unknown ids are ignored)."""
        if self.store is None:
            return
        with self.ctx.state.batch():
            gone = self.store.remove(collection, ids)
            if gone:
                self.ctx.emit(_delta(collection, "removed", gone))

    def query(self, collection: str, text: str, top_k: int = 10) -> Future[list[Hit]]:
        """A Future of the ``top_k`` best ``(id, cosine)`` for ``text``, best first."""
        store = self._require()
        if not isinstance(text, str):
            raise TypeError("query text must be a string")
        text = text[: self.cfg.max_text_chars]
        store.check_search(collection, top_k)
        answer: Future[list[Hit]] = Future()
        vector = store.cached_query(text)
        if vector is not None:
            answer.set_result(store.search(collection, vector, top_k))
        else:
            assert self._pool is not None
            self._queries = {q for q in self._queries if not q.done()}  # actor thread only
            if len(self._queries) >= MAX_QUERIES:
                raise TransientError(f"{self.ctx.name} is busy: {MAX_QUERIES} queries waiting")
            self._queries.add(answer)
            self._pool.submit(self._embed_query, answer, collection, text, top_k)
        return answer

    def search_vector(self, collection: str, vector: Any, top_k: int = 10) -> list[Hit]:
        """Search with a vector the caller embedded itself (same model and dimension)."""
        return self._require().search(collection, vector, top_k)

    def count(self, collection: str) -> int:
        """Number of indexed vectors in ``collection``."""
        return 0 if self.store is None else self.store.count(collection)

    def collections(self) -> dict[str, int]:
        return {} if self.store is None else self.store.collections()

    def text(self, collection: str, item: str) -> str | None:
        """The (bounded) text ``item`` was indexed with."""
        return None if self.store is None else self.store.text(collection, item)

    def check_stored(self, collection: str, item: str, text: str) -> str | None:
        """None when ``item`` is searchable with the vector of ``text``; else why not, in one
        line (its embedding failed, it is still running, or another text replaced it)."""
        if self.store is None:
            return self.reason or f"{self.ctx.name} is not started"
        text = text[: self.cfg.max_text_chars]
        if self.store.text(collection, item) == text:
            return None
        failed = self._failed.get((collection, item))
        if failed is not None and failed[0] == text_hash(text):
            return f"embedding failed: {failed[1]}"
        return "not embedded yet, or another text replaced it meanwhile"

    def flush(self) -> Future[None]:
        """A Future resolved once every embedding submitted so far has been applied."""
        waiter: Future[None] = Future()
        if self._jobs == 0:
            waiter.set_result(None)
        else:
            self._waiters.append(waiter)
        return waiter

    # ---- worker round trips -------------------------------------------------------------------

    def _submit(self, collection: str, todo: Sequence[Pending]) -> None:
        assert self._pool is not None
        for start in range(0, len(todo), JOB_TEXTS):
            self._jobs += 1
            self._pool.submit(self._embed_job, collection, list(todo[start : start + JOB_TEXTS]))

    def _embed_job(self, collection: str, batch: list[Pending]) -> None:  # worker thread
        try:
            vectors = provider_for(self.cfg).embed([text for _, text, _ in batch])
        except Exception as exc:
            logger.warning("%s: embedding %d texts failed: %s", self.ctx.name, len(batch), exc)
            error = f"{type(exc).__name__}: {exc}"
            self._self().tell(VectorStoreActor.worker_failed, collection, batch, error)
            return
        self._self().tell(VectorStoreActor.worker_apply, collection, batch, vectors)

    def worker_apply(self, collection: str, batch: list[Pending], vectors: Matrix) -> None:
        """Internal: a worker embedded ``batch``; store what is still wanted."""
        store = self._require()
        try:
            with self.ctx.state.batch():
                ids = store.apply(collection, batch, vectors)
                if ids:
                    self.ctx.emit(_delta(collection, "indexed", ids))
            for item in ids if self._failed else ():
                self._failed.pop((collection, item), None)
        finally:
            self._job_done()

    def worker_failed(self, collection: str, batch: list[Pending], error: str) -> None:
        """Internal: a worker could not embed ``batch``."""
        try:
            self._require().fail(collection, batch)
            self.last_error = error
            for item, _, digest in batch:
                self._failed.pop((collection, item), None)
                self._failed[(collection, item)] = (digest, error)
            while len(self._failed) > MAX_FAILURES:  # the oldest go first
                del self._failed[next(iter(self._failed))]
        finally:
            self._job_done()

    def _job_done(self) -> None:
        self._jobs -= 1
        if self._jobs <= 0:
            self._jobs = 0
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                _settle(waiter)

    def _embed_query(  # worker thread
        self, answer: Future[list[Hit]], collection: str, text: str, top_k: int
    ) -> None:
        if answer.done():  # its caller gave up (cancelled) or the store stopped
            return
        try:
            vector = provider_for(self.cfg).embed([text])[0]
            self._self().tell(
                VectorStoreActor.worker_answer, answer, collection, text, vector, top_k
            )
        except Exception as exc:
            _settle(answer, error=exc)

    def worker_answer(
        self, answer: Future[list[Hit]], collection: str, text: str, vector: Matrix, top_k: int
    ) -> None:
        """Internal: a worker embedded a query; search and resolve its Future."""
        store = self._require()
        try:
            store.cache_query(text, vector)
            hits = store.search(collection, vector, top_k)
        except Exception as exc:
            _settle(answer, error=exc)
            return
        _settle(answer, hits)


def _settle(future: Future[Any], result: Any = None, *, error: Exception | None = None) -> None:
    """Resolve ``future`` unless it already is: its caller may cancel it at any moment."""
    with contextlib.suppress(InvalidStateError):
        if error is None:
            future.set_result(result)
        else:
            future.set_exception(error)


def _warm_up(config: VectorStoreConfig) -> None:  # worker thread
    try:
        provider_for(config).embed(["warm up"])
    except Exception as exc:  # reported again, with context, by the first real embedding
        logger.debug("vector store warm-up failed: %s", exc)


def _delta(collection: str, kind: str, ids: list[str]) -> dict[str, Any]:
    payload: dict[str, Any] = {"collection": collection, kind: len(ids)}
    if len(ids) <= 100:
        payload[f"{kind}_ids"] = ids
    return payload
