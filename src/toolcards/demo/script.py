"""Scripted members: a pydantic-ai ``FunctionModel`` that follows a written plan of tool calls.

Each scene is picked by a trigger phrase found in the newest user message, so the same model
serves several messages, a resumed conversation and unexpected messages (which it
acknowledges). Arguments may be computed from the results of the scene's earlier calls.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

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

Args = dict[str, Any] | Callable[[list[str]], dict[str, Any]]


@dataclass(frozen=True)
class Scene:
    """What a member does when a message contains ``trigger``: these calls, then a reply."""

    trigger: str
    calls: Sequence[tuple[str, Args]] = field(default_factory=tuple)
    reply: str | Callable[[list[str]], str] = "done"


def first_int(text: str) -> int:
    """The first whole number in a tool result (for ids the board assigned)."""
    found = re.search(r"\d+", text)
    if found is None:
        raise ValueError(f"no number in {text!r}")
    return int(found.group())


def scripted_model(scenes: Sequence[Scene], *, name: str = "scripted") -> Any:
    """A ``FunctionModel`` that plays ``scenes``."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt, results = "", list[str]()
        for message in messages:
            if not isinstance(message, ModelRequest):
                continue
            for part in message.parts:
                if type(part) is UserPromptPart and not _is_note(part.content):
                    prompt, results = str(part.content), []
                elif isinstance(part, ToolReturnPart | RetryPromptPart):
                    content = part.content
                    text = content if isinstance(content, str) else json.dumps(content, default=str)
                    results.append(text)
        scene = next((s for s in scenes if s.trigger.lower() in prompt.lower()), None)
        if scene is None:
            return ModelResponse(parts=[TextPart(f"Noted: {prompt.splitlines()[-1][:200]}")])
        if len(results) < len(scene.calls):
            tool, args = scene.calls[len(results)]
            values = args(results) if callable(args) else args
            call_id = f"{name}-{len(results)}"
            return ModelResponse(parts=[ToolCallPart(tool, values, tool_call_id=call_id)])
        reply = scene.reply(results) if callable(scene.reply) else scene.reply
        return ModelResponse(parts=[TextPart(reply)])

    return FunctionModel(respond, model_name=name)


def _is_note(content: object) -> bool:
    """True for the application's notes a ``FunctionModel`` gets on the user channel
    (``<system>`` text, beside the framed team state, a subclass of ``UserPromptPart``)."""
    return isinstance(content, str) and content.startswith("<system>")
