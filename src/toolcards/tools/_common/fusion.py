"""Hybrid retrieval helpers: reciprocal-rank fusion and a tolerant link to a vector store.

The vector store is another team actor reached by name (``#VectorStore`` by default) with
``upsert``, ``remove``, ``query`` and ``available``. Consumers never import it; when it is
absent, unavailable or failing they rank by keywords alone and say so once.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Annotated, Any, Protocol, TypeVar

from pydantic import AfterValidator

from toolcards.core.actors import ActorHandle
from toolcards.tools._common.team import team_observer
from toolcards.tools._common.vector_api import VectorStoreApi

if TYPE_CHECKING:
    from pydantic import BaseModel

    from toolcards.core.card import ToolCard

A = TypeVar("A")

log = logging.getLogger(__name__)

Ranked = Sequence[tuple[str, float]]

DEFAULT_STORE = "#VectorStore"


def rrf_fuse(
    rankings: Sequence[Ranked],
    k: float = 60.0,
    weights: Sequence[float] | None = None,
) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion: ``sum(weight / (k + rank))`` over the lists naming an id.

    Ranks start at 1; ties in the fused score keep the order of first appearance.
    """
    if weights is not None and len(weights) != len(rankings):
        raise ValueError("one weight per ranking")
    scores: dict[str, float] = {}
    for i, ranking in enumerate(rankings):
        weight = 1.0 if weights is None else float(weights[i])
        for rank, (doc_id, _) in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + weight / (k + rank)
    order = {doc_id: i for i, doc_id in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], order[item[0]]))


STORE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}$")
BAD_STORE_NAME = (
    "a vector store is named by 1 to 64 letters, digits, '_', '.' or '-', starting with a "
    "letter (a leading '#' is allowed)"
)


def store_name(value: object) -> str:
    """The bare name of a vector store (``Docs`` for ``"Docs"``, ``" #Docs "``), or
    ValueError. The one rule for store names: the card's ``name`` and every consumer's
    ``vector_store`` reference go through it."""
    name = value.strip().removeprefix("#") if isinstance(value, str) else ""
    if not STORE_NAME.match(name):
        raise ValueError(f"{BAD_STORE_NAME}, got {value!r:.80}")
    if name.lower().startswith("defer-"):  # the team's short-lived workers are named so
        raise ValueError(f"vector store names starting with 'defer-' are reserved, got {name!r}")
    return name


def _not_a_quoted_switch(value: bool | str) -> bool | str:
    """A quoted ``"false"`` in YAML is a string, so it named a store ``false``: the card
    searched a store nobody fills, and its actor recorded that name."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        raise ValueError(f"give true or false without quotes, or a store's name, not {value!r}")
    return value


StoreRef = Annotated[bool | str, AfterValidator(_not_a_quoted_switch)]
"""A card's ``vector_store`` setting: True (the team's ``#VectorStore``), a store's name, or
False (keyword search only)."""


def store_actor_name(vector_store: bool | str) -> str | None:
    """The actor a store reference designates: ``True`` -> ``#VectorStore``, ``"Docs"`` ->
    ``#Docs``, ``False`` -> None; ValueError (:func:`store_name`) for a bad name."""
    if vector_store is False:
        return None
    if vector_store is True:
        return DEFAULT_STORE
    return "#" + store_name(vector_store)


class ActorFinder(Protocol):
    """Anything that finds a team actor by name (a team, a team observer)."""

    def actor(self, name: str) -> ActorHandle[Any] | None:
        """The running actor ``name``, or None."""


KEYWORD_ONLY_NOTICE = "note: semantic search is unavailable; results are keyword matches only."


class VectorLink:
    """A consumer's view of the vector store: query with a timeout, degrade to None.

    ``team`` is an :class:`ActorFinder` (a team or a team observer). ``notice()`` returns the
    keyword-only notice the first time the store is found missing and an empty string
    afterwards.
    """

    def __init__(self, team: ActorFinder | None, name: str | None, timeout: float = 10.0) -> None:
        self._team = team
        self.name = name
        self.timeout = timeout
        self._available: bool | None = None
        self._noticed = False
        self._failed = False

    def handle(self) -> ActorHandle[Any] | None:
        """The store's handle when it exists and says it is available."""
        if self.name is None or self._team is None:
            return None
        handle = self._team.actor(self.name)
        if handle is None:
            return None
        if self._available is None:
            try:
                self._available = bool(handle.within(self.timeout).ask(VectorStoreApi.available))
            except Exception:  # a store that cannot answer counts as unavailable
                log.warning("vector store %s did not answer 'available'", self.name)
                return None
        return handle if self._available else None

    def query(self, collection: str, text: str, top_k: int) -> list[tuple[str, float]] | None:
        """Nearest ids by cosine, best first; None when semantic search is unavailable."""
        handle = self.handle()
        if handle is None:
            self._failed = True
            return None
        answer: Any = None
        try:
            answer = handle.within(self.timeout).ask(VectorStoreApi.query, collection, text, top_k)
            # a store answers with a Future (its embedding runs off the actor) or with the hits
            hits = answer.result(timeout=self.timeout) if isinstance(answer, Future) else answer
        except Exception as exc:
            if isinstance(answer, Future):
                answer.cancel()  # nobody waits for it: the store's worker skips it
            log.warning("vector query on %s failed: %s", self.name, exc)
            self._failed = True
            return None
        self._failed = False
        return [(str(doc_id), float(score)) for doc_id, score in hits]

    def query_above(
        self, collection: str, text: str, top_k: int, min_score: float
    ) -> tuple[list[tuple[str, float]] | None, str]:
        """``query`` keeping hits scored at least ``min_score``, with the ``notice`` it raised."""
        hits = self.query(collection, text, top_k)
        notice = self.notice()
        if hits is not None:
            hits = [h for h in hits if h[1] >= float(min_score)]
        return hits, notice

    def notice(self) -> str:
        """The keyword-only notice, once, after a query found the store unusable."""
        if self._failed and not self._noticed:
            self._noticed = True
            return KEYWORD_ONLY_NOTICE
        return ""


