"""Core contracts: cards, params, channels, factory, commands, errors, events, context,
observers and typed actor handles. Imports nothing else of toolcards."""

from toolcards._lazy import renamed_names
from toolcards.core.actors import DEFAULT_ASK_TIMEOUT, ActorHandle, ActorUnavailable
from toolcards.core.card import CardCapability, ToolCard, ToolFunc
from toolcards.core.channels import COMMAND, LLM_CONTEXT, SYSTEM_PROMPT, TOOL_CALL, Channels
from toolcards.core.commands import CommandArg, CommandDescriptor, CommandRegistry, Rest, RestOfLine
from toolcards.core.context import ContextState, ContextUpdater
from toolcards.core.errors import (
    CommandNotRecognized,
    RetriableError,
    ToolcardsError,
    ToolNotConfigured,
    ToolObserverGone,
    TransientError,
)
from toolcards.core.events import ToolStateEvent
from toolcards.core.factory import ToolFactory
from toolcards.core.observer import ActorToolObserver, TeamManagementToolObserver, ToolObserver
from toolcards.core.params import BaseToolParam
from toolcards.core.pathargs import PathArgs
from toolcards.core.registry import CARD_TYPES, dump_card, dump_cards, load_card, load_cards
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
    "DEFAULT_ASK_TIMEOUT",
    "LLM_CONTEXT",
    "SYSTEM_PROMPT",
    "TOOL_CALL",
    "ActorHandle",
    "ActorToolObserver",
    "ActorUnavailable",
    "BaseToolParam",
    "CardCapability",
    "Channels",
    "CommandArg",
    "CommandDescriptor",
    "CommandNotRecognized",
    "CommandRegistry",
    "ContextState",
    "ContextUpdater",
    "PathArgs",
    "Rest",
    "RestOfLine",
    "RetriableError",
    "TeamManagementToolObserver",
    "ToolAnnotations",
    "ToolCard",
    "ToolFactory",
    "ToolFunc",
    "ToolNotConfigured",
    "ToolObserver",
    "ToolObserverGone",
    "ToolStateEvent",
    "ToolcardsError",
    "TransientError",
    "annotate",
    "annotations_of",
    "describe",
    "dump_card",
    "dump_cards",
    "load_card",
    "load_cards",
    "set_instructions",
]

__getattr__ = renamed_names(__name__, {"Capability": "CardCapability"})
