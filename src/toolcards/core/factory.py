"""ToolFactory: binds cards to an owner and yields tools, prompts, commands and toolsets."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from toolcards.core.card import ToolCard, ToolFunc
from toolcards.core.channels import Channels
from toolcards.core.commands import CommandRegistry
from toolcards.core.context import ContextProvider, ContextUpdater
from toolcards.core.retry import wrap_retriable
from toolcards.core.spec import annotations_of, describe
from toolcards.core.views import CardView

if TYPE_CHECKING:
    from pydantic_ai.toolsets import AbstractToolset

    from toolcards.core.agent_capability import CardsCapability


def order_cards(cards: Sequence[ToolCard]) -> list[ToolCard]:
    """Stable topological order by ``depends_on`` (and ``optional_depends_on`` when present).

    A missing required dependency or a cycle is a ValueError naming the cards involved.
    """
    by_type: dict[str, list[int]] = {}
    for i, card in enumerate(cards):
        by_type.setdefault(card.card_type, []).append(i)
    edges: dict[int, set[int]] = {i: set() for i in range(len(cards))}
    for i, card in enumerate(cards):
        for dep in card.depends_on:
            if dep not in by_type:
                raise ValueError(
                    f"{card.card_type} depends on {dep}, which is not among the cards "
                    f"({', '.join(c.card_type for c in cards) or 'none'})"
                )
            edges[i].update(j for j in by_type[dep] if j != i)
        for dep in card.optional_depends_on:
            edges[i].update(j for j in by_type.get(dep, ()) if j != i)
    done: list[int] = []
    placed: set[int] = set()
    remaining = list(range(len(cards)))
    while remaining:
        ready = next((i for i in remaining if edges[i] <= placed), None)
        if ready is None:
            cycle = ", ".join(sorted({cards[i].card_type for i in remaining}))
            raise ValueError(f"dependency cycle among cards: {cycle}")
        done.append(ready)
        placed.add(ready)
        remaining.remove(ready)
    return [cards[i] for i in done]


class ToolFactory:
    """Binds cards to an observer and exposes their capabilities per channel.

    Cards are put in dependency order (errors raised before any observer is attached), then
    each card gets the observer (held weakly), then tool and command names are checked for
    clashes across cards.
    """

    def __init__(
        self,
        tool_cards: Iterable[ToolCard],
        observer: object | None = None,
        retry_exception: type[Exception] | None = None,
    ) -> None:
        self.cards: list[ToolCard] = order_cards(list(tool_cards))
        self.retry_exception = retry_exception
        for card in self.cards:
            if observer is not None:
                card.observer(observer)
        self._tools: list[tuple[ToolCard, ToolFunc]] = []
        self._commands: list[tuple[ToolCard, ToolFunc]] = []
        for card in self.cards:
            self._tools.extend((card, fn) for fn in card.get_tools())
            self._commands.extend((card, fn) for fn in card.get_commands())
        _check_unique(self._tools, "tool")
        _check_unique(self._commands, "command")
        self._toolset: AbstractToolset[Any] | None = None
        self._reserved: frozenset[str] = frozenset()

    def reserve(self, names: Iterable[str]) -> None:
        """The names of the local tools served beside the cards' (a config's plain ``tools:``):
        like the card tools' names, no remote tool of :meth:`get_toolsets` may take them."""
        self._reserved = frozenset(names)

    def get_tools(self) -> list[ToolFunc]:
        """TOOL_CALL callables; with ``retry_exception``, RetriableError becomes it."""
        if self.retry_exception is None:
            return [fn for _, fn in self._tools]
        return [wrap_retriable(fn, self.retry_exception) for _, fn in self._tools]

    def tool_names(self, card: ToolCard) -> list[str]:
        """The names of ``card``'s TOOL_CALL tools (the policy's targets)."""
        return [fn.__name__ for owner, fn in self._tools if owner is card]

    def get_system_prompts(self) -> list[Callable[[], str]]:
        """SYSTEM_PROMPT providers of every card, in card order."""
        return [p for card in self.cards for p in card.get_system_prompts()]

    def get_context_states(self) -> list[ContextProvider]:
        """LLM_CONTEXT providers of every card, in card order."""
        return [p for card in self.cards for p in card.get_context_states()]

    def context_updater(self) -> ContextUpdater:
        """A per-turn ``Context update N`` block builder over every card's context."""
        return ContextUpdater(self.get_context_states())

    def get_commands(self) -> CommandRegistry:
        """A registry of every card's COMMAND callables."""
        return CommandRegistry(fn for _, fn in self._commands)

    def get_views(self) -> list[CardView]:
        """Every card's views of the team's state (RESOURCE channel), with the card's type
        and tool names (who may read a view: see :mod:`toolcards.core.views`)."""
        return card_views(self.cards)

    def get_toolsets(self) -> list[AbstractToolset[Any]]:
        """Extra toolsets contributed by cards (for example MCP servers). One that takes names
        it does not choose (a remote server's) is told the local tools' names, the card tools'
        and those given to :meth:`reserve` (its ``reserve``): a remote tool never takes a local
        tool's name (it made the run, or the server, fail on a duplicate name). Several such
        toolsets are combined so that a name two of them list is the earlier card's
        (``FirstNameWins``): a later server cannot take it, nor make the run fail with no
        tools."""
        toolsets = [ts for card in self.cards for ts in card.get_toolsets()]
        taken = self._reserved | {fn.__name__ for _, fn in self._tools}
        remote = [ts for ts in toolsets if callable(getattr(ts, "reserve", None))]
        for toolset in remote:
            toolset.reserve(taken)
        if len(remote) < 2:
            return toolsets
        from toolcards.core.toolset import FirstNameWins  # lazy: pydantic-ai, ~1 s

        others = [ts for ts in toolsets if all(ts is not r for r in remote)]
        return [FirstNameWins(remote), *others]

    def function_toolset(self) -> AbstractToolset[Any]:
        """A pydantic-ai ``FunctionToolset`` of the TOOL_CALL tools with their annotations."""
        if self._toolset is None:
            from toolcards.core.toolset import build_function_toolset  # lazy: pydantic-ai, ~1 s

            deferred = {fn.__name__ for card, fn in self._tools if card.defer_loading}
            self._toolset = build_function_toolset([fn for _, fn in self._tools], deferred)
        return self._toolset

    def toolset(self) -> AbstractToolset[Any]:
        """One pydantic-ai toolset: the card tools plus every card-contributed toolset."""
        extra = self.get_toolsets()
        if not extra:
            return self.function_toolset()
        from pydantic_ai.toolsets import CombinedToolset  # lazy: pydantic-ai, ~1 s

        return CombinedToolset([self.function_toolset(), *extra])

    def capability(
        self,
        toolset: AbstractToolset[Any] | None = None,
        *,
        authority: Literal["operator", "user", "none"] = "none",
    ) -> CardsCapability:
        """The cards as one pydantic-ai capability: ``toolset`` (default :meth:`toolset`), and
        before each model request each card's summary and context (team state: data, unless
        ``authority`` gives it more), so ``Agent(model, capabilities=[factory.capability()])``
        is all an agent needs. Governed: ``toolcards.surfaces.agent.GovernedCards``."""
        from toolcards.core.agent_capability import CardsCapability  # lazy: pydantic-ai, ~1 s

        return CardsCapability(self, toolset, authority=authority)

    def tool_descriptions(self) -> dict[str, str]:
        """Tool name -> the description a model reads."""
        return {fn.__name__: describe(fn) for _, fn in self._tools}

    def tool_annotations(self) -> dict[str, dict[str, Any]]:
        """Tool name -> annotation metadata."""
        return {fn.__name__: annotations_of(fn).as_metadata() for _, fn in self._tools}


def _check_unique(entries: list[tuple[ToolCard, ToolFunc]], what: str) -> None:
    owners: dict[str, ToolCard] = {}
    for card, fn in entries:
        name = fn.__name__
        first = owners.get(name)
        if first is not None:
            raise ValueError(
                f"duplicate {what} name {name!r}: defined by {first.card_type} and {card.card_type}"
            )
        owners[name] = card


def card_views(cards: Iterable[ToolCard]) -> list[CardView]:
    """The views ``cards`` offer (bound to a team or not), each with its card's type and tool
    names."""
    found: list[CardView] = []
    for card in cards:
        views = card.get_views()
        if views:
            tools = tuple(fn.__name__ for fn, _ in card.build(Channels.TOOL_CALL))
            found += [CardView(card.card_type, tools, view) for view in views]
    return found
