"""How other cards use a vector store: find it by name, query it in one call.

```python
from toolcards.tools.vector_store.client import find_store, query, is_available

handle = find_store(team_observer(card), store=True)     # "#VectorStore", or None
if handle is not None and is_available(handle):
    handle.tell(VectorStoreApi.upsert, "planning", [("t1", "write the report")])  # off-thread
    hits = query(handle, "planning", "report writing", top_k=5)        # [(id, cosine), ...]
```

``query`` asks the actor for a Future (the embedding runs on the store's worker thread, never
on an actor thread) and waits for it here, in the caller's thread, with a timeout; on timeout
it cancels the Future, so the store does not embed a query nobody waits for. Call it from
tool functions; from inside another actor prefer ``handle.ask(VectorStoreApi.query, ...)``,
keep the Future, and cancel it when you stop waiting.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from toolcards.core.actors import ActorHandle, ActorUnavailable
from toolcards.tools._common.fusion import ActorFinder, store_actor_name
from toolcards.tools._common.vector_api import VectorStoreApi
from toolcards.tools.vector_store.ranking import Hit


def actor_name(store: bool | str = True) -> str | None:
    """``True`` -> ``#VectorStore``; ``"Docs"`` -> ``#Docs``; ``False`` -> None (the rule of
    :func:`toolcards.tools._common.fusion.store_actor_name`; ValueError for a bad name)."""
    return store_actor_name(store)


def find_store(team: ActorFinder, store: bool | str = True) -> ActorHandle[Any] | None:
    """The running store actor of ``team``, or None (not bound, or switched off)."""
    name = actor_name(store)
    return None if name is None else team.actor(name)


def is_available(handle: ActorHandle[Any] | None, *, timeout: float = 10.0) -> bool:
    """True when ``handle`` is a running store that can embed (the ``vector`` extra is there)."""
    if handle is None:
        return False
    try:
        return bool(handle.within(timeout).ask(VectorStoreApi.available))
    except ActorUnavailable:
        return False


def query(
    handle: ActorHandle[Any], collection: str, text: str, top_k: int = 10, *, timeout: float = 10.0
) -> list[Hit]:
    """The ``top_k`` ids most similar to ``text`` as ``(id, cosine)``, best first.

    Raises ``TimeoutError`` after ``timeout`` seconds, ``ValueError``/``TypeError`` for bad
    arguments, ``VectorExtraMissing`` (an ``ImportError``) when embedding is unavailable, and
    ``TransientError`` when the store already has too many queries waiting.
    """
    answer = handle.within(timeout).ask(VectorStoreApi.query, collection, text, top_k)
    hits: list[Hit] = _resolve(answer, timeout)
    return hits


def flush(handle: ActorHandle[Any], *, timeout: float = 60.0) -> None:
    """Wait until every text upserted so far is embedded and searchable."""
    _resolve(handle.within(timeout).ask(VectorStoreApi.flush), timeout)


def _resolve(answer: Any, timeout: float) -> Any:
    if isinstance(answer, Future):
        try:
            return answer.result(timeout=timeout)
        except TimeoutError as exc:
            answer.cancel()  # a query still queued is then skipped, not embedded for no one
            raise TimeoutError(f"vector store gave no answer within {timeout:g} s") from exc
    return answer
