"""The cards as one pydantic-ai capability: their tools, and before each model request each
card's state (its summary and its per-turn context) as a capability part, in full first and
then only what changed (:mod:`toolcards.core.card_state`).

Team state is data, not instructions: the parts reach the model at ``none`` authority (framed,
with a note naming the card) unless the host gives the capability more (``authority=``). A
card's state reaches only a caller that ``readable`` lets read it (a governed capability asks
the policy, see ``toolcards.surfaces.agent.GovernedCards``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import Authority, ModelMessage

from toolcards.core.card import ToolCard
from toolcards.core.card_state import (
    CONTEXT_KEY,
    CardView,
    StatePart,
    TeamStatePart,
    TrustedTeamStatePart,
    as_data,
    next_part,
)

if TYPE_CHECKING:
    from pydantic_ai import RunContext
    from pydantic_ai.models import ModelRequestContext
    from pydantic_ai.toolsets import AbstractToolset

__all__ = [
    "CONTEXT_KEY",
    "CardFilter",
    "CardSource",
    "CardsCapability",
    "TeamStatePart",
    "TrustedTeamStatePart",
]

CardFilter = Callable[["RunContext[Any]", str, Sequence[str]], bool]
"""``(ctx, card type, the card's tool names) -> bool``: whether the run's caller may read the
card's summary and context."""


class CardSource(Protocol):
    """What the capability needs of a :class:`~toolcards.core.factory.ToolFactory`."""

    @property
    def cards(self) -> Sequence[ToolCard]: ...
    def tool_names(self, card: ToolCard) -> list[str]: ...
    def toolset(self) -> AbstractToolset[Any]: ...


@dataclass
class CardsCapability(AbstractCapability[Any]):
    """The capability of a :class:`~toolcards.core.factory.ToolFactory`'s cards.

    ``toolset`` is what the agent calls (default: the factory's own ``toolset()``; a governed
    one wraps it). ``authority`` is the most the cards' state speaks with (``none``: data;
    ``operator``: the application's voice; only the host's code sets it). ``readable`` decides
    per card whether the caller sees its state (default: every card). Not constructible from an
    agent spec: it holds live objects (a spec names ``toolcards``, see
    ``toolcards.surfaces.agent.GovernedCards``).
    """

    factory: CardSource
    toolset: AbstractToolset[Any] | None = None
    authority: Authority = "none"
    readable: CardFilter | None = field(default=None, repr=False)

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None

    def get_toolset(self) -> AbstractToolset[Any]:
        return self.toolset if self.toolset is not None else self.factory.toolset()

    @property
    def context_source(self) -> str:
        """Names this capability's parts in the history (its id, or ``cards``)."""
        return self.id or "cards"

    def card_views(self, ctx: RunContext[Any]) -> list[CardView]:
        """The cards with a summary or a context, that ``ctx``'s caller may read."""
        views: list[CardView] = []
        seen: dict[str, int] = {}
        for card in self.factory.cards:
            kind = card.card_type
            seen[kind] = seen.get(kind, 0) + 1
            summaries, providers = card.get_system_prompts(), card.get_context_states()
            if not summaries and not providers:
                continue
            readable = self.readable
            if readable is not None and not readable(ctx, kind, self.factory.tool_names(card)):
                continue
            key = kind if seen[kind] == 1 else f"{kind}-{seen[kind]}"
            views.append(CardView(key, kind, summaries, providers))
        return views

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        views = self.card_views(ctx)
        if views:
            history = list(ctx.messages)
            parts = await anyio.to_thread.run_sync(self._parts, views, history)
            data = [part for part in parts if isinstance(part, TeamStatePart)]
            trusted = [part for part in parts if isinstance(part, TrustedTeamStatePart)]
            if trusted:
                try:
                    ctx.enqueue(*trusted)
                except UserError:  # text that would pass for the framework's own frames
                    kinds = {view.key: view.card_type for view in views}
                    data += [as_data(part, kinds[part.card]) for part in trusted]
            if data:  # read before the user's prompt, as data
                ctx.enqueue(*data, placement="before_prompt")
        return request_context

    def _parts(self, views: list[CardView], history: list[ModelMessage]) -> list[StatePart]:
        made = (next_part(view, history, self.context_source, self.authority) for view in views)
        return [part for part in made if part is not None]
