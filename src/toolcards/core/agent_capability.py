"""The cards as one pydantic-ai capability: their tools, their system prompts as instructions,
and their per-turn context as a ``Context update N`` block before each model request.

The context block is added to the conversation (``RunContext.enqueue``), so the model sees it
in this request and the history keeps it; the states it showed ride in the part's metadata
(never sent to the model), so the next block holds only what changed since the one in the
history, whichever process or run produces it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelMessage, ModelRequest, SystemPromptPart

from toolcards.core.context import ContextState, ContextUpdater

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.toolsets import AbstractToolset

CONTEXT_KEY = "toolcards.context"
"""``SystemPromptPart.metadata`` key of a context block: its source, number and states."""


class CardSource(Protocol):
    """What the capability needs of a :class:`~toolcards.core.factory.ToolFactory`."""

    def get_system_prompts(self) -> list[Callable[[], str]]: ...
    def get_context_states(self) -> list[Callable[[], ContextState]]: ...
    def toolset(self) -> AbstractToolset[Any]: ...


@dataclass
class CardsCapability(AbstractCapability[Any]):
    """The capability of a :class:`~toolcards.core.factory.ToolFactory`'s cards.

    ``toolset`` is what the agent calls (default: the factory's own ``toolset()``; a governed
    one wraps it). Not constructible from an agent spec: it holds live objects (a spec names
    ``toolcards``, see ``toolcards.surfaces.agent.ToolCards``).
    """

    factory: CardSource
    toolset: AbstractToolset[Any] | None = None

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def get_toolset(self) -> AbstractToolset[Any]:
        return self.toolset if self.toolset is not None else self.factory.toolset()

    def get_instructions(self) -> list[Callable[[], str]] | None:
        return self.factory.get_system_prompts() or None

    @property
    def context_source(self) -> str:
        """Names this capability's context blocks in the history (its id, or ``cards``)."""
        return self.id or "cards"

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        providers = self.factory.get_context_states()
        if providers:
            part = await anyio.to_thread.run_sync(
                context_part, providers, ctx.messages, self.context_source
            )
            if part is not None:
                ctx.enqueue(part)
        return request_context


def context_part(
    providers: Sequence[Callable[[], ContextState]],
    history: Sequence[ModelMessage],
    source: str,
) -> SystemPromptPart | None:
    """The next context block after the last one of ``source`` in ``history`` (a full block
    when there is none), or None when nothing changed. Providers may block (they ask tool
    actors): call it from a worker thread."""
    previous, count = last_context(history, source)
    updater = ContextUpdater(providers, previous=previous, count=count)
    block = updater.next_block()
    if block is None:
        return None
    states = {key: state.model_dump(mode="json") for key, state in updater.snapshot().items()}
    record = {"source": source, "count": updater.count, "states": states}
    return SystemPromptPart(block, metadata={CONTEXT_KEY: record})


def last_context(
    history: Sequence[ModelMessage], source: str
) -> tuple[dict[str, ContextState], int]:
    """The states and number of the last context block of ``source`` in ``history``."""
    for message in reversed(history):
        if not isinstance(message, ModelRequest):
            continue
        for part in reversed(message.parts):
            record = (getattr(part, "metadata", None) or {}).get(CONTEXT_KEY)
            if isinstance(part, SystemPromptPart) and isinstance(record, dict):
                if record.get("source") != source:
                    continue
                states = record.get("states")
                count = record.get("count")
                if not isinstance(states, dict) or not isinstance(count, int):
                    continue
                return {k: ContextState.model_validate(v) for k, v in states.items()}, count
    return {}, 0
