"""Scripted FunctionModel members and a small card, shared by the member tests.

Importable as ``members.support`` (``tests`` is on the test path).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from pydantic import PrivateAttr
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolcards.core import ContextState, ToolCard
from toolcards.runtime import Team

Responder = Callable[[list[ModelMessage], AgentInfo], ModelResponse]


class Script:
    """A FunctionModel whose answers come from ``respond``; every call is recorded."""

    def __init__(self, respond: Responder | None = None) -> None:
        self.respond = respond or echo
        self.calls: list[tuple[list[ModelMessage], AgentInfo]] = []
        self._lock = threading.Lock()
        self.model = FunctionModel(self._call)

    def _call(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        with self._lock:
            self.calls.append((list(messages), info))
        return self.respond(messages, info)

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.calls)

    def prompts(self, call: int = -1) -> list[str]:
        """Every user prompt text in the history of the ``call``-th call."""
        return user_prompts(self.calls[call][0])

    def tool_returns(self, call: int = -1) -> list[ToolReturnPart]:
        messages = self.calls[call][0]
        return [
            p
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]


def user_prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


def last_part(messages: list[ModelMessage]) -> Any:
    return messages[-1].parts[-1]


def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Answer ``echo: <last user prompt>``."""
    return ModelResponse(parts=[TextPart(f"echo: {user_prompts(messages)[-1]}")])


def call_tool(name: str, args: dict[str, Any]) -> Responder:
    """Call ``name(**args)`` on a user prompt; then answer ``tool said: <result>``."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = last_part(messages)
        if isinstance(part, UserPromptPart):
            return ModelResponse(parts=[ToolCallPart(name, args)])
        return ModelResponse(parts=[TextPart(f"tool said: {getattr(part, 'content', part)}")])

    return respond


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout`` (a bound, not a measurement)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)


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
