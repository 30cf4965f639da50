"""VectorStoreTool: configures a team's ``#VectorStore`` actor and offers ``vector_search``."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from toolcards.core.actors import ActorHandle
from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.channels import Channels
from toolcards.core.errors import RetriableError
from toolcards.core.params import BaseToolParam
from toolcards.core.spec import annotate
from toolcards.governance.approvals.view import escaped_line
from toolcards.tools._common.batch import exact
from toolcards.tools._common.fusion import store_name
from toolcards.tools._common.team import team_observer
from toolcards.tools._common.vector_api import CARD_COLLECTIONS, VectorStoreApi
from toolcards.tools.vector_store.actor import VectorStoreActor
from toolcards.tools.vector_store.base import EmbeddingError
from toolcards.tools.vector_store.client import flush, query
from toolcards.tools.vector_store.models import StoreSettings, VectorStoreConfig
from toolcards.tools.vector_store.records import text_hash

MAX_LISTED = 20
"""Collections an answer names at most (the rest are counted)."""


def check_allowed(collection: str, allowed: list[str] | None) -> None:
    """Refuse a collection the card does not list, or (listing none) one another card fills:
    the graph's and the board's texts are read through their cards' rules, not around them."""
    if allowed is not None and collection not in allowed:
        raise RetriableError(f"unknown collection {collection!r}; valid: {allowed}")
    owner = CARD_COLLECTIONS.get(collection) if isinstance(collection, str) else None
    if allowed is None and owner is not None:
        raise RetriableError(f"collection {collection!r} is {owner}'s: use that card's tools")


def listing(parts: list[str]) -> str:
    """The first :data:`MAX_LISTED` of ``parts``, then how many more."""
    shown = ", ".join(parts[:MAX_LISTED])
    more = len(parts) - MAX_LISTED
    return f"{shown} and {more} more" if more > 0 else shown


class VectorSearch(BaseToolParam):
    """``vector_search(query_text, collection, top_k)``: semantic search over one collection.

    A store not named ``VectorStore`` names its tool ``vector_search_<name>``.
    """

    collections: list[str] | None = None
    """Collections the model may search (None: any but those other cards fill, see
    ``CARD_COLLECTIONS``: listing one here is the host's choice)."""
    max_top_k: int = Field(default=20, ge=1, le=100)
    snippet_chars: int = Field(default=200, ge=0, le=2000)
    """Characters of each hit's stored text shown to the model."""
    timeout_s: float = Field(default=15.0, gt=0, le=120)


class VectorAdd(BaseToolParam):
    """``vector_add(text, id, collection)``: store a text for later semantic search (off by
    default: it writes)."""

    collections: list[str] | None = None
    """Collections the model may write (None: any but those other cards fill, see
    ``CARD_COLLECTIONS``: listing one here is the host's choice)."""
    max_chars: int = Field(default=4_000, ge=10, le=100_000)
    timeout_s: float = Field(default=30.0, gt=0, le=300)


class VectorInfo(BaseToolParam):
    """``/vectors``: provider, model, backend and collection sizes, for humans."""

    expose: set[Channels] = Field(default_factory=lambda: {Channels.COMMAND})