def tool_actor_with_link(
    card: ToolCard, actor_name: str, actor_class: type[A], config: BaseModel
) -> tuple[ActorHandle[A], VectorLink]:
    """Start (or find) a card's team actor and a link to the store ``config.vector_store``."""
    observer = team_observer(card)
    handle = observer.tool_actor(actor_name, actor_class, config)
    return handle, VectorLink(observer, getattr(config, "vector_store", None))


def text_hash(text: str) -> str:
    """A short stable fingerprint of an embedded text."""
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8).hexdigest()


FINGERPRINT = re.compile(r"[0-9a-f]{16}")
"""A fingerprint row's value, as :func:`text_hash` writes it."""

REMOVE_BATCH = 1000
"""Ids one ``remove`` sent to the store names at most."""


def _fingerprints(state: Any, prefix: str, cap: int) -> dict[str, str]:
    """``doc_id -> fingerprint`` from the first ``cap`` rows under ``prefix``, read a batch at
    a time (a million rows planted there were all read at every start); what the cap leaves
    out is counted in one log line. A row that is no fingerprint is skipped, and a namespace
    that does not decode yields none (its documents are sent again anyway): one planted deep
    or wrong-typed row stopped the actor at every start."""
    found: dict[str, str] = {}
    read = 0
    try:
        for key, value in state.iter_items(prefix):
            if read == cap:
                left = state.count(prefix) - read
                log.warning(
                    "%d vector fingerprint rows past the cap of %d were not read", left, cap
                )
                break
            read += 1
            if isinstance(value, str) and FINGERPRINT.fullmatch(value) and len(key) > len(prefix):
                found[key[len(prefix) :]] = value
    except (ValueError, RecursionError) as exc:
        log.warning("vector fingerprints under %r unreadable (%s)", prefix, type(exc).__name__)
        return {}
    if len(found) < read:
        log.warning("skipped %d invalid vector fingerprint rows", read - len(found))
    return found


class VectorSync:
    """Keeps a vector-store collection in step with a tool actor's documents.

    :meth:`load` sends every document once and the store embeds only the texts it does not
    hold already: what it had queued when it stopped, or failed to embed, is sent again at
    the next start (its queue lives in memory, so a fingerprint written when a text was sent
    promised a vector the store never kept). Afterwards only changed documents are sent.
    The fingerprint of each sent text is persisted under ``prefix + doc_id``, so documents
    removed while the store was away are removed from it at the next start. Sends are
    ``tell`` calls: the store embeds on its own schedule, never on the caller's thread.
    At most ``cap`` fingerprint rows (the owner's cap of documents) are read at a start.
    """

    def __init__(
        self, link: VectorLink, collection: str, state: Any, *, cap: int, prefix: str = "vh:"
    ) -> None:
        self.link = link
        self.collection = collection
        self._state = state
        self._prefix = prefix
        self._synced = _fingerprints(state, prefix, cap)
        self._pending: dict[str, str] = {}
        self._removed: set[str] = set()

    def load(self, docs: dict[str, str]) -> None:
        """Send every document (the store skips those it holds) and remove those gone."""
        self._pending.update(docs)
        self._removed = self._synced.keys() - docs.keys()
        with self._state.batch():
            self.flush()

    def changed(self, doc_id: str, text: str) -> None:
        """Queue a document whose text may have changed."""
        self._removed.discard(doc_id)
        if self._synced.get(doc_id) != text_hash(text):
            self._pending[doc_id] = text
        else:
            self._pending.pop(doc_id, None)

    def removed(self, doc_id: str) -> None:
        """Queue the removal of a document."""
        self._pending.pop(doc_id, None)
        if doc_id in self._synced:
            self._removed.add(doc_id)

    @property
    def pending(self) -> int:
        """Documents waiting to be sent."""
        return len(self._pending) + len(self._removed)

    def flush(self) -> int:
        """Send what is queued when the store is usable; returns how many documents were sent.

        Call it inside the caller's state batch so fingerprints commit with the documents.
        """
        if not self._pending and not self._removed:
            return 0
        handle = self.link.handle()
        if handle is None:
            return 0
        sent = 0
        if self._removed:
            ids = sorted(self._removed)
            for start in range(0, len(ids), REMOVE_BATCH):
                chunk = ids[start : start + REMOVE_BATCH]
                handle.tell(VectorStoreApi.remove, self.collection, chunk)
            for doc_id in ids:
                self._synced.pop(doc_id, None)
                self._state.delete(self._prefix + doc_id)
            sent += len(ids)
            self._removed.clear()
        if self._pending:
            items = sorted(self._pending.items())
            handle.tell(VectorStoreApi.upsert, self.collection, items)
            for doc_id, text in items:
                digest = text_hash(text)
                if self._synced.get(doc_id) != digest:
                    self._synced[doc_id] = digest
                    self._state.put(self._prefix + doc_id, digest)
            sent += len(items)
            self._pending.clear()
        return sent
