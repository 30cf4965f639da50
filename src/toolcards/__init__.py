"""toolcards: serializable, governed, team-shared tools for pydantic-ai agents.

Every public name is imported on first use (the core needs pydantic, the cards more), so
``import toolcards`` costs milliseconds and a program pays only for what it touches.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from toolcards._builtin import BUILTIN_CARDS

_CORE_NAMES = frozenset(
    {
        "BaseToolParam",
        "Channels",
        "CommandNotRecognized",
        "CommandRegistry",
        "ContextState",
        "RetriableError",
        "ToolCard",
        "ToolFactory",
        "ToolObserver",
        "ToolObserverGone",
        "ToolStateEvent",
        "dump_cards",
        "load_cards",
    }
)

if TYPE_CHECKING:
    from toolcards.core import (
        BaseToolParam,
        Channels,
        CommandNotRecognized,
        CommandRegistry,
        ContextState,
        RetriableError,
        ToolCard,
        ToolFactory,
        ToolObserver,
        ToolObserverGone,
        ToolStateEvent,
        dump_cards,
        load_cards,
    )
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

__version__ = "0.1.0"

__all__ = [
    "BaseToolParam",
    "Channels",
    "CommandNotRecognized",
    "CommandRegistry",
    "ContextState",
    "ExecTool",
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
    "VectorStoreTool",
    "WorkspaceTool",
    "dump_cards",
    "load_cards",
]


def __getattr__(name: str) -> Any:
    if name in _CORE_NAMES:
        value = getattr(importlib.import_module("toolcards.core"), name)
    elif name in BUILTIN_CARDS:
        module, attr = BUILTIN_CARDS[name]
        value = getattr(importlib.import_module(module), attr)
    else:
        raise AttributeError(f"module 'toolcards' has no attribute {name!r}")
    globals()[name] = value
    return value
