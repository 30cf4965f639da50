"""What only the MCP server offers beside the runtime's governed tools: prompts, the
config's own resources, the cards' views as resources, output schemas (from the tools'
Python callables) and the task rows, built from a :class:`SurfaceRuntime` (its config and
what its registry was built from)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolcards.core.views import CardView
from toolcards.stores.open import open_tasks
from toolcards.surfaces.runtime import SurfaceRuntime, imported

if TYPE_CHECKING:
    from toolcards.core.factory import ToolFactory
    from toolcards.stores.tasks import SqlTasks


@dataclass(frozen=True)
class PromptEntry:
    """A prompt the server may offer. A card's system prompt names its ``card`` type and the
    card's ``tools``: it shows team state, so only a caller that may read the card gets it
    (:func:`toolcards.governance.card_reads.may_read_card`)."""

    name: str
    fn: Callable[..., Any]
    description: str | None
    card: str | None = None
    tools: tuple[str, ...] = ()


@dataclass
class MCPOptions:
    """The MCP server's own part of a runtime."""

    prompts: list[PromptEntry] = field(default_factory=list)
    """The cards' system prompts, then the config's ``prompts:``."""
    resources: list[Any] = field(default_factory=list)
    """The config's ``resources:`` (``StaticResource`` / ``TemplateResource`` objects)."""
    views: list[CardView] = field(default_factory=list)
    """The views of the team's state the cards offer, served as resources."""
    tool_functions: dict[str, Callable[..., Any]] = field(default_factory=dict)
    """The Python callables behind the registry's tools, by id, where known (their return
    types give the tools' output schemas)."""
    tasks: SqlTasks | None = None
    """The team's task rows (shared by every process of the config; None: the server keeps
    its tasks in memory)."""

    @classmethod
    def of(cls, runtime: SurfaceRuntime) -> MCPOptions:
        """The options of ``runtime``: from its cards and plain tools, and from its config
        (``prompts:``, ``resources:``, the task rows beside its approvals, closed with the
        runtime). A ``prompts:`` or ``resources:`` entry that cannot be imported is a
        :class:`~toolcards.surfaces.config.ConfigError`."""
        factory, config = runtime.factory, runtime.config
        options = cls(
            prompts=card_prompts(factory) if factory is not None else [],
            views=factory.get_views() if factory is not None else [],
            tool_functions=_functions(factory, runtime.tools),
        )
        if config is None:
            return options
        source = config.source
        options.prompts += [
            _prompt(fn) for spec in config.prompts for fn in imported(spec, source, "prompts")
        ]
        options.resources = [
            r for spec in config.resources for r in imported(spec, source, "resources")
        ]
        options.tasks = open_tasks(config.approvals_location, config.team_id)
        runtime.own(options.tasks.close)
        return options


def card_prompts(factory: ToolFactory) -> list[PromptEntry]:
    """Each card's system-prompt providers as prompts named after the card type."""
    found: list[PromptEntry] = []
    for card in factory.cards:
        providers = card.get_system_prompts()
        kind = type(card).__name__
        tools = tuple(factory.tool_names(card))
        for i, provider in enumerate(providers):
            name = kind if len(providers) == 1 else f"{kind}_{i + 1}"
            description = f"The system prompt of the {kind} card."
            found.append(PromptEntry(name, provider, description, card=card.card_type, tools=tools))
    return found


def _prompt(fn: Callable[..., Any]) -> PromptEntry:
    doc = (fn.__doc__ or "").strip() or None
    return PromptEntry(getattr(fn, "__name__", "prompt"), fn, doc)


def _functions(
    factory: ToolFactory | None, tools: list[Callable[..., Any]]
) -> dict[str, Callable[..., Any]]:
    cards = factory.get_tools() if factory is not None else []
    return {fn.__name__: fn for fn in [*cards, *tools]}
