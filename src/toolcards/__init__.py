"""toolcards: serializable, governed, team-shared tools for pydantic-ai agents.

Every public name is imported on first use (the core needs pydantic, the cards more), so
``import toolcards`` costs milliseconds and a program pays only for what it touches.
"""

from __future__ import annotations

from toolcards._builtin import BUILTIN_CARDS
from toolcards._lazy import TYPE_CHECKING, lazy_names
from toolcards._version import package_version

if TYPE_CHECKING:
    from typing import Any

_CORE_NAMES = (
    "BaseToolParam",
    "CardCapability",
    "Channels",
    "CommandNotRecognized",
    "CommandRegistry",
    "ContextState",
    "HostTrust",
    "RetriableError",
    "ToolCard",
    "ToolFactory",
    "ToolObserver",
    "ToolObserverGone",
    "ToolStateEvent",
    "ToolcardsError",
    "TransientError",
    "dump_cards",
    "load_cards",
)

if TYPE_CHECKING:
    from toolcards.core import (
        BaseToolParam,
        CardCapability,
        Channels,
        CommandNotRecognized,
        CommandRegistry,
        ContextState,
        HostTrust,
        RetriableError,
        ToolCard,
        ToolcardsError,
        ToolFactory,
        ToolObserver,
        ToolObserverGone,
        ToolStateEvent,
        TransientError,
        dump_cards,
        load_cards,
    )
    from toolcards.surfaces.agent import GovernedCards
    from toolcards.tools.exec.card import ExecTool
    from toolcards.tools.knowledge_graph.card import KnowledgeGraphTool
    from toolcards.tools.mcp.card import MCPTool
    from toolcards.tools.notification.card import NotificationTool
    from toolcards.tools.planning.card import PlanningTool
    from toolcards.tools.search.card import SearchTool
    from toolcards.tools.skills.card import SkillTool
    from toolcards.tools.team.card import TeamTool
    from toolcards.tools.vector_store.card import VectorStoreTool
    from toolcards.tools.workspace.card import WorkspaceTool

__all__ = [
    "BaseToolParam",
    "CardCapability",
    "Channels",
    "CommandNotRecognized",
    "CommandRegistry",
    "ContextState",
    "ExecTool",
    "GovernedCards",
    "HostTrust",
    "KnowledgeGraphTool",
    "MCPTool",
    "NotificationTool",
    "PlanningTool",
    "RetriableError",
    "SearchTool",
    "SkillTool",
    "TeamTool",
    "ToolCard",
    "ToolFactory",
    "ToolObserver",
    "ToolObserverGone",
    "ToolStateEvent",
    "ToolcardsError",
    "TransientError",
    "VectorStoreTool",
    "WorkspaceTool",
    "dump_cards",
    "load_cards",
]


_lazy_getattr, __dir__ = lazy_names(
    __name__,
    {
        **dict.fromkeys(_CORE_NAMES, "toolcards.core"),
        **{name: module for name, (module, _) in BUILTIN_CARDS.items()},
        "GovernedCards": "toolcards.surfaces.agent",
    },
    renamed={"Capability": "CardCapability", "ToolCards": "GovernedCards"},
)


def __getattr__(name: str) -> Any:
    if name == "__version__":
        found = package_version()
        globals()["__version__"] = found
        return found
    return _lazy_getattr(name)
