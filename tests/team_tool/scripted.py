"""Scripted FunctionModel members for team tests: each records every prompt it was shown."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

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
        prompt = "\n".join(str(p.content) for p in last.parts if isinstance(p, UserPromptPart))
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


def wait_until(predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll ``predicate`` (bounded); True as soon as it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()
