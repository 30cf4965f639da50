"""How other cards use a vector store: find it by name, query it in one call.

```python
from toolcards.tools.vector_store.client import find_store, query, is_available

handle = find_store(team_for(card), store=True)          # "#VectorStore", or None
if handle is not None and is_available(handle):
    handle.tell("upsert", "planning", [("t1", "write the report")])   # embedded off-thread
    hits = query(handle, "planning", "report writing", top_k=5)        # [(id, cosine), ...]
```

``query`` asks the actor for a Future (the embedding runs on the store's worker thread, never
on an actor thread) and waits for it here, in the caller's thread, with a timeout. Call it
from tool functions; from inside another actor prefer ``handle.ask("query", ...)`` and keep
the Future.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from toolcards.runtime import ActorHandle, ActorUnavailable, Team
from toolcards.tools._common.fusion import store_actor_name
from toolcards.tools.vector_store.index import Hit


def actor_name(store: bool | str = True) -> str | None:
    """``True`` -> ``#VectorStore``; ``"Docs"`` -> ``#Docs``; ``False`` -> None (the rule of
    :func:`toolcards.tools._common.fusion.store_actor_name`; ValueError for a bad name)."""
    return store_actor_name(store)


def find_store(team: Team, store: bool | str = True) -> ActorHandle | None:
    """The running store actor of ``team``, or None (not bound, or switched off)."""
    name = actor_name(store)
    return None if name is None else team.actor(name)


def is_available(handle: ActorHandle | None, *, timeout: float = 10.0) -> bool:
    """True when ``handle`` is a running store that can embed (the ``vector`` extra is there)."""
    if handle is None:
        return False
    try:
        return bool(handle.ask("available", timeout=timeout))
    except ActorUnavailable:
        return False


def query(
    handle: ActorHandle, collection: str, text: str, top_k: int = 10, *, timeout: float = 10.0
) -> list[Hit]:
    """The ``top_k`` ids most similar to ``text`` as ``(id, cosine)``, best first.

    Raises ``TimeoutError`` after ``timeout`` seconds, ``ValueError``/``TypeError`` for bad
    arguments, and ``VectorExtraMissing`` (an ``ImportError``) when embedding is unavailable.
    """
    answer = handle.ask("query", collection, text, top_k, timeout=timeout)
    hits: list[Hit] = _resolve(answer, timeout)
    return hits


def flush(handle: ActorHandle, *, timeout: float = 60.0) -> None:
    """Wait until every text upserted so far is embedded and searchable."""
    _resolve(handle.ask("flush", timeout=timeout), timeout)


def _resolve(answer: Any, timeout: float) -> Any:
    if isinstance(answer, Future):
        try:
            return answer.result(timeout=timeout)
        except TimeoutError as exc:
            raise TimeoutError(f"vector store gave no answer within {timeout:g} s") from exc
    return answer
