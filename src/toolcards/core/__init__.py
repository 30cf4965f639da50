"""Core contracts: cards, params, channels, factory, commands, errors, events, context."""

from toolcards.core.card import ToolCard, ToolFunc
from toolcards.core.channels import COMMAND, LLM_CONTEXT, SYSTEM_PROMPT, TOOL_CALL, Channels
from toolcards.core.commands import CommandArg, CommandDescriptor, CommandRegistry, Rest, RestOfLine
from toolcards.core.context import ContextState, ContextUpdater
from toolcards.core.errors import (
    CommandNotRecognized,
    RetriableError,
    ToolcardsError,
    ToolObserverGone,
)
from toolcards.core.events import ToolStateEvent
from toolcards.core.factory import ToolFactory, order_cards, wrap_retriable
from toolcards.core.observer import ActorToolObserver, TeamManagementToolObserver, ToolObserver
from toolcards.core.params import BaseToolParam
from toolcards.core.registry import (
    CARD_TYPES,
    CardList,
    dump_card,
    dump_cards,
    load_card,
    load_cards,
)
from toolcards.core.spec import (
    ToolAnnotations,
    annotate,
    annotations_of,
    describe,
    set_instructions,
)

__all__ = [
    "CARD_TYPES",
    "COMMAND",
    "LLM_CONTEXT",
    "SYSTEM_PROMPT",
    "TOOL_CALL",
    "ActorToolObserver",
    "BaseToolParam",
    "CardList",
    "Channels",
    "CommandArg",
    "CommandDescriptor",
    "CommandNotRecognized",
    "CommandRegistry",
    "ContextState",
    "ContextUpdater",
    "Rest",
    "RestOfLine",
    "RetriableError",
    "TeamManagementToolObserver",
    "ToolAnnotations",
    "ToolCard",
    "ToolFactory",
    "ToolFunc",
    "ToolObserver",
    "ToolObserverGone",
    "ToolStateEvent",
    "ToolcardsError",
    "annotate",
    "annotations_of",
    "describe",
    "dump_card",
    "dump_cards",
    "load_card",
    "load_cards",
    "order_cards",
    "set_instructions",
    "wrap_retriable",
]
