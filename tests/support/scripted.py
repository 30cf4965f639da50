"""Scripted pydantic-ai models and small waits, shared by the tests.

No test reaches a real model provider: members and agents run on ``FunctionModel`` scripts
from here. Importable as ``support.scripted`` (``tests`` is on the test path).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from support.processes import free_port
from toolcards.core.errors import TransientError

T = TypeVar("T")

__all__ = [
    "Responder",
    "Script",
    "ScriptedMember",
    "SequenceScript",
    "call_tool",
    "echo",
    "free_port",
    "is_prompt",
    "last_part",
    "once_served",
    "tool_results",
    "user_prompts",
    "wait_until",
]

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


def is_prompt(part: Any) -> bool:
    """True for a user's prompt; False for what pydantic-ai renders on the user channel for a
    FunctionModel: capability parts (framed data, subclasses of ``UserPromptPart``) and the
    application's notes about them (``<system>...</system>`` text)."""
    if type(part) is not UserPromptPart:
        return False
    return not (isinstance(part.content, str) and part.content.startswith("<system>"))


def user_prompts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if is_prompt(p)
    ]


def last_part(messages: list[ModelMessage]) -> Any:
    return messages[-1].parts[-1]


def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Answer ``echo: <last user prompt>``."""
    return ModelResponse(parts=[TextPart(f"echo: {user_prompts(messages)[-1]}")])


def call_tool(name: str, args: dict[str, Any]) -> Responder:
    """Call ``name(**args)`` on a user prompt; then answer ``tool said: <result>``."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        answered = [p for p in messages[-1].parts if not isinstance(p, UserPromptPart)]
        if not answered:  # a prompt (and the context rendered beside it)
            return ModelResponse(parts=[ToolCallPart(name, args)])
        part = answered[-1]
        return ModelResponse(parts=[TextPart(f"tool said: {getattr(part, 'content', part)}")])

    return respond


def wait_until(predicate: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll ``predicate`` until it holds (True); fail after ``timeout`` (a bound, not a
    measurement)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.01)
    return True


def once_served(read: Callable[[], T], timeout: float = 60.0) -> T:
    """What ``read`` answers once it no longer raises a retry (a store coming back); fail
    after ``timeout`` (a bound)."""
    found: list[T] = []

    def served() -> bool:
        try:
            found.append(read())
        except TransientError:
            return False
        return True

    wait_until(served, timeout)
    return found[-1]


Plan = Callable[[str], tuple[str, dict[str, Any]] | None]
"""Prompt text -> the one tool call to make for it (None: just answer)."""


class ScriptedMember:
    """A FunctionModel that calls at most one tool per prompt, then answers with its result.

    ``seen`` holds every user prompt the model was shown; ``tool_results`` every tool return.
    ``gate``, when set, blocks each turn until it is released (to keep a member busy).
    """

    def __init__(self, plan: Plan | None = None) -> None:
        self.plan = plan
        self.seen: list[str] = []
        self.tool_results: list[str] = []
        self.gate: threading.Event | None = None
        self._lock = threading.Lock()
        self.model = FunctionModel(self._respond)

    def _respond(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returns:
            with self._lock:
                self.tool_results.extend(str(p.content) for p in returns)
            return ModelResponse(parts=[TextPart("done: " + str(returns[-1].content))])
        prompt = "\n".join(str(p.content) for p in last.parts if is_prompt(p))
        with self._lock:
            self.seen.append(prompt)
        if self.gate is not None:
            self.gate.wait(30)
        call = self.plan(prompt) if self.plan is not None else None
        if call is None:
            return ModelResponse(parts=[TextPart("ok")])
        return ModelResponse(parts=[ToolCallPart(call[0], call[1])])

    def saw(self, text: str) -> bool:
        with self._lock:
            return any(text in prompt for prompt in self.seen)


def tool_results(messages: list[ModelMessage]) -> list[str]:
    out = []
    for msg in messages:
        if not isinstance(msg, ModelRequest):
            continue
        for part in msg.parts:
            if isinstance(part, RetryPromptPart):  # older pydantic-ai's form of a retried call
                out.append(f"{part.tool_name}: retried: {part.model_response()}")
            elif isinstance(part, ToolReturnPart):
                out.append(f"{part.tool_name}: {part.outcome}: {part.content}")
    return out


class SequenceScript:
    """A FunctionModel that makes the given tool calls, one model step each, then answers
    with every tool result it saw (one per line). ``seen_tools`` records each step's tools."""

    def __init__(self, calls: Sequence[tuple[str, dict[str, Any]]]) -> None:
        self.calls = list(calls)
        self.step = 0
        self.seen_tools: list[list[str]] = []
        self.seen_defs: list[Any] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen_tools.append([t.name for t in info.function_tools])
        self.seen_defs.append(list(info.function_tools))
        if self.step < len(self.calls):
            name, args = self.calls[self.step]
            self.step += 1
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call-{self.step}")])
        return ModelResponse(parts=[TextPart("\n".join(tool_results(messages)) or "done")])

    @property
    def model(self) -> FunctionModel:
        return FunctionModel(self.__call__)  # a bound method: older FunctionModels read __name__
