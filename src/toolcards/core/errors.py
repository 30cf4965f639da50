"""Errors shared by every layer."""

from __future__ import annotations


class ToolcardsError(Exception):
    """Base class of toolcards' own errors."""


class RetriableError(ToolcardsError):
    """A failure the model can fix by calling again with different arguments.

    Surfaces turn it into a retry prompt (pydantic-ai ``ModelRetry``); it never ends a run.
    """


class ToolNotConfigured(ToolcardsError):
    """The tool cannot run as configured (no API key, a rejected credential). The call's
    outcome is ``error`` on every surface; the message, which names what to set, is safe to
    show and reaches the caller as ``error: <message>``. Calling again will not help."""


class ToolObserverGone(ToolcardsError):
    """The agent or team member that owned a card has been garbage-collected or stopped."""


class CommandNotRecognized(ToolcardsError):
    """A slash-command names no registered command; nothing was run."""

    def __init__(self, name: str, known: list[str] | None = None) -> None:
        self.name = name
        self.known = sorted(known or [])
        hint = f" Known commands: {', '.join(self.known)}." if self.known else ""
        super().__init__(f"Command '{name}' is not recognized.{hint}")