class VectorStoreTool(ToolCard, StoreSettings):
    """A named vector store shared by the team (actor ``#<name>``), used by other cards.

    ``PlanningTool`` and ``KnowledgeGraphTool`` find it by name for semantic search. Several
    stores may coexist under different names. Without the ``vector`` extra the store reports
    itself unavailable and consumers fall back to keyword search.
    """

    name: str = "VectorStore"
    """The store's name (its actor is ``#<name>``): 1-64 letters, digits, ``_ . -``."""
    vector_search: bool | VectorSearch = True
    vector_add: bool | VectorAdd = False
    vector_info: bool | VectorInfo = True

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        return store_name(value)

    @model_validator(mode="after")
    def _check_config(self) -> VectorStoreTool:
        self.config()  # an unknown model or a wrong dimension fails when the card is built
        return self

    @property
    def actor_name(self) -> str:
        return f"#{store_name(self.name)}"

    def config(self) -> VectorStoreConfig:
        """The actor's configuration (validated: unknown model or wrong dimension raise)."""
        found = VectorStoreConfig(**{k: getattr(self, k) for k in StoreSettings.model_fields})
        found._transport = self._transport  # noqa: SLF001 - the config it builds
        return found

    def handle(self) -> ActorHandle[VectorStoreApi]:
        """Get or create the store actor in this card's team (the implicit one standalone)."""
        observer = team_observer(self)
        return observer.tool_actor(self.actor_name, VectorStoreActor, self.config())

    def available(self) -> bool:
        """True when this store can embed here (its modules are installed)."""
        return self.config().unavailable_reason() is None

    def missing_modules(self) -> list[str]:
        return self.config().missing_modules()

    def get_tools(self) -> list[ToolFunc]:
        self.handle()  # bound now, so consumers ordered after this card find it: its actor
        if not self.available():  # says once why it cannot embed
            return []
        return super().get_tools()

    def _search(self, param: VectorSearch) -> ToolFunc:
        return self._search_tool(self.handle(), param)

    def _add(self, param: VectorAdd) -> ToolFunc:
        return self._add_tool(self.handle(), param)

    def _info_command(self, param: VectorInfo) -> ToolFunc:
        card = self

        def vectors() -> str:
            """Show the vector store's provider, model, backend and collections."""
            info = card.handle().ask(VectorStoreApi.info)
            head = f"{card.actor_name}: {info['provider']} {info['model']} ({info['dimension']}d)"
            if not info["available"]:
                return f"{head}, unavailable: {info['reason']}"
            sizes = listing([f"{k}={v}" for k, v in info["collections"].items()]) or "empty"
            return f"{head}, {info['backend']}; collections: {sizes}; pending {info['pending']}"

        if self.name != "VectorStore":
            vectors.__name__ = vectors.__qualname__ = f"vectors_{self._suffix()}"
        return vectors

    def _suffix(self) -> str:
        return re.sub(r"[^a-z0-9]+", "_", self.name.lower()).strip("_")

    def _add_tool(self, handle: ActorHandle[VectorStoreApi], param: VectorAdd) -> ToolFunc:
        allowed = param.collections

        def vector_add(text: str, id: str | None = None, collection: str = "default") -> str:
            """Store a text so that vector_search can find it later by meaning.

            Args:
                text: The text to remember.
                id: A stable id; storing again under the same id replaces the text.
                collection: The collection to store it in.
            """
            check_allowed(collection, allowed)
            if not isinstance(text, str) or not text.strip():
                raise RetriableError("text must be a non-empty string")
            text = text[: param.max_chars]
            item = exact(id, "id") if id else text_hash(text)[:12]
            try:
                handle.ask(VectorStoreApi.upsert, collection, [(item, text)])
            except (ValueError, TypeError) as exc:
                raise RetriableError(str(exc)) from exc
            try:
                flush(handle, timeout=param.timeout_s)
            except TimeoutError:
                return (
                    f"error: {item!r} is not stored yet: its embedding took more than "
                    f"{param.timeout_s:g} s (call again to check)"
                )
            problem = handle.ask(VectorStoreApi.check_stored, collection, item, text)
            if problem is not None:
                why = " ".join(problem.split())  # one line, whatever the service answered
                return f"error: {item!r} was not stored in {collection!r}: {why}"
            return f"stored {item!r} in {collection!r}"

        if self.name != "VectorStore":
            vector_add.__name__ = vector_add.__qualname__ = f"vector_add_{self._suffix()}"
        return annotate(vector_add, idempotent=True, long_running=True)

    def _search_tool(self, handle: ActorHandle[VectorStoreApi], param: VectorSearch) -> ToolFunc:
        allowed = param.collections

        def vector_search(query_text: str, collection: str = "default", top_k: int = 5) -> str:
            """Find stored texts by meaning (semantic similarity), best match first.

            Args:
                query_text: What to look for, in natural language.
                collection: The collection to search.
                top_k: How many hits to return (1-20).
            """
            check_allowed(collection, allowed)
            if not isinstance(query_text, str) or not query_text.strip():
                raise RetriableError("query_text must be a non-empty string")
            k = max(1, min(int(top_k), param.max_top_k))
            try:
                hits = query(handle, collection, query_text, k, timeout=param.timeout_s)
            except (ValueError, TypeError) as exc:
                raise RetriableError(str(exc)) from exc
            except (EmbeddingError, TimeoutError) as exc:
                return "error: vector search failed: " + " ".join(str(exc).split())
            if not hits:
                known = handle.ask(VectorStoreApi.collections)
                names = [
                    f"{n} ({size})"
                    for n, size in known.items()
                    if (n not in CARD_COLLECTIONS if allowed is None else n in allowed)
                ]
                listed = listing(names) or "none"
                return f"no matches in collection {collection!r}; collections: {listed}"
            lines = []
            for item, score in hits:
                text = handle.ask(VectorStoreApi.text, collection, item) or ""
                snippet = " ".join(text.split())[: param.snippet_chars]
                # escaped: an id stored before ids were checked could hold a line break
                lines.append(f"{score:.3f} {escaped_line(item)}: {snippet}".rstrip(": "))
            return "\n".join(lines)

        if self.name != "VectorStore":  # several stores in one factory need distinct names
            suffix = self._suffix()
            vector_search.__name__ = vector_search.__qualname__ = f"vector_search_{suffix}"
            vector_search.__doc__ = (vector_search.__doc__ or "").replace(
                "Find stored texts", f"Find texts stored in {self.name}", 1
            )
        return annotate(vector_search, readonly=True, idempotent=True)

    capabilities: ClassVar[dict[str, CardCapability]] = {
        "vector_search": CardCapability(tool=_search, command=_search),
        "vector_add": CardCapability(tool=_add, command=_add),
        "vector_info": CardCapability(command=_info_command),
    }
