"""Where a capability is surfaced."""

from __future__ import annotations

from enum import StrEnum


class Channels(StrEnum):
    """The channels a card capability can be exposed on."""

    TOOL_CALL = "tool_call"
    """A tool the model calls."""
    SYSTEM_PROMPT = "system_prompt"
    """Text added to the system prompt, refreshed on every run."""
    LLM_CONTEXT = "llm_context"
    """A per-turn context block: full on the first turn, then only what changed."""
    COMMAND = "command"
    """A ``/slash`` command for humans and orchestrators; never seen by the model."""
    RESOURCE = "resource"
    """A view of the team's state for people and clients (an MCP resource, a dashboard
    panel); never seen by the model."""


TOOL_CALL = Channels.TOOL_CALL
SYSTEM_PROMPT = Channels.SYSTEM_PROMPT
LLM_CONTEXT = Channels.LLM_CONTEXT
COMMAND = Channels.COMMAND
RESOURCE = Channels.RESOURCE
