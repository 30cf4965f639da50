"""Scripted FunctionModel members and a small card, shared by the member tests.

Importable as ``members.support`` (``tests`` is on the test path).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import PrivateAttr

from toolcards.core import ContextState, ToolCard
from toolcards.runtime import Team


def message_events(team: Team, kind: str | None = None) -> list[dict[str, Any]]:
    return [
        e.payload
        for e in team.events()
        if e.tool_id == "messages" and (kind is None or e.payload.get("event") == kind)
    ]


def lifecycle(team: Team, kind: str) -> list[dict[str, Any]]:
    return [e.payload for e in team.events() if e.tool_id == "team" and e.payload["event"] == kind]


class NotesCard(ToolCard):
    """Notes kept on the card: a tool, a system prompt, per-turn context and a command."""

    header: str = "You keep notes."
    _notes: list[str] = PrivateAttr(default_factory=list)

    def get_tools(self) -> list[Callable[..., Any]]:
        def note_add(text: str) -> str:
            """Add a note."""
            self._notes.append(text)
            return f"noted #{len(self._notes)}"

        def record_purge(record: str) -> str:
            """Delete a record for good."""
            return f"purged {record}"

        return [note_add, record_purge]

    def get_system_prompts(self) -> list[Callable[[], str]]:
        return [lambda: self.header]

    def get_context_states(self) -> list[Callable[[], ContextState]]:
        def notes() -> ContextState:
            items = {str(i): n for i, n in enumerate(self._notes)}
            return ContextState(key="notes", title="Notes", items=items)

        return [notes]

    def get_commands(self) -> list[Callable[..., Any]]:
        def notes() -> str:
            """List the notes."""
            return "\n".join(self._notes) or "(no notes)"

        return [notes]


class StaffCard(ToolCard):
    """Team management from inside a member's turn, through its observer."""

    def get_tools(self) -> list[Callable[..., Any]]:
        def recruit(role: str) -> str:
            """Hire a member for ``role``."""
            return str(self.get_observer().on_hire(role))

        def resign() -> str:
            """Leave the team."""
            observer = self.get_observer()
            observer.on_fire(observer.address)
            return "bye"

        return [recruit, resign]
