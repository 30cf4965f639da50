"""The methods other cards call on a vector store actor, as a protocol for typed asks.

Cards never import the vector store's actor; they name its methods through this protocol
(``handle.ask(VectorStoreApi.query, "planning", text, 10)``), so mypy checks the calls.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any, Protocol

Hit = tuple[str, float]

GRAPH_COLLECTION = "knowledge_graph"
PLANNING_COLLECTION = "planning"
CARD_COLLECTIONS = {GRAPH_COLLECTION: "KnowledgeGraphTool", PLANNING_COLLECTION: "PlanningTool"}
"""Collections a card fills from its own state, by name -> that card: its read rules decide
who reads them, so ``VectorStoreTool``'s tools leave them alone unless the host lists them."""


class VectorStoreApi(Protocol):
    """The public methods of a vector store actor."""

    def available(self) -> bool:
        """True when the store can embed text."""

    def info(self) -> dict[str, Any]:
        """Provider, index and collection sizes."""

    def upsert(self, collection: str, items: list[tuple[str, str]]) -> None:
        """Queue ``(id, text)`` items for embedding."""

    def remove(self, collection: str, ids: list[str]) -> None:
        """Remove items by id."""

    def query(self, collection: str, text: str, top_k: int = 10) -> Future[list[Hit]]:
        """The ``top_k`` nearest ids as ``(id, cosine)`` (resolved off the actor thread)."""

    def check_stored(self, collection: str, item: str, text: str) -> str | None:
        """None when ``item`` is searchable with ``text``'s vector, else why not (one line)."""

    def flush(self) -> Future[None]:
        """Resolves once everything queued so far is searchable."""

    def collections(self) -> dict[str, int]:
        """Collection name -> item count."""

    def text(self, collection: str, item: str) -> str | None:
        """The stored text of one item, or None."""
