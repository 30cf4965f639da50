"""Core contracts: cards, params, channels, factory, commands, errors, events, context,
observers and typed actor handles. Imports nothing else of toolcards."""

from toolcards._lazy import TYPE_CHECKING, lazy_names

if TYPE_CHECKING:
    from toolcards.core.actors import DEFAULT_ASK_TIMEOUT, ActorHandle, ActorUnavailable
    from toolcards.core.card import CardCapability, ToolCard, ToolFunc
    from toolcards.core.channels import COMMAND, LLM_CONTEXT, SYSTEM_PROMPT, TOOL_CALL, Channels
    from toolcards.core.commands import (
        CommandArg,
        CommandDescriptor,
        CommandRegistry,
        Rest,
        RestOfLine,
    )
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
    from toolcards.core.trust import CommandRule, HostAccess, HostTrust, Reach, UntrustedField

# names -> their module, imported on first use: a module of the core (``toolcards.core.errors``,
# ``toolcards.core.yaml_safe``) loads without the cards' pydantic models
_NAMES = {
    "DEFAULT_ASK_TIMEOUT": "toolcards.core.actors",
    "ActorHandle": "toolcards.core.actors",
    "ActorUnavailable": "toolcards.core.actors",
    "CardCapability": "toolcards.core.card",
    "ToolCard": "toolcards.core.card",
    "ToolFunc": "toolcards.core.card",
    "COMMAND": "toolcards.core.channels",
    "LLM_CONTEXT": "toolcards.core.channels",
    "SYSTEM_PROMPT": "toolcards.core.channels",
    "TOOL_CALL": "toolcards.core.channels",
    "Channels": "toolcards.core.channels",
    "CommandArg": "toolcards.core.commands",
    "CommandDescriptor": "toolcards.core.commands",
    "CommandRegistry": "toolcards.core.commands",
    "Rest": "toolcards.core.commands",
    "RestOfLine": "toolcards.core.commands",
    "ContextState": "toolcards.core.context",
    "ContextUpdater": "toolcards.core.context",
    "CommandNotRecognized": "toolcards.core.errors",
    "RetriableError": "toolcards.core.errors",
    "ToolcardsError": "toolcards.core.errors",
    "ToolNotConfigured": "toolcards.core.errors",
    "ToolObserverGone": "toolcards.core.errors",
    "TransientError": "toolcards.core.errors",
    "ToolStateEvent": "toolcards.core.events",
    "ToolFactory": "toolcards.core.factory",
    "ActorToolObserver": "toolcards.core.observer",
    "TeamManagementToolObserver": "toolcards.core.observer",
    "ToolObserver": "toolcards.core.observer",
    "BaseToolParam": "toolcards.core.params",
    "PathArgs": "toolcards.core.pathargs",
    "CARD_TYPES": "toolcards.core.registry",
    "dump_card": "toolcards.core.registry",
    "dump_cards": "toolcards.core.registry",
    "load_card": "toolcards.core.registry",
    "load_cards": "toolcards.core.registry",
    "ToolAnnotations": "toolcards.core.spec",
    "annotate": "toolcards.core.spec",
    "annotations_of": "toolcards.core.spec",
    "describe": "toolcards.core.spec",
    "set_instructions": "toolcards.core.spec",
    "CommandRule": "toolcards.core.trust",
    "HostAccess": "toolcards.core.trust",
    "HostTrust": "toolcards.core.trust",
    "Reach": "toolcards.core.trust",
    "UntrustedField": "toolcards.core.trust",
}

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
    "CommandRule",
    "ContextState",
    "ContextUpdater",
    "HostAccess",
    "HostTrust",
    "PathArgs",
    "Reach",
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
    "UntrustedField",
    "annotate",
    "annotations_of",
    "describe",
    "dump_card",
    "dump_cards",
    "load_card",
    "load_cards",
    "set_instructions",
]

__getattr__, __dir__ = lazy_names(__name__, _NAMES, renamed={"Capability": "CardCapability"})
